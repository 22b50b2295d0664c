"""The time ledger (issue 36, docs/ledger.md): the split of a step's time into named parts that
add up to it, on synthetic operation tables (exact arithmetic) and on real runs (planted causes)."""

import json
import math
import os
import subprocess
import sys

import pandas as pd
import pytest

import paradnn
from paradnn import CNN, FC, RNN, ledger, ledger_store
from paradnn.errors import SpecError
from paradnn.measure import KEYED_SETTINGS, SETTINGS_FIELDS, MeasureSettings, parse_setting
from paradnn.experiments.profile import OPAQUE
from paradnn.record import LEDGER_PARTS, ledger_metric, record_key
from paradnn.units import parse_bool

PEAK, BW = 1e12, 1e11  # FLOP/s, B/s


def _ops(rows):
    return pd.DataFrame(rows, columns=["name", "category", "flops", "bytes", "time_s"])


def _total(out):
    return sum(out[ledger_metric(p)] or 0.0 for p in LEDGER_PARTS)


def test_parts_add_up_and_split_each_operation_by_its_roof():
    ops = _ops([
        ("dot", "matmul", 8e9, 1e8, 0.010),      # compute bound 8 ms, bandwidth 1 ms: 2 ms below roof
        ("add", "elementwise", 1e6, 4e8, 0.005),  # bandwidth bound 4 ms over 1 us compute
        ("ar", "collective", 0.0, 1e7, 0.002),
    ])
    out = ledger.parts(ops, 0.020, 6e9, 1, PEAK, BW)
    assert math.isclose(_total(out), 0.020, rel_tol=1e-12)
    assert math.isclose(out["ledger_useful_s"], 0.006)
    assert math.isclose(out["ledger_extra_s"], 0.008 + 1e-6 - 0.006)
    assert math.isclose(out["ledger_memory_s"], 0.004 - 1e-6)
    assert math.isclose(out["ledger_below_roof_s"], 0.002 + 0.001)
    assert out["ledger_communication_s"] == 0.002 and out["ledger_outside_s"] == pytest.approx(0.003)
    assert out["ledger_overlap_s"] == 0.0 and out["ledger_largest_part"] == "useful"
    assert out["ledger_largest_loss"] == "memory"


def test_overlap_is_reported_and_an_operation_faster_than_its_roof_is_kept_visible():
    # Operations summing to more than the step (they ran concurrently), one faster than its
    # compute bound (impossible: it shows as a negative below-roof time, never clipped away).
    ops = _ops([("dot", "matmul", 4e9, 0.0, 0.003), ("add", "elementwise", 0.0, 1e8, 0.002)])
    out = ledger.parts(ops, 0.004, 4e9, 1, PEAK, BW)
    assert math.isclose(_total(out), 0.004, rel_tol=1e-12)
    assert out["ledger_overlap_s"] == pytest.approx(-0.001) and out["ledger_outside_s"] == 0.0
    assert out["ledger_faster_than_roof_s"] == pytest.approx(-0.001)
    # The add ran 1 ms beyond its 1 ms bandwidth bound: below roof nets the two to zero.
    assert out["ledger_memory_s"] == pytest.approx(0.001)
    assert out["ledger_below_roof_s"] == pytest.approx(0.0, abs=1e-12)


def test_without_a_peak_the_operations_time_is_one_part_and_the_note_says_so():
    ops = _ops([("dot", "matmul", 4e9, 0.0, 0.003)])
    out = ledger.parts(ops, 0.004, 4e9, 1, None, None)
    assert out["ledger_split"] is False and out["ledger_useful_s"] is None
    assert out["ledger_below_roof_s"] == 0.003 and math.isclose(_total(out), 0.004)
    ops.attrs.update(note="test", wall_step_s=0.004, steps=2)
    metrics = ledger.ledger_metrics(ops, {"step_time_s": 0.004, "model_flops_per_step": 4e9}, 1)
    assert "no peak FLOP/s" in metrics["ledger_note"]


