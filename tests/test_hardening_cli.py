"""A hostile user's command lines (docs/reliability.md, "Commands: input, messages, outputs"):
bad input refused before anything is measured or stored (exit 2, one line naming the parameter,
the value and what is allowed), counts and messages that say what happened, outputs with the
mode an ordinary ``open()`` gives, and the frameworks' start-up chatter kept off stderr.

Everything runs the real command (a subprocess, or ``paradnn.cli.main``) on real SQLite stores;
stores that need particular measurements (unstable runs, two frameworks, a hostile field) are
built from records with the real timing statistics (``paradnn.measure.Timing``), as
tests/test_compare.py does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import child_env
from paradnn import FC, Workload
from paradnn.cli import main
from paradnn.errors import SpecError
from paradnn.measure import Timing
from paradnn.record import Record
from paradnn.store import Store

PLATFORM = {"device_platform": "cpu", "device_kind": "cpu", "device_count": 1, "host": "h1",
            "cpu_model": "test cpu"}
SOFTWARE = {"paradnn_version": "0.1.0", "paradnn_revision": "git:aaaa", "framework_version": "0.12",
            "jax_version": "0.12", "python_version": "3.12", "xla_flags": ""}
SETTINGS = {"steps_per_call": 4, "warmup_calls": 1, "min_calls": 10, "max_calls": 40,
            "cv_target": 0.5, "time_budget_s": 2.0}
#: A sweep file of one tiny config, measured in this process's executor (fast on 2 cores).
ONE_CONFIG = """\
parts:
  - family: fc
    fixed: {{layers: 1, nodes: 8, input: 8, output: 2, batch: {batch}{extra}}}
