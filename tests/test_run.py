"""paradnn.run end to end on the CPU: every family x variant x dtype, failures as data, the CLI."""

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

import paradnn
from paradnn import CNN, FC, RNN
from paradnn import meters
from paradnn.record import METRICS, ONLY_SOME_METRICS

TINY_SPECS = [
    FC(2, 16, 12, 5),
    # Image 96: a 3x3 last stage, compiled once on the CPU (the cnn family's tiny presets say why).
    CNN("residual", 1, 4, 96, 5),
    CNN("bottleneck", 1, 4, 96, 5),
    RNN("rnn", 2, 8, 4, 11),
    RNN("lstm", 2, 8, 4, 11),
    RNN("gru", 2, 8, 4, 11),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("spec", TINY_SPECS, ids=str)
def test_every_family_variant_and_dtype_trains_to_a_finite_loss(spec, dtype, tiny_settings):
    record = paradnn.run(spec, batch=4, dtype=dtype, settings=tiny_settings)
    assert record.status == "ok", record.error
    assert math.isfinite(record.metrics["final_loss"])
    assert record.workload["dtype"] == dtype


@pytest.mark.parametrize("optimizer", ["rmsprop", "sgd", "momentum", "adam", "adafactor"])
def test_every_optimizer_runs(optimizer, tiny_settings):
    record = paradnn.run(FC(2, 16, 12, 5), batch=4, optimizer=optimizer, settings=tiny_settings)
    assert record.status == "ok", record.error
    assert record.workload["optimizer"] == optimizer


def test_record_carries_every_contracted_metric(tiny_settings):
    record = paradnn.run(FC(3, 64, 100, 10), batch=16, settings=tiny_settings)
    row = record.to_dict()
    for name in METRICS:
        if name in meters.MAY_BE_NULL:  # null on hosts without the counter, the reason recorded
            continue
        if name in ONLY_SOME_METRICS:  # a retry's only
            continue
        assert row[name] is not None, name
    assert row["step_time_p10_s"] <= row["step_time_s"] <= row["step_time_p90_s"]
    assert row["examples_per_sec"] == pytest.approx(16 / row["step_time_s"])
    assert row["flops_per_sec"] == pytest.approx(row["flops_per_step"] / row["step_time_s"])
    assert row["params"] == 100 * 64 + 64 + 2 * (64 * 64 + 64) + 64 * 10 + 10
    assert row["peak_source"] == "measured"  # a CPU has no spec peak
    # The ceiling is the peak's own probe on a CPU (measured once), and both utilizations
    # divide by it.
    assert (row["ceiling_flops"], row["ceiling_bytes_per_sec"], row["ceiling_id"], row["ceiling_method"]) == (
        row["peak_flops"], row["peak_bytes_per_sec"], row["peak_id"], row["peak_method"])
    assert row["ceiling_utilization"] == pytest.approx(row["flops_per_sec"] / row["ceiling_flops"])
    assert row["model_ceiling_utilization"] == pytest.approx(row["model_flops_utilization"])
    for field in ("jax_version", "jaxlib_version", "flax_version", "python_version", "device_kind",
                  "device_platform", "cpu_model", "steps_per_call", "cv_target"):
        assert row[field] not in (None, ""), field
    assert row["steps_per_call"] == tiny_settings.steps_per_call
    # No limit given: the device's own as JAX reports it (on a CPU, the host's memory).
    from paradnn import hardware

    assert row["memory_limit_source"] == "device"
    assert row["memory_limit_bytes"] == hardware.device_memory_bytes() > 0



def test_record_shows_itself_as_an_escaped_html_table(tiny_settings):
    """In a notebook a record is a small table: status, workload, framework, platform, the
    headline metrics with units, warnings, error and time; every value is escaped, so a hostile
    error message (or a plug-in's field) cannot inject markup."""
    import dataclasses

    record = paradnn.run(FC(2, 16, 12, 5), batch=4, settings=tiny_settings)
    table = record._repr_html_()
    assert table.startswith("<table>") and table.endswith("</table>")
    assert record.key in table and "fc layers=2 nodes=16" in table
    assert f"<td style=\"text-align:left\">{record.status}</td>" in table
    assert record.platform["device_kind"] in table and record.time_utc in table
    for name in ("step_time_s", "examples_per_sec", "flops_utilization"):
        assert f">{name}</th>" in table, name
    assert " ms<" in table or " s<" in table or " us<" in table  # the step time with its unit
    assert table.count("<tr>") == table.count("</tr>") >= 8
    hostile = dataclasses.replace(record, status="error", error="<script>alert('x')</script> & \"q\"",
                                  warnings=("contended", "<b>"))
    table = hostile._repr_html_()
    assert "<script>" not in table and "<b>" not in table
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;q&quot;" in table
    assert "contended, &lt;b&gt;" in table

def test_model_that_cannot_fit_is_oom_before_compiling(tiny_settings):
    # 64 layers of 4096^2 float32 weights: ~4.3 GB with the optimizer state, limit 100 MB.
    record = paradnn.run(FC(64, 4096, 2000, 1000), batch=64, settings=tiny_settings,
                         memory_limit_bytes=100_000_000)
    assert record.status == "oom"
    assert "before compiling" in record.error
    assert "compile_s" not in record.metrics
    # The record says which limit it was checked against.
    assert record.metrics["memory_limit_bytes"] == 100_000_000
    assert record.metrics["memory_limit_source"] == "given"


def test_model_whose_activations_do_not_fit_is_oom_from_memory_analysis(tiny_settings):
    # Weights are tiny, the batch's activations are not: the compiled memory analysis catches it.
    # Weights + optimizer state ~2.4 MB and the 16384 x 512 float32 input batch 33.6 MB pass the
    # analytic floor (36 MB < 40 MB); the two 16384 x 256 hidden activations do not.
    record = paradnn.run(FC(2, 256, 512, 10), batch=16384, settings=tiny_settings,
                         memory_limit_bytes=40_000_000)
    assert record.status == "oom"
    assert "memory analysis" in record.error
    assert record.metrics["memory_peak_bytes"] > 40_000_000


def test_data_parallel_costs_are_totals_over_devices(tmp_path):
    # Forced host devices exist only in a fresh process.
    script = textwrap.dedent(
        """
        import json, paradnn
        from paradnn.measure import MeasureSettings
        s = MeasureSettings(steps_per_call=2, warmup_calls=1, min_calls=6, max_calls=6, time_budget_s=0.1)
        out = {}
        for devices in (1, 4):
            r = paradnn.run(paradnn.FC(2, 128, 256, 16), batch=1024, devices=devices, settings=s)
            assert r.status == "ok", r.error
            out[devices] = r.to_dict()
        print(json.dumps(out))
        """
    )
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    one, four = rows["1"], rows["4"]
    assert four["devices"] == 4 and four["device_count"] == 4
    # The same global computation: totals agree. Each device also runs the (replicated)
    # optimizer update, so the total grows by 3 updates of ~50k parameters: small at batch 1024.
    assert four["flops_per_step"] == pytest.approx(one["flops_per_step"], rel=0.05)
    assert four["flops_per_step"] > one["flops_per_step"]
    assert four["model_flops_per_step"] == one["model_flops_per_step"]
    # Memory is per device: the batch's activations are split four ways.
    assert four["memory_argument_bytes"] < one["memory_argument_bytes"]


def test_more_devices_than_exist_is_a_spec_error():
    with pytest.raises(paradnn.SpecError, match="devices"):
        paradnn.run(FC(1, 8, 8, 8), batch=64, devices=64)


def test_cli_json_is_one_object_with_every_metric(paradnn_cmd):
    proc = subprocess.run(
        paradnn_cmd + ["run", "fc", "--layers", "2", "--nodes", "64", "--input", "100", "--output", "10",
                       "--batch", "32", "--json", "--steps-per-call", "2", "--min-calls", "6",
                       "--max-calls", "6", "--time-budget-s", "0.2"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)  # exactly one JSON document, nothing else on stdout
    for name in METRICS:
        assert name in row and (name in meters.MAY_BE_NULL | ONLY_SOME_METRICS or row[name] is not None), name
    for name in ("step_time_s", "step_time_p10_s", "step_time_p90_s", "compile_s", "examples_per_sec",
                 "flops_per_step", "bytes_per_step", "peak_flops", "peak_bytes_per_sec"):
        assert row[name] > 0, name
    assert 0 < row["flops_utilization"] <= 1.5
    assert row["status"] == "ok" and row["family"] == "fc" and row["batch"] == 32


def test_cli_summary_says_units_and_sources(paradnn_cmd):
    proc = subprocess.run(
        paradnn_cmd + ["run", "rnn", "--cell", "gru", "--layers", "1", "--embed", "16", "--length", "4",
                       "--vocab", "32", "--batch", "8", "--steps-per-call", "2", "--min-calls", "6",
                       "--max-calls", "6"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for text in ("examples/s", "s median", "95% CI", "executed (XLA cost analysis)", "useful (analytic)",
                 "FLOP/s", "(measured; measured ", "FLOP/B", "compiled memory analysis", "cv ", "target +-2%",
                 "95% CI; target", "(measured peak)", "host load ",
                 "from useful FLOPs (analytic count)", "from executed FLOPs (XLA cost analysis)",
                 "per device (the device's, as the framework reports it)"):
        assert text in out, text
    # The headline utilization is the useful-FLOP one, the executed one beside it.
    line = next(s for s in out.splitlines() if s.startswith("utilization"))
    assert line.index("useful") < line.index("executed")
    # The ceiling beside the peak: on a CPU it is the peak's own probe.
    lines = out.splitlines()
    peak_at = next(i for i, s in enumerate(lines) if s.startswith("peak "))
    assert lines[peak_at + 1] == "ceiling           the peak's own probe"


@pytest.mark.parametrize(
    "args, parameter",
    [
        (["run", "fc", "--layers", "0", "--nodes", "8", "--input", "8", "--output", "8"], "layers"),
        (["run", "cnn", "--block", "dense", "--blocks", "1", "--filters", "8", "--image", "64", "--output", "8"], "block"),
        (["run", "rnn", "--cell", "lstm", "--layers", "1", "--embed", "x", "--length", "4", "--vocab", "8"], "embed"),
        (["run", "fc", "--layers", "1", "--nodes", "8", "--input", "8", "--output", "8", "--dtype", "int8"], "dtype"),
        (["run", "fc", "--layers", "1", "--nodes", "8", "--input", "8", "--output", "8", "--optimizer", "lamb"], "optimizer"),
        (["run", "fc", "--layers", "1", "--nodes", "8", "--input", "8", "--output", "8", "--memory-limit", "lots"], "memory limit"),
        (["run", "fc", "--layers", "1", "--nodes", "8", "--input", "8", "--output", "8", "--cv-target", "-1"], "cv_target"),
        (["run", "fc", "--nodes", "8", "--input", "8", "--output", "8"], "--layers"),
        (["run", "mlp"], "mlp"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(paradnn_cmd, args, parameter):
    proc = subprocess.run(paradnn_cmd + args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert parameter in lines[0] and "Traceback" not in proc.stderr


def test_cli_probe_json(paradnn_cmd):
    proc = subprocess.run(paradnn_cmd + ["probe", "--json"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["device_kind"]
    assert set(result["peak_flops"]) >= {"float32", "bfloat16", "float16"}
    assert all(v > 1e8 for v in result["peak_flops"].values())  # any CPU does more than 0.1 GFLOP/s
    assert result["peak_bytes_per_sec"] > 1e8
    # Each dtype's ceiling and peak; on a CPU both are the best usable probe on record.
    assert result["impossible"] == {} and result["above_spec"] == {}  # above_nominal is a note: boost clocks
    from paradnn import precision
    assert precision.is_level(result["float32_precision"])  # measured, e.g. highest on a CPU
    for dtype in ("float32", "bfloat16", "float16"):
        ceiling, peak = result["ceilings"][dtype], result["peaks"][dtype]
        assert ceiling == peak and ceiling["source"] in ("measured", "none")


def test_cli_list_families(paradnn_cmd):
    proc = subprocess.run(paradnn_cmd + ["list", "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    families = {row["family"]: row for row in json.loads(proc.stdout)}
    assert set(families) == {"fc", "cnn", "rnn", "transformer", "real"}  # the registry's families
    assert [p["name"] for p in families["rnn"]["parameters"]] == ["cell", "layers", "embed", "length", "vocab"]


# -- start-up (issue 25: a first line within 2 s) ------------------------------------------------
# Libraries that cost a second or more to import on a 2-core host; a framework is one of them.
HEAVY = ("pandas", "pyarrow", "matplotlib", "scipy", "sklearn",
         "jax", "jaxlib", "flax", "optax", "tensorflow", "keras", "torch", "torchvision")

# A fresh interpreter records each heavy library's first import (in order) and whether the
# command's first stderr line was already written, then runs the command in-process.
_WATCH = textwrap.dedent("""
    import importlib.abc, json, sys
    HEAVY, ARGV = {heavy!r}, {argv!r}
    lines, seen = [], []

    class Watch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            root = name.split(".")[0]
            if root in HEAVY and root not in [r for r, _ in seen]:
                seen.append((root, bool(lines)))
            return None

    class Stderr:
        def write(self, text):
            if text.strip() and not lines:
                lines.append(text.strip())
            return sys.__stderr__.write(text)

        def flush(self):
            sys.__stderr__.flush()

    sys.meta_path.insert(0, Watch())
    sys.stderr = Stderr()
    from paradnn.cli import main
    rc = main(ARGV)
    sys.stdout.flush()
    # Only what was imported: a library may look another up (importlib.util.find_spec) without
    # importing it, as opt_einsum does for TensorFlow.
    seen = [(root, after) for root, after in seen if root in sys.modules]
    print("\\nWATCH " + json.dumps({{"rc": rc, "first": lines[0] if lines else None, "seen": seen}}))
""")


def _watch(argv: list[str]) -> tuple[dict, str]:
    proc = subprocess.run([sys.executable, "-c", _WATCH.format(heavy=HEAVY, argv=argv)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out, _, tail = proc.stdout.rpartition("\nWATCH ")
    return json.loads(tail), out


@pytest.mark.slow
def test_cli_run_says_what_it_measures_before_any_heavy_import(tiny_settings):
    """`paradnn run` builds only its own parser and prints its first line before pandas,
    matplotlib or any framework is imported; the framework is the first heavy import (when the
    run needs it), and the report's libraries are never loaded."""
    argv = ["run", "fc", "--layers", "2", "--nodes", "32", "--input", "64", "--output", "10",
            "--batch", "8", "--json", "--time-budget-s", str(tiny_settings.time_budget_s),
            "--ci-target", str(tiny_settings.ci_target)]
    result, out = _watch(argv)
    assert result["rc"] == 0 and json.loads(out)["status"] == "ok", out
    assert result["first"].startswith("paradnn: measuring fc (layers=2"), result["first"]
    roots = [root for root, _ in result["seen"]]
    # The framework (JAX and its libraries) first: nothing heavy is imported before it.
    assert roots and roots[0] in ("jax", "jaxlib", "flax", "optax"), roots
    assert all(after for _, after in result["seen"]), result["seen"]
    assert not {"pandas", "matplotlib"} & set(roots), roots


@pytest.mark.slow
def test_cli_list_models_starts_no_framework():
    """`paradnn list models` reads the framework-neutral zoo table (26 s once, tracing every
    model with JAX): every model with its parameter count, no heavy import."""
    from paradnn.families.real import ZOO

    result, out = _watch(["list", "models"])
    assert result["rc"] == 0 and result["seen"] == [], result["seen"]
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert set(lines) == set(ZOO)
    assert all(f"{ZOO[name].params:,} params" in lines[name] for name in ZOO)
    # The step's FLOPs per example as counted (ResNet-50: 23.5, below 6 x the published 4.1 GMAC)
    assert all(f"train {ZOO[name].train_flops / 1e9:5.1f} GFLOP/example" in lines[name] for name in ZOO)
    assert "train  23.5 GFLOP/example" in lines["resnet50"]


def test_cli_builds_only_the_named_commands_module():
    """The table of subcommands per module (paradnn.cli.COMMANDS) is what the modules register:
    a command line naming one builds exactly that module's subcommands, and the whole parser
    (--help, no command, a typo) lists every subcommand in the table's order."""
    import argparse

    from paradnn import cli

    def names(parser):
        return list(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)

    for module, commands in cli.COMMANDS.items():
        for command in commands:
            assert cli.module_of(command) == module
            assert names(cli.build_parser(command)) == list(commands), command
    every = [c for commands in cli.COMMANDS.values() for c in commands]
    for line in (None, "--help", "-h", "--version", "runn"):
        assert names(cli.build_parser(line)) == every, line