def test_opaque_regions_take_the_executed_work_beyond_the_listed_operations():
    # XLA:CPU compiles a small loop into one function: its operations have no events, the region
    # is one row with unknown FLOPs and bytes; they are the step's executed ones (cost analysis)
    # beyond the listed operations, split between opaque rows by their times.
    ops = _ops([("dot", "matmul", 2e9, 0.0, 0.002), ("loop", OPAQUE, math.nan, math.nan, 0.003),
                ("loop2", OPAQUE, math.nan, math.nan, 0.001)])
    out = ledger.parts(ops, 0.006, 4e9, 1, PEAK, BW, flops_per_step=6e9, bytes_per_step=1e8)
    # 4e9 FLOPs left for 4 ms of opaque time: 3e9 and 1e9, computing 3 ms and 1 ms at the peak.
    assert math.isclose(out["ledger_useful_s"] + out["ledger_extra_s"], 0.006)
    assert out["ledger_opaque_s"] == pytest.approx(0.004)
    assert math.isclose(_total(out), 0.006, rel_tol=1e-12)


def test_profiler_inflation_is_scaled_out_keeping_the_operations_share():
    ops = _ops([("dot", "matmul", 1e9, 0.0, 0.004)])  # 4 ms of a 8 ms step under the profiler
    out = ledger.parts(ops, 0.002, 1e9, 1, PEAK, BW, traced_step_s=0.008)
    assert out["ledger_time_scale"] == 0.25 and out["ledger_ops_s"] == pytest.approx(0.001)
    assert out["ledger_outside_s"] == pytest.approx(0.001) and math.isclose(_total(out), 0.002)


def test_a_table_that_cannot_be_split_leaves_the_run_and_says_why():
    out = ledger.safe_metrics(pd.DataFrame({"name": ["x"]}), {"step_time_s": 0.001}, 1)
    assert out["ledger_source"] is None and out["ledger_note"].startswith("no ledger: the profile could not")


def test_the_ledger_setting_is_a_yes_no_switch_left_out_of_the_key():
    assert parse_bool("yes", "ledger") is True and parse_bool("off", "ledger") is False
    assert parse_bool(True, "ledger") is True
    with pytest.raises(SpecError, match="ledger"):
        parse_bool("maybe", "ledger")
    assert parse_setting("true", "ledger") is True
    assert "ledger" in SETTINGS_FIELDS and "ledger" not in KEYED_SETTINGS
    w, p, s = {"family": "fc"}, {"device_kind": "cpu"}, {"jax_version": "1"}
    on, off = MeasureSettings(ledger=True).to_dict("jax"), MeasureSettings().to_dict("jax")
    assert record_key(w, p, s, on) == record_key(w, p, s, off)


def test_spread_covers_the_grid_at_every_prefix():
    order = ledger_store.spread(10)
    assert sorted(order) == list(range(10))
    assert order[:2] == [0, 8] and max(order[:4]) - min(order[:4]) >= 6
    assert ledger_store.spread(1) == [0] and ledger_store.spread(0) == []


def test_plan_takes_configs_without_a_ledger_on_this_platform_within_the_budget():
    base = {"status": "ok", "family": "fc", "layers": 1, "input": 16, "output": 16, "dtype": "float32",
            "optimizer": "rmsprop", "devices": 1, "framework": "jax", "device_platform": "cpu",
            "device_kind": "cpu", "device_count": 1, "phase_total_s": 3.0, "ledger_source": None}
    rows = [{**base, "key": f"k{n}", "nodes": n, "batch": 8, "time_utc": "2026-11-28T00:00:00"}
            for n in (16, 32, 64, 128)]
    rows[1]["ledger_source"] = "jax.profiler"          # has a ledger already
    rows[2]["device_kind"] = "NVIDIA H100 80GB HBM3"   # another platform's row
    frame = pd.DataFrame(rows)
    here = {"device_platform": "cpu", "device_kind": "cpu", "device_count": 1}
    plan = ledger_store.plan(frame, 100.0, here)
    assert [r["key"] for r in plan.chosen] == ["k16", "k128"]
    assert plan.left_out == {"already has a ledger": 1, "measured on another platform": 1}
    assert plan.estimate_s == pytest.approx(2 * (3.0 * ledger_store.LEDGER_COST + ledger_store.PER_CONFIG_S))
    tight = ledger_store.plan(frame, 5.0, here)
    assert len(tight.chosen) == 1 and tight.left_out["over the time budget"] == 1
    with pytest.raises(SpecError, match="budget_s"):
        ledger_store.plan(frame, 0.0, here)


# ---- real runs on the CPU -------------------------------------------------------------------

