"""``paradnn plan`` / ``sweep --dry-run``, the progress line's time model, and the source
revision in records. Real stores, real sweeps (in-process, tiny settings), real compiles."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import TINY
from paradnn import CNN, FC, RNN, Workload
from paradnn.grids import grid, load_sweep_file
from paradnn.plan import config_table, plan, short_name
from paradnn.record import Record
from paradnn.runner import context
from paradnn.store import load
from paradnn.sweeper import Progress, progress_estimates, sweep

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "paradnn", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)


@pytest.mark.parametrize("optimizer", ["rmsprop", "sgd", "momentum", "adam", "adafactor"])
def test_state_bytes_match_the_runners_floor(optimizer):
    """The closed-form state (weights + optimizer slots + BN statistics) is what the runner's
    out-of-memory floor counts from ``jax.eval_shape`` (adam and adafactor keep a few scalars
    more: a step count, factored sizes)."""
    from paradnn.backends.jax import step as wl
    from paradnn.backends.jax.models import build
    from paradnn.backends.jax.backend import state_bytes

    specs = [FC(2, 64, 100, 10), CNN("residual", 1, 4, 32, 10), RNN("lstm", 2, 16, 4, 32)]
    workloads = [Workload(s, 8, "float32", optimizer) for s in specs]
    table = config_table(workloads)
    for w, predicted in zip(workloads, table["state_bytes"]):
        state, _ = wl.abstract_inputs(w, build(w.spec, w.dtype), optimizer)
        actual = state_bytes(state)
        assert predicted <= actual <= predicted * 1.01 + 64, (w.spec, predicted, actual)


def test_params_and_flops_are_the_models_closed_forms():
    from paradnn.families import cnn, fc, rnn
    from paradnn.backends.jax.models import param_count

    workloads = grid("fc", layers=[2, 8], nodes=[32, 4096], input=2000, output=1000, batch=64)
    workloads += [Workload(CNN("bottleneck", 2, 16, 224, 1000), 32),
                  Workload(RNN("gru", 3, 128, 20, 512), 16, "bfloat16")]
    table = config_table(workloads)
    for w, params, flops in zip(workloads, table["params"], table["model_flops_per_step"]):
        mod = {"fc": fc, "cnn": cnn, "rnn": rnn}[w.family]
        assert params == param_count(w.spec)
        assert flops == mod.train_flops_per_example(w.spec) * w.batch


@pytest.mark.slow
def test_memory_estimate_within_2x_of_compiled_memory_analysis():
    from paradnn.plan import compiled_memory

    workloads = [Workload(FC(2, 64, 512, 100), 128), Workload(RNN("lstm", 1, 16, 4, 32), 4)]
    table = config_table(workloads)
    for w, estimate in zip(workloads, table["memory_bytes"]):
        compiled, seconds = compiled_memory(w)
        assert seconds > 0
        assert compiled / 2 <= estimate <= compiled * 2, (w.spec, estimate, compiled)


def test_paper_fc_grid_plans_in_seconds():
    t0 = time.perf_counter()
    p = plan(ROOT / "sweeps" / "fc.yaml", store=None, memory_limit_bytes="16GB")
    elapsed = time.perf_counter() - t0
    s, t = p.summary, p.table
    assert s["configs"] == len(t) == 19440
    assert s["stored"] + s["to_run"] + s["oom"] == 19440 and s["stored"] == 0
    assert elapsed < 30, elapsed  # seconds on a loaded 2-core host, not minutes
    assert s["memory_limit_source"] == "argument" and s["memory_limit_bytes"] == 16 * 10**9
    # The largest model (8.6 G parameters: 34 GB of float32 weights alone) cannot fit 16 GB,
    # the smallest (74 k parameters) can.
    biggest = t.loc[t["params"].idxmax()]
    smallest = t.loc[t["params"].idxmin()]
    assert biggest["predicted"] == "oom" and smallest["predicted"] == "run"
    assert (t.loc[t["predicted"] == "oom", "memory_bytes"] > 16e9).all()
    # No records: no time estimate, and it says so.
    assert s["wall_s"] is None and s["calibration"]["method"] == "none"
    assert "no store records" in s["calibration"]["source"]


def test_time_model_calibrated_from_store_and_resume_counts(tmp_path):
    from paradnn import hardware

    db = tmp_path / "r.db"
    done = grid("fc", layers=2, nodes=[32, 64, 128], input=64, output=10, batch=8)
    hardware.probe()  # once per session: a probe in the timed sweep would count for one config only
    t0 = time.monotonic()
    sweep(done, store=db, executor="inprocess", settings=TINY, cache_dir=None, progress=False)
    measured_per_config = (time.monotonic() - t0) / 3
    rows = load(db)
    # Every row carries the source revision (item 7).
    assert rows["paradnn_revision"].str.match(r"^(git:[0-9a-f]{40}(\+dirty)?|version:.+)$").all()

    more = grid("fc", layers=2, nodes=[32, 64, 128, 96, 112], input=64, output=10, batch=8)
    p = plan(more, store=db, settings=TINY)
    s, t = p.summary, p.table
    assert s["stored"] == 3 and s["to_run"] == 2 and s["oom"] == 0
    assert s["calibration"]["method"] == "store" and s["calibration"]["records"] == 3
    assert "3 ok record(s)" in s["calibration"]["source"]
    todo = t[t["predicted"] == "run"]
    assert list(todo["nodes"]) == [96, 112]
    assert (t.loc[t["predicted"] == "stored", "wall_s"] == 0).all()
    assert not todo["extrapolated"].any()  # inside the calibrated FLOP range
    # Each estimate is the measured cost of such a config, give or take (loaded CI host).
    for wall in todo["wall_s"]:
        assert measured_per_config / 4 < wall < measured_per_config * 4, (wall, measured_per_config)
    assert s["wall_s"] == pytest.approx(todo["wall_s"].sum())
    # repeat=2 wants one more record of every config, stored ones included.
    again = plan(more, store=db, settings=TINY, repeat=2)
    assert again.summary["stored"] == 0 and again.summary["to_run"] == 5


def test_plan_counts_the_automatic_retries_of_unstable_configs(tmp_path):
    """A store whose rows all missed their precision target at their time budget: the plan
    expects every config to measure to be retried (its timing again at 4x), within the sweep
    file's retry_unstable_s, adds that to its wall time and says so. Rows whose timing ended at
    max_calls instead count no retry: the sweep does not retry them."""
    from paradnn.cli.plan import format_plan
    from paradnn.sweeper import RETRY_BUDGET_FACTOR

    capped_db = tmp_path / "capped.db"
    strict = TINY.replace(ci_target=1e-6)  # no run meets it: every row unstable
    sweep(grid("fc", layers=2, nodes=[32, 64], input=64, output=10, batch=8), store=capped_db,
          executor="inprocess", settings=strict, cache_dir=None, progress=False)
    capped = load(capped_db)
    assert not capped["stable"].astype(bool).any() and (capped["timed_calls"] >= capped["max_calls"]).all()
    assert plan(grid("fc", layers=2, nodes=[96], input=64, output=10, batch=8),
                store=capped_db, settings=strict).summary["retry_unstable_share"] == 0.0

    db = tmp_path / "r.db"
    # Enough calls allowed that the timing ends at its (short) time budget.
    strict = strict.replace(max_calls=10_000, time_budget_s=0.05)
    sweep(grid("fc", layers=2, nodes=[32, 64], input=64, output=10, batch=8), store=db,
          executor="inprocess", settings=strict, cache_dir=None, progress=False)
    rows = load(db)
    assert not rows["stable"].astype(bool).any() and (rows["timed_calls"] < rows["max_calls"]).all()
    for bound in (1e4, 0.5, 0.0):
        path = tmp_path / f"retry{bound}.yaml"
        path.write_text(json.dumps({
            "family": "fc", "layers": 2, "nodes": [96, 112], "input": 64, "output": 10, "batch": 8,
            "settings": strict.to_dict(), "run": {"retry_unstable_s": bound}}))
        p = plan(str(path), store=db)
        s, todo = p.summary, p.table[p.table["predicted"] == "run"]
        assert s["retry_unstable_share"] == 1.0 and s["retry_bound_s"] == bound
        expected = (todo["wall_s"] + (RETRY_BUDGET_FACTOR - 1) * todo["timing_s"]).sum()
        assert s["retry_s"] == pytest.approx(min(bound, expected))
        assert s["wall_s"] == pytest.approx(todo["wall_s"].sum() + s["retry_s"])
        assert ("100% of the store's ok rows on this device missed their precision target at their "
                "time budget") in format_plan(p)


def test_plan_and_progress_line_give_the_same_estimate(tmp_path):
    """One estimator: for the same store and configs, ``paradnn plan`` and the sweep's progress
    line (its first line, written before anything runs) say the same seconds per config and the
    same total, from the same calibration."""
    db = tmp_path / "r.db"
    sweep(grid("fc", layers=2, nodes=[32, 64, 128], input=64, output=10, batch=8), store=db,
          executor="inprocess", settings=TINY, cache_dir=None, progress=False)
    more = grid("fc", layers=2, nodes=[32, 64, 128, 96, 112], input=64, output=10, batch=8)
    more += [Workload(CNN("residual", 1, 4, 32, 10), 2)]  # another family: the all-records fit
    p = plan(more, store=db, settings=TINY)
    todo = p.table[p.table["predicted"] == "run"]
    assert len(todo) == 3 and p.summary["calibration"]["method"] == "store"

    platform, _ = context("jax")
    pending = [w for w in more if w.key in set(todo["workload_key"])]
    per_key, basis = progress_estimates(pending, load(db), platform,
                                        TINY, label=str(db))
    assert per_key == dict(zip(todo["workload_key"], todo["wall_s"]))
    assert basis == p.summary["calibration"]["source"]
    assert sum(per_key.values()) == pytest.approx(p.summary["wall_s"])

    out = io.StringIO()
    sweep(more, store=db, executor="inprocess", settings=TINY, cache_dir=None, progress=out)
    expected = io.StringIO()
    Progress(3, 3, expected, estimates=dict(zip(todo["workload_key"], todo["wall_s"])),
             planned=list(todo["workload_key"]), calibration=p.summary["calibration"]["source"])
    # The sweep first announces itself; its second line is the estimate.
    assert out.getvalue().splitlines()[1] == expected.getvalue().splitlines()[0]
    assert "; estimated " in expected.getvalue()


def test_progress_line_eta_from_estimates_and_names_the_config():
    w1, w2 = (Workload(FC(2, n, 64, 10), 8) for n in (32, 64))
    out = io.StringIO()
    bar = Progress(2, 1, out, estimates={w1.key: 10.0, w2.key: 30.0},
                   planned=[w1.key, w2.key], calibration="store: 3 ok record(s)")
    first = out.getvalue().splitlines()[0]
    assert "2 config(s) to measure, 1 already in the store" in first
    assert "estimated 40s (store: 3 ok record(s))" in first
    assert bar.eta() == pytest.approx(40.0)
    bar.begin(w1)
    assert out.getvalue().splitlines()[-1].endswith(
        "running fc layers=2 nodes=32 input=64 output=10 batch=8 float32")
    record = Record(status="ok", workload=w1.to_dict(), platform={}, software={}, settings={})
    before = time.monotonic() - bar.start
    bar.update(record)
    eta = bar.eta()
    after = time.monotonic() - bar.start
    # The 30 s left, scaled by how long w1 really took against its 10 s estimate.
    assert 30.0 * before / 10.0 <= eta <= 30.0 * after / 10.0
    assert "1/2" in out.getvalue().splitlines()[-1] and "ok 1" in out.getvalue()


def test_progress_line_adds_the_retries_the_finished_configs_call_for():
    """An ok config that missed its precision target at its time budget calls for a retry:
    the line adds its estimate (its wall time with the retry's 4x budget), scaled to all
    configs and at most the bound; a stable config, or one whose timing ended at max_calls,
    calls for none."""
    w1, w2, w3 = (Workload(FC(2, n, 64, 10), 8) for n in (32, 64, 96))
    out = io.StringIO()
    bar = Progress(4, 0, out, retry_bound_s=1000.0, retry_budget_s=4.0)

    def done(w, stable: bool, timed_calls: int) -> None:
        bar.update(Record(status="ok", workload=w.to_dict(), platform={}, software={},
                          settings={"max_calls": 50},
                          metrics={"stable": stable, "timed_calls": timed_calls,
                                   "phase_total_s": 3.0, "timing_s": 1.0}))

    done(w1, True, 10)
    done(w2, False, 50)  # ended at max_calls: a longer budget would time the same calls
    assert bar.retries_s() == 0.0 and "retries" not in out.getvalue().splitlines()[-1]
    done(w3, False, 10)
    # (3 s - 1 s of timing + 4 s of budget) for 1 of 3 finished configs, scaled to 4 configs.
    assert bar.retries_s() == pytest.approx(6.0 * 4 / 3)
    assert out.getvalue().splitlines()[-1].endswith("(+ retries ~8s)")
    bar.retry_bound_s = 5.0
    assert bar.retries_s() == 5.0


def test_progress_without_estimates_falls_back_to_the_mean():
    out = io.StringIO()
    bar = Progress(3, 0, out)
    assert bar.eta() is None and "ETA ?" in bar.line()
    assert "no time estimate" not in out.getvalue()  # nothing claimed without a calibration


def test_cli_plan_file_spec_and_dry_run(tmp_path):
    store = tmp_path / "never.db"
    r = _cli("sweep", "sweeps/smoke.yaml", "--dry-run", "--store", str(store))
    assert r.returncode == 0, r.stderr
    assert "configs          5 (" in r.stdout and "predicted oom" in r.stdout
    assert "estimated time   unknown" in r.stdout
    assert not store.exists()  # a dry run writes nothing

    r = _cli("plan", "fc", "--layers", "4", "--nodes", "1024", "--input", "2000", "--output",
             "1000", "--batch", "256", "--memory-limit", "50MB", "--store", str(store), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    # 6.2 M parameters: 74.7 MB of weights and rmsprop state alone exceed 50 MB.
    assert summary["configs"] == 1 and summary["oom"] == 1 and summary["params_max"] == 6222824
    assert summary["memory_limit_source"] == "argument"

    csv = tmp_path / "plan.csv"
    r = _cli("plan", "sweeps/small.yaml", "--csv", str(csv), "--rows", "2")
    assert r.returncode == 0, r.stderr
    assert "largest configs to measure" in r.stdout and csv.exists()
    assert len(csv.read_text().splitlines()) == 1 + len(load_sweep_file(ROOT / "sweeps/small.yaml").workloads)


def test_cli_plan_bad_input(tmp_path):
    r = _cli("plan", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr
    r = _cli("plan", "fc", "--layers", "0", "--nodes", "8", "--input", "8", "--output", "2")
    assert r.returncode == 2 and "layers" in r.stderr and "Traceback" not in r.stderr
    r = _cli("plan", "sweeps/smoke.yaml", "--memory-limit", "lots")
    assert r.returncode == 2 and "lots" in r.stderr and "Traceback" not in r.stderr


def test_short_name_from_workload_and_row():
    w = Workload(RNN("lstm", 2, 16, 4, 32), 8, "bfloat16", "adam")
    name = "rnn cell=lstm layers=2 embed=16 length=4 vocab=32 batch=8 bfloat16 optimizer=adam"
    assert short_name(w) == name
    row = {**w.to_dict(), "nodes": float("nan"), "layers": 2.0, "batch": 8.0}
    assert short_name(row) == name


# -- item 7: source revision -----------------------------------------------------------------

def test_revision_is_the_checkouts_commit():
    from paradnn.hardware import paradnn_revision, software_info

    pkg = ROOT / "paradnn"
    head = subprocess.run(["git", "-C", str(pkg), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode != 0:
        pytest.skip("the tests do not run from a git checkout of paradnn")
    dirty = subprocess.run(["git", "-C", str(pkg), "status", "--porcelain",
                            "--untracked-files=no"], capture_output=True, text=True).stdout
    expected = f"git:{head.stdout.strip()}" + ("+dirty" if dirty.strip() else "")
    assert paradnn_revision() == expected
    assert software_info()["paradnn_revision"] == expected


def test_revision_without_git_is_the_version(tmp_path):
    """A copy of the package outside any checkout, and a PATH without git: the version."""
    shutil.copytree(ROOT / "paradnn", tmp_path / "paradnn",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import paradnn, paradnn.hardware as h; "
            "print(paradnn.__file__); print(h.paradnn_revision())")
    for path in (os.environ.get("PATH", ""), str(tmp_path / "no-bin")):
        env = {**os.environ, "PYTHONPATH": str(tmp_path), "PATH": path}
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=tmp_path, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        where, revision = r.stdout.split()
        assert where.startswith(str(tmp_path))
        import paradnn

        assert revision == f"version:{paradnn.__version__}"


def test_revision_is_stored_but_not_in_the_key():
    w = Workload(FC(2, 32, 64, 10), 8)
    base = dict(status="ok", workload=w.to_dict(), platform={"device_platform": "cpu", "host": "a"},
                settings={"steps_per_call": 2})
    a = Record(software={"jax_version": "0.10.2", "paradnn_revision": "git:" + "a" * 40}, **base)
    b = Record(software={"jax_version": "0.10.2", "paradnn_revision": "git:" + "b" * 40 + "+dirty"},
               **base)
    c = Record(software={"jax_version": "0.10.3", "paradnn_revision": "git:" + "a" * 40}, **base)
    assert a.key == b.key  # resume works across commits and edits
    assert a.key != c.key  # but not across the software that shapes a measurement
    assert a.to_dict()["paradnn_revision"] == "git:" + "a" * 40


@pytest.mark.slow
def test_calibration_run_times_configs_of_this_sweep(tmp_path):
    """--calibrate: a few configs of the sweep itself are timed (in a temporary store, the
    store given is not touched) and the estimate is fitted to them."""
    workloads = grid("fc", layers=2, nodes=[32, 64, 96, 128], input=64, output=10, batch=8)
    store = tmp_path / "untouched.db"
    p = plan(workloads, store=store, settings=TINY, calibrate=True)
    s = p.summary
    assert not store.exists()
    assert s["calibration"]["method"] == "calibration run"
    assert 1 <= s["calibration"]["records"] <= 2  # 10th and 50th percentile of FLOPs
    assert "calibration run of" in s["calibration"]["source"]
    assert s["wall_s"] is not None and s["wall_s"] > 0
    assert (p.table["wall_s"] > 0).all()


def test_compile_flag_takes_xla_memory_analysis():
    from paradnn.plan import compiled_memory

    w = Workload(FC(2, 32, 64, 10), 8)
    p = plan([w], store=None, settings=TINY, compile=True, memory_limit_bytes="1GB")
    row = p.table.iloc[0]
    assert p.summary["memory_method"] == "compiled"
    assert row["memory_source"] == "compiled memory analysis"
    assert row["measured_compile_s"] > 0
    assert row["memory_bytes"] == compiled_memory(w)[0]
    # At least the arguments: weights + rmsprop state + the batch.
    assert row["memory_bytes"] >= row["state_bytes"] + row["batch_bytes"]