settings: {{steps_per_call: 1, warmup_calls: 1, min_calls: 6, max_calls: 6, time_budget_s: 0.2}}
run: {{executor: inprocess, retry_unstable_s: 0}}
"""
TINY_RUN = ["--layers", "1", "--nodes", "8", "--input", "8", "--output", "2", "--batch", "4",
            "--steps-per-call", "1", "--min-calls", "6", "--max-calls", "6", "--time-budget-s", "0.2"]


def cli(*args: object, timeout: float = 300, umask: int = -1,
        **extra_env: str | None) -> subprocess.CompletedProcess:
    """``paradnn ARGS`` in a child process of this checkout (``umask`` -1: the parent's), with
    ``extra_env`` set (None: removed)."""
    env = child_env(**{k: v for k, v in extra_env.items() if v is not None})
    for name in (k for k, v in extra_env.items() if v is None):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "paradnn", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=timeout, umask=umask)


def one_error_line(proc: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, no traceback, stderr exactly one line ``paradnn: error: ...`` holding ``words``."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paradnn: error: "), proc.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def record(nodes: int, batch: int, median_s: float, t: str, seed: int, framework: str = "jax",
           software: dict | None = None, stable: bool | None = None) -> Record:
    """An ok record of ``fc layers=2 nodes=NODES`` whose timing metrics are the real statistics
    of 30 lognormal per-call times around ``median_s``; ``stable`` overrides the precision
    verdict (False: a run that missed its target)."""
    rng = np.random.default_rng(seed)
    samples = median_s * np.exp(rng.normal(0.0, 0.03, 30))
    metrics = Timing(samples, 1.0, 4, 1, 0.1, SETTINGS["cv_target"], 2.0).stats()
    metrics.update(examples_per_sec=batch / metrics["step_time_s"], params=nodes * 1000,
                   flops_per_sec=1e9, steps_per_call_used=4)
    if stable is not None:
        metrics["stable"] = stable
    return Record(status="ok", workload=Workload(FC(2, nodes, 64, 10), batch, framework=framework).to_dict(),
                  platform=PLATFORM, software={**SOFTWARE, **(software or {})}, settings=SETTINGS,
                  metrics=metrics, time_utc=t)


def grid_store(path: Path, slow: float = 1.0, t: str = "2026-01-01T00:00:00+00:00", seed: int = 0,
               **kw) -> Path:
    """A store of a 2 x 2 grid (nodes x batch), step times ``slow`` times the base."""
    with Store(path) as s:
        for i, nodes in enumerate((64, 128)):
            for j, batch in enumerate((8, 16)):
                s.add(record(nodes, batch, 1e-3 * nodes / 64 * slow, t, seed + 10 * i + j, **kw))
    return path


# -- 1. a config the platform refuses is bad input, never a row -------------------------------------

def test_a_sweep_naming_more_devices_than_the_host_has_is_refused_before_anything(tmp_path):
    # Today's main stored an `error` row (SpecError) and exited 0, where `paradnn run --devices
    # 1000` refuses the same value with exit 2.
    f = tmp_path / "devices.yaml"
    f.write_text(ONE_CONFIG.format(batch=1000, extra=", devices: 1000"))
    store = tmp_path / "r.db"
    for executor in ("process", "inprocess"):
        proc = cli("sweep", f, "--store", store, "--quiet", "--executor", executor)
        one_error_line(proc, str(f), "config 1 of 1", "devices=1000", "invalid devices=1000",
                       "at most 1", "nothing was measured or stored")
        assert not store.exists()  # refused before the store was opened: no file, no row
    from paradnn import sweep
    from paradnn.grids import grid

    with pytest.raises(SpecError, match="config 2 of 2 .*devices=4.*at most 1"):
        sweep(grid("fc", layers=1, nodes=8, input=8, output=2, batch=4, devices=[1, 4]),
              store=store, executor="inprocess", progress=False)
    assert not store.exists()


# -- 2. --target-width without --budget --------------------------------------------------------------

def test_target_width_without_budget_is_refused(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(ONE_CONFIG.format(batch=4, extra=""))
    store = tmp_path / "r.db"
    one_error_line(cli("sweep", f, "--store", store, "--target-width", "0.2"),
                   "--target-width 0.2", "needs --budget")
    assert not store.exists()


# -- 3. "measured now" is what this sweep wrote ------------------------------------------------------

def test_measured_now_counts_only_the_rows_this_sweep_committed(tmp_path):
    """A row another sweep on the same store wrote after this one started (here: stamped later
    than this sweep's start) is not this sweep's measurement."""
    f = tmp_path / "s.yaml"
    f.write_text(ONE_CONFIG.format(batch=4, extra=""))
    first = cli("sweep", f, "--store", tmp_path / "a.db", "--quiet")
    assert first.returncode == 0, first.stderr
    assert "1 measured now (ok 1), 0 already in the store" in first.stdout, first.stdout
    with Store(tmp_path / "a.db") as a:
        (row,) = a.rows()
    # The other sweep's row of the same config, committed "meanwhile" (after this one started).
    with Store(tmp_path / "b.db") as b:
        b.add({**row, "time_utc": "2999-01-01T00:00:00+00:00"})
    second = cli("sweep", f, "--store", tmp_path / "b.db", "--quiet", "--repeat", "2")
    assert second.returncode == 0, second.stderr
    # Today's main said "2 measured now": every row stamped after its start.
    assert "1 measured now (ok 1), 1 measured meanwhile by another sweep on this store (ok 1), " \
           "0 already in the store; 2 rows for this sweep" in second.stdout, second.stdout
    from paradnn import sweep

    df = sweep(str(f), store=tmp_path / "b.db", repeat=3, progress=False)
    assert len(df) == 3 and len(df.attrs["written"]) == 1
    (key, when), = df.attrs["written"]
    assert when not in (row["time_utc"], "2999-01-01T00:00:00+00:00") and key == row["key"]


# -- 4. plot: unstable rows left out, and --include-unstable ----------------------------------------

def test_plot_speedup_says_it_left_unstable_runs_out_and_draws_them_when_asked(tmp_path, capsys):
    a = grid_store(tmp_path / "a.db", stable=False, framework="torch",
                   software={"framework_version": "2.15"})
    b = grid_store(tmp_path / "b.db", slow=2.0, stable=False, framework="tensorflow",
                   software={"framework_version": "2.21"})
    out = tmp_path / "sp.png"
    assert main(["plot", "speedup", str(a), str(b), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # Today: "plots.speedup: no joined rows to plot", not saying why.
    assert len(err) == 1 and "8 run(s) that missed it (stable false) were left out" in err[0], err
    assert "--include-unstable" in err[0] and not out.exists()
    assert main(["plot", "speedup", str(a), str(b), "-o", str(out), "--include-unstable"]) == 0
    assert out.stat().st_size > 0
    # One unstable run among stable ones: drawn without it, and the command says so.
    with Store(b) as s:
        s.add(record(64, 8, 1e-3, "2026-01-02T00:00:00+00:00", 99, framework="tensorflow",
                     software={"framework_version": "2.21"}, stable=True))
    assert main(["plot", "speedup", str(a), str(b), "-o", str(tmp_path / "sp2.png")]) == 2
    capsys.readouterr()
    with Store(a) as s:
        s.add(record(64, 8, 1e-3, "2026-01-02T00:00:00+00:00", 98, framework="torch",
                     software={"framework_version": "2.15"}, stable=True))
    assert main(["plot", "speedup", str(a), str(b), "-o", str(tmp_path / "sp3.png")]) == 0
    assert "paradnn: note: plot speedup: 8 run(s) that missed their precision target" \
           in capsys.readouterr().err


# -- 5. compare: identical records, a side of several frameworks, Markdown escaping -----------------

def test_compare_of_a_store_with_itself_compares_nothing(tmp_path):
    a = grid_store(tmp_path / "a.db")
    # Today: "axis: none: the same configurations measured twice", 4 configs "unchanged".
    one_error_line(cli("compare", a, a), "the same 4 record(s)", "nothing to compare")
    one_error_line(cli("compare", a, a, "--markdown", tmp_path / "c.md"), "the same 4 record(s)")
    assert not (tmp_path / "c.md").exists()


def test_compare_refuses_to_pool_two_frameworks_of_one_side(tmp_path):
    jax = grid_store(tmp_path / "jax.db")
    both = tmp_path / "tf_torch.db"
    grid_store(both, framework="tensorflow", software={"framework_version": "2.21"}, seed=1)
    grid_store(both, framework="torch", software={"framework_version": "2.15"}, seed=2)
    # Today: one sample per config pooling TensorFlow's and PyTorch's runs.
    one_error_line(cli("compare", jax, both), "NEW holds 2 values of framework",
                   "framework=tensorflow", "framework=torch", "--new-where framework=tensorflow")
    proc = cli("compare", jax, both, "--new-where", "framework=torch", "--allow-inconclusive")
    assert proc.returncode in (0, 1), proc.stderr
    assert "axis: framework (BASE framework=jax" in proc.stdout and "framework=torch" in proc.stdout


def test_compare_markdown_escapes_what_comes_from_the_store(tmp_path):
    payload = '<script>alert(1)</script><img src=x onerror="alert(2)">|*x*_`y`'
    base = grid_store(tmp_path / "base.db")
    new = grid_store(tmp_path / "new.db", slow=1.5, software={"jax_version": payload}, seed=5)
    md = tmp_path / "c.md"
    proc = cli("compare", base, new, "--markdown", md)
    assert proc.returncode == 1, proc.stderr  # the planted 1.5x slowdown
    text = md.read_text()
    assert "jax\\_version=&lt;script&gt;" in text  # Markdown shows jax_version=<script>
    for raw in ("<script>", "<img", 'onerror="', "|*x*", "`y`"):
        assert raw not in text, (raw, text)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" \
           "\\|\\*x\\*\\_\\`y\\`" in text, text
    # The table still has its nine columns on every row (an unescaped | would add one).
    rows = [line for line in text.splitlines() if line.startswith("| regression")]
    assert rows and all(line.replace("\\|", "").count("|") == 10 for line in rows), rows


# -- 6. collectives: every collective and size checked before the first is measured ----------------

def test_collectives_refuses_a_size_before_measuring_anything(tmp_path):
    t0 = time.monotonic()
    # 8 B is two float32 per device: an all-reduce can run it, an all-gather over 4 devices not.
    # Today: all_reduce measured (a progress line per size), then the SpecError, the rows lost.
    proc = cli("collectives", "--devices", "4", "--simulate-devices", "--sizes", "8",
               "--store", tmp_path / "c.db")
    one_error_line(proc, "invalid size=8", "at least 16 B for all_gather over 4 devices")
    assert "collectives 1/" not in proc.stderr and not (tmp_path / "c.db").exists()
    assert time.monotonic() - t0 < 120
    # The default sizes are named as such.
    one_error_line(cli("collectives", "--devices", "256", "--simulate-devices"),
                   "all_gather over 256 devices", "default --sizes 1KB..1MB")


# -- 7. outputs get the mode an ordinary open() gives ------------------------------------------------

@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_honour_the_umask(tmp_path, umask, mode):
    base = grid_store(tmp_path / "base.db")
    new = grid_store(tmp_path / "new.db", slow=1.5, software={"jax_version": "0.13"}, seed=5)
    out = tmp_path / "out"
    # Today: 0600 whatever the umask (tempfile.mkstemp's mode, moved into place).
    assert cli("export", base, "-o", out / "rows.csv", umask=umask).returncode == 0
    assert cli("plot", "params", base, "-o", out / "params.png", "--dpi", "20",
               umask=umask).returncode == 0
    proc = cli("compare", base, new, "--plot", out / "cmp.png", "--dpi", "20",
               "--markdown", out / "cmp.md", umask=umask)
    assert proc.returncode == 1, proc.stderr
    for name in ("rows.csv", "params.png", "cmp.png", "cmp.md", ".paradnn-outputs.json"):
        assert (out / name).stat().st_mode & 0o777 == mode, (name, oct((out / name).stat().st_mode))
    # Replacing an output keeps the mode it has, as open(path, "w") would.
    os.chmod(out / "rows.csv", 0o640)
    assert cli("export", base, "-o", out / "rows.csv", umask=umask).returncode == 0
    assert (out / "rows.csv").stat().st_mode & 0o777 == 0o640


# -- 8. plan: --rows, the framework named, no framework started that the plan does not need ---------

def test_plan_refuses_negative_rows_and_names_the_framework_of_each_config(tmp_path):
    f = tmp_path / "fw.yaml"
    f.write_text(textwrap.dedent("""\
        parts:
          - family: fc
            fixed: {layers: 1, nodes: 8, input: 8, output: 2, batch: 4}
            axes: {framework: [jax, tensorflow, torch]}
        """))
    one_error_line(cli("plan", f, "--rows", "-1"), "rows", "-1", "from 0")
    # Importing TensorFlow took 13 s of a 14 s plan; nothing in the plan needs it or torch.
    code = ("import sys, time; from paradnn.cli import main; t = time.monotonic(); "
            f"rc = main(['plan', {str(f)!r}, '--store', {str(tmp_path / 'none.db')!r}]); "
            "print('imported', sorted(m for m in ('tensorflow', 'torch', 'keras') if m in sys.modules)); "
            "print('seconds', time.monotonic() - t); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "imported []" in proc.stdout, proc.stdout
    lines = [line for line in proc.stdout.splitlines() if "fc layers=1 nodes=8" in line]
    # Today: three identical lines.
    assert len(lines) == 3 and len(set(lines)) == 3, lines
    assert all(any(line.endswith(f"float32 on {fw}") for line in lines)
               for fw in ("jax", "tensorflow", "torch")), lines
    assert "tensorflow, torch not started to plan" in proc.stdout, proc.stdout
    assert "3 to measure" in proc.stdout


def test_sweep_progress_lines_name_the_framework(tmp_path):
    """A sweep file with a framework axis (jax and the toy numpy framework of tests/toy_numpy):
    its progress lines told the configs apart by nothing."""
    f = tmp_path / "fw.yaml"
    f.write_text(textwrap.dedent("""\
        parts:
          - family: fc
            fixed: {layers: 1, nodes: 8, input: 8, output: 2, batch: 4}
            axes: {framework: [jax, numpy]}
        settings: {steps_per_call: 1, warmup_calls: 1, min_calls: 6, max_calls: 6, time_budget_s: 0.2}
        run: {executor: inprocess, retry_unstable_s: 0}
        """))
    proc = cli("sweep", f, "--store", tmp_path / "r.db", PARADNN_PLUGINS="toy_numpy.plugin")
    assert proc.returncode == 0, proc.stderr
    running = [line for line in proc.stderr.splitlines() if "| running fc" in line]
    assert any(line.endswith("float32 on jax") for line in running), proc.stderr
    assert any(line.endswith("float32 on numpy") for line in running), proc.stderr


# -- 9. run: the frameworks a family takes, and another framework's option --------------------------

def test_run_help_lists_only_the_familys_frameworks_and_refuses_another_frameworks_option():
    help_text = cli("run", "transformer", "--help").stdout
    # (best: the framework a stored calibration found fastest, among those that build it.)
    assert "--framework {jax,torch,best}" in help_text and "tensorflow (Keras" not in help_text
    assert "--framework {jax,tensorflow,torch,best}" in cli("run", "fc", "--help").stdout
    # Today: accepted and silently without effect.
    one_error_line(cli("run", "fc", *TINY_RUN, "--framework", "jax", "--torch-compile", "default"),
                   "--torch-compile default", "an option of torch, not of jax",
                   "allowed with --framework jax: ")
    one_error_line(cli("run", "fc", *TINY_RUN, "--framework", "torch", "--xla-preset", "stock"),
                   "--xla-preset stock", "not of torch")


# -- 10. the frameworks' start-up chatter ---------------------------------------------------------

def test_tensorflow_startup_filter_drops_chatter_and_passes_everything_else():
    """The filter itself, on the process's real file descriptor 2 (no TensorFlow needed)."""
    code = textwrap.dedent("""\
        import os, sys
        os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        from paradnn.backends.tensorflow import startup
        with startup.quiet():
            os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n")
            os.write(2, b"I0000 00:00:1795821133.851580    5591 port.cc:153] oneDNN custom operations are on.\\n")
            os.write(2, b"W0000 00:00:1795821133.851580    5591 x.cc:1] a warning\\n")
            os.write(2, b"E0000 00:00:1795821139.621302    5591 other.cc:52] a real error\\n")
            print("paradnn: run: starting tensorflow for 5s", file=sys.stderr, flush=True)
            os.write(2, b"some other library\\npartial line")
        print("after", file=sys.stderr)
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "E0000 00:00:1795821139.621302    5591 other.cc:52] a real error",
        "paradnn: run: starting tensorflow for 5s", "some other library", "partial lineafter"]
    from paradnn.backends.tensorflow import startup

    cuinit = "E0000 00:00:1795821139.6 5591 cuda_platform.cc:52] failed call to cuInit: INTERNAL"
    assert startup.chatter(cuinit, 2, driver=False) and not startup.chatter(cuinit, 2, driver=True)
    assert not startup.chatter("I0000 00:00:17.5 1 port.cc:1] x", 0, driver=False)


def test_torch_chatter_is_dropped_and_its_other_messages_kept(capfd):
    import logging

    import paradnn.backends.torch  # noqa: F401  (sets the filters, imports no torch)

    handler = logging.StreamHandler(sys.stderr)
    # Each line as torch logs it: the logger of the module that writes it.
    for name, template, arg in (
            ("torch.utils.cpp_extension", "No CUDA runtime is found, using CUDA_HOME='%s'", "/usr/local"),
            ("torch._dynamo.variables.ctx_manager", "Profiler record function %s will be ignored", "x")):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        try:
            logger.warning(template, arg)
            logger.warning("a real warning of %s", name)
        finally:
            logger.removeHandler(handler)
    err = capfd.readouterr().err
    assert "CUDA_HOME" not in err and "Profiler" not in err
    assert "a real warning of torch.utils.cpp_extension" in err
    assert "a real warning of torch._dynamo.variables.ctx_manager" in err


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["tensorflow", "torch"])
def test_a_run_of_tensorflow_or_torch_writes_only_paradnns_lines(framework):
    proc = cli("run", "fc", *TINY_RUN, "--framework", framework, "--no-cache", timeout=600,
               TF_CPP_MIN_LOG_LEVEL=None)
    assert proc.returncode in (0, 1), proc.stderr
    # Today: absl's preamble, I0000 ... port.cc / cudart_stub.cc, E0000 ... cuInit (TensorFlow);
    # W... No CUDA runtime is found, using CUDA_HOME (torch).
    others = [line for line in _without_python_warnings_of_installed_packages(proc.stderr)
              if not line.startswith("paradnn")]
    assert others == [], proc.stderr


def _without_python_warnings_of_installed_packages(stderr: str) -> list[str]:
    """stderr's lines less the Python warnings raised in installed packages (``.../site-packages/
    x.py:12: FutureWarning: ...`` and the indented source line Python prints under it). The CLI
    shows other packages' warnings in Python's own format on purpose (paradnn.cli), and the suite
    installs the newest TensorFlow and torch, whose next release may deprecate something: that is
    not the framework's log chatter this test is about."""
    kept, lines = [], stderr.splitlines()
    i = 0
    while i < len(lines):
        if re.match(r"\S*site-packages\S*:\d+: \w*Warning: ", lines[i]):
            i += 2 if i + 1 < len(lines) and lines[i + 1].startswith(" ") else 1
            continue
        kept.append(lines[i])
        i += 1
    return kept


def test_the_stderr_filter_drops_only_installed_packages_python_warnings():
    stderr = ("/v/lib/python3.12/site-packages/keras/src/x.py:3: FutureWarning: soon gone\n"
              "  warnings.warn(\n"
              "paradnn: run: fc ...\n"
              "I0000 00:00:1 port.cc:153] oneDNN custom operations are on\n"
              "/work/paradnn/a.py:4: UserWarning: ours\n")
    assert _without_python_warnings_of_installed_packages(stderr) == [
        "paradnn: run: fc ...", "I0000 00:00:1 port.cc:153] oneDNN custom operations are on",
        "/work/paradnn/a.py:4: UserWarning: ours"]


def test_an_error_about_a_hostile_value_is_one_line_that_says_what_is_allowed(tmp_path):
    # A value with a line break or a tab (a path pasted from somewhere) is shown escaped: the
    # error is the one line a script or a log reads (found by the fuzzing suite with 200 cases
    # per property: `--ops $'line\nbreak'` printed "paradnn: error: --ops line", then "break: ...").
    store = grid_store(tmp_path / "s.db")
    one_error_line(cli("report", store, "-o", tmp_path / "r", "--ops", "line\nbreak\tx"),
                   "--ops line\\nbreak\\tx: no such file")
    one_error_line(cli("run", "fc", "--layers", "4\n5"), "layers='4\\n5'")
    # A store name longer than the file system allows (fuzzing, 500 cases): what a store may be.
    one_error_line(cli("collectives", "--store", "x" * 300), "argument --store", "File name too long",
                   "allowed: a new path or an existing paradnn store")