def _run(spec, batch, **kw):
    r = paradnn.run(spec, batch=batch, ledger=True, time_budget_s=0.3, min_calls=6, **kw)
    assert r.status == "ok", r.error
    return r.metrics


def _check_adds_up(m):
    assert m["ledger_source"], m.get("ledger_note")
    assert math.isclose(_total(m), m["step_time_s"], rel_tol=1e-9)
    ratio = m["ledger_ops_s"] / m["step_time_s"]
    # The operations sum to the step time within the stated bound, or the note says why not.
    assert (1 - ledger.OPS_BOUND <= ratio <= 1 + ledger.OPS_BOUND) or "outside the" in m["ledger_note"]


GRID = [(FC(layers=depth, nodes=n, input=64, output=10), b) for depth in (1, 2) for n in (32, 128) for b in (8, 64)]
# Image 96: a 3x3 last stage, compiled once on the CPU (the cnn family's tiny presets say why).
GRID += [(CNN(block=blk, filters=f, blocks=1, image=96, output=10), 4) for blk in ("residual", "bottleneck")
         for f in (4, 8)]


@pytest.mark.slow
def test_on_a_grid_of_fc_and_cnn_configs_every_ledger_adds_up_to_the_step_time():
    assert len(GRID) >= 12
    for spec, batch in GRID:
        _check_adds_up(_run(spec, batch, steps_per_call=4))


@pytest.mark.slow
def test_planted_causes_come_out_on_top():
    # A tiny FC at batch 1, one step per dispatch: the host's dispatch, outside the operations.
    tiny = _run(FC(layers=1, nodes=16, input=16, output=16), 1, step_loop="host", steps_per_call=8)
    _check_adds_up(tiny)
    assert tiny["ledger_largest_part"] == "outside", ledger.summary(tiny)
    # A large FC: useful work and kernels below their roof are the two largest parts.
    big = _run(FC(layers=4, nodes=1024, input=1024, output=100), 256, steps_per_call=1)
    _check_adds_up(big)
    share = ledger.shares(big)
    # Useful work and kernels below their roof together take most of the step, and one of them is
    # its largest part. (Together: against a peak probed while the host was busy the useful work
    # can exceed the step, and below roof goes negative by as much, flagged; their sum stands.)
    assert share["useful"] + share["below_roof"] > 0.5, ledger.summary(big)
    assert big["ledger_largest_part"] in ("useful", "below_roof"), ledger.summary(big)
    # Element-wise-heavy (a wide, shallow RNN: its gates are element-wise work over 256 units at
    # every step): memory-bound time is a larger share of its operations' time at their roofs
    # (compute bound plus memory bound) than the large FC's: 18-27% against 9-10% in 12 runs, on a
    # quiet host and with both cores busy. At their roofs, not of the measured time: a loaded
    # host stretches the measured operations (it shows as below roof), not their FLOPs or bytes;
    # of the measured operations' time the wide RNN's share fell to 1.5x the FC's under load.
    wide = _run(RNN(cell="rnn", layers=1, embed=256, length=8, vocab=16), 32, steps_per_call=4)
    _check_adds_up(wide)

    def memory_at_roofs(m):
        memory = m[ledger_metric("memory")]
        return memory / (m[ledger_metric("useful")] + m[ledger_metric("extra")] + memory)

    assert memory_at_roofs(wide) > max(0.12, 1.3 * memory_at_roofs(big)), (ledger.summary(wide), ledger.summary(big))


@pytest.mark.slow
def test_a_multi_device_config_on_simulated_devices_shows_communication(tmp_path):
    code = ("import json, paradnn; from paradnn import FC; "
            "r = paradnn.run(FC(layers=2, nodes=256, input=256, output=16), batch=64, devices=2, ledger=True, "
            "time_budget_s=0.3); print(json.dumps({k: v for k, v in r.metrics.items() if k.startswith('ledger') "
            "or k == 'step_time_s'}))")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", PARADNN_CACHE=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    m = json.loads(out.stdout.strip().splitlines()[-1])
    assert m["ledger_communication_s"] > 0, m
    assert math.isclose(_total(m), m["step_time_s"], rel_tol=1e-9)


# ---- commands: run --ledger, a sweep setting, paradnn ledger STORE, the report ----------------

def _cli(*args, cwd=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "paradnn", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


@pytest.mark.slow
def test_commands_take_show_and_report_the_ledger(tmp_path):
    # `paradnn run --ledger`: the record carries the ledger and the summary prints it.
    run = _cli("run", "fc", "--layers", "1", "--nodes", "32", "--input", "16", "--output", "10", "--batch", "8",
               "--time-budget-s", "0.2", "--ledger", "--json")
    assert run.returncode in (0, 1), run.stderr[-2000:]
    rec = json.loads(run.stdout.strip().splitlines()[-1])
    assert rec["ledger"] is True and rec["ledger_source"] and rec["ledger_largest_part"] in LEDGER_PARTS
    assert math.isclose(_total(rec), rec["step_time_s"], rel_tol=1e-9)
    bad = _cli("run", "fc", "--ledger", "sometimes")
    assert bad.returncode == 2 and "ledger" in bad.stderr and "Traceback" not in bad.stderr

    # A sweep without the ledger, then `paradnn ledger` takes it for configs spread across the grid.
    sweep = tmp_path / "s.yaml"
    sweep.write_text("family: fc\nfixed: {layers: 1, input: 16, output: 10}\n"
                     "axes: {nodes: [16, 32, 64], batch: [4, 16, 64]}\n"
                     "settings: {steps_per_call: 4, min_calls: 6, max_calls: 8, time_budget_s: 0.2}\n")
    store = tmp_path / "s.db"
    assert _cli("sweep", str(sweep), "--store", str(store), "--executor", "inprocess",
                "--retry-unstable-s", "0").returncode == 0
    before = paradnn.load(store)
    assert len(before) == 9 and before["ledger_source"].isna().all()
    planned = _cli("ledger", str(store), "--budget-s", "1000", "--plan")
    assert planned.returncode == 0 and "9 config(s)" in planned.stdout, planned.stdout + planned.stderr
    took = _cli("ledger", str(store), "--budget-s", "1000")
    assert took.returncode == 0, took.stderr[-2000:]
    after = paradnn.load(store)
    with_ledger = after[after["ledger_source"].notna()]
    assert len(after) == 18 and len(with_ledger) == 9
    assert set(with_ledger["key"]) == set(before["key"])  # the same configs, repeat rows
    again = _cli("ledger", str(store), "--plan")
    assert "0 config(s)" in again.stdout and "9 already has a ledger" in again.stdout
    assert _cli("ledger", str(store), "--budget-s", "-1").returncode == 2

    # The report: the ledger section with its figures, and the largest loss in How fast.
    out = tmp_path / "rep"
    rep = _cli("report", str(store), "-o", str(out))
    assert rep.returncode == 0, rep.stderr[-2000:]
    html = (out / "index.html").read_text()
    assert "Where the time goes" in html and "largest loss (time ledger" in html

    # A sweep's setting `ledger: true` takes it while measuring, and resumes as the same configs.
    sweep.write_text(sweep.read_text().replace("time_budget_s: 0.2}", "time_budget_s: 0.2, ledger: true}"))
    resumed = _cli("sweep", str(sweep), "--store", str(store), "--executor", "inprocess", "--retry-unstable-s", "0")
    assert resumed.returncode == 0 and len(paradnn.load(store)) == 18  # nothing new: same keys
    fresh = tmp_path / "l.db"
    assert _cli("sweep", str(sweep), "--store", str(fresh), "--executor", "inprocess",
                "--retry-unstable-s", "0").returncode == 0
    rows = paradnn.load(fresh)
    assert rows["ledger_source"].notna().all() and (rows["ledger"] == 1).all()


@pytest.mark.slow
def test_torch_takes_a_ledger_and_tensorflow_says_it_cannot():
    pytest.importorskip("torch", reason="the torch backend needs PyTorch (pip install paradnn[torch])")
    m = _run(FC(layers=2, nodes=64, input=32, output=10), 16, framework="torch")
    _check_adds_up(m)
    assert m["ledger_source"].startswith("torch.profiler") and "no bytes per operator" in m["ledger_note"]
    pytest.importorskip("tensorflow", reason="the TensorFlow backend needs TensorFlow (pip install paradnn[tf])")
    r = paradnn.run(FC(layers=1, nodes=16, input=16, output=10), batch=8, framework="tensorflow", ledger=True,
                    time_budget_s=0.2)
    assert r.status == "ok" and r.metrics["ledger_source"] is None
    assert r.metrics["ledger_note"].startswith("no ledger:") and "tensorflow" in r.metrics["ledger_note"]
