"""Executors: the phase breakdown of every record (issue 20) and framework isolation in the
process executor (issue 24: TensorFlow and PyTorch never share a child). Real SQLite, real
compiled programs, real child processes for the slow tests."""

from __future__ import annotations

import importlib.util
import io
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import TINY
from paradnn.grids import grid
from paradnn.record import METRICS, PHASES, phase_metric, phase_totals
from paradnn.store import load
from paradnn.sweeper import sweep

ROOT = Path(__file__).resolve().parents[1]


def check_phases(row: dict) -> None:
    """Every phase is a non-negative number of seconds and they sum to phase_total_s."""
    values = {p: row[phase_metric(p)] for p in PHASES}
    for phase, value in values.items():
        if phase == "trace" and value is None:  # frameworks that do not split their compile
            continue
        assert value is not None and value == value and value >= 0, (phase, value)
    total = sum(v or 0.0 for v in values.values())
    assert row["phase_total_s"] == pytest.approx(total, rel=1e-6)
    assert row["phase_compile_s"] > 0 and row["phase_init_s"] > 0
    assert row["phase_warmup_s"] == pytest.approx(row["warmup_elapsed_s"])
    assert row["phase_timed_s"] == pytest.approx(row["timing_s"] - row["warmup_elapsed_s"])


def test_phase_metrics_are_registered_with_units():
    for phase in PHASES:
        assert METRICS[phase_metric(phase)][0] == "s"
    assert METRICS["phase_total_s"][0] == "s"
    doc = (ROOT / "docs" / "metrics.md").read_text()
    for name in [*map(phase_metric, PHASES), "phase_total_s"]:
        assert f"`{name}`" in doc, name


def test_every_record_has_a_phase_breakdown_and_the_sweep_prints_totals(tmp_path):
    stream = io.StringIO()
    df = sweep(grid("fc", layers=2, nodes=[32, 40], input=64, output=10, batch=8),
               store=tmp_path / "r.db", executor="inprocess", settings=TINY,
               cache_dir=tmp_path / "xla", progress=stream)
    assert list(df["status"]) == ["ok", "ok"]
    rows = df.to_dict("records")
    for row in rows:
        check_phases(row)
    # The first config started JAX in this process (unless an earlier test did): never negative.
    assert all(r["phase_startup_s"] >= 0 for r in rows)
    totals = phase_totals(rows)
    assert totals["total"] == pytest.approx(sum(r["phase_total_s"] for r in rows))
    assert "where the time went, summed over the 2 record(s)" in stream.getvalue()
    assert "compile" in stream.getvalue() and "store writes" in stream.getvalue()
    # The phases survive the store.
    stored = load(tmp_path / "r.db").to_dict("records")
    assert sorted(r["phase_total_s"] for r in stored) == sorted(r["phase_total_s"] for r in rows)


@pytest.mark.slow
def test_mixed_tensorflow_and_torch_sweep_file_measures_every_config_ok(tmp_path):
    """Issue 24: configs of TensorFlow and PyTorch interleaved in one sweep file. In one process
    the two abort (SIGABRT); the process executor gives each framework its own child, so every
    config is ``ok``, and `paradnn status` prints the phase totals."""
    f = tmp_path / "mixed.yaml"
    f.write_text(textwrap.dedent("""
        parts:
          - family: fc
            fixed: {layers: 1, input: 16, output: 4, batch: 4}
            axes: {nodes: [8, 16], framework: [tensorflow, torch]}
        settings: {steps_per_call: 2, warmup_calls: 1, min_calls: 6, max_calls: 6,
                   time_budget_s: 0.1}
    """))
    store = tmp_path / "r.db"
    proc = subprocess.run([sys.executable, "-m", "paradnn", "sweep", f, "--store", store,
                           "--cache-dir", tmp_path / "cache"],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    df = load(store)
    assert len(df) == 4
    assert sorted(df["framework"]) == ["tensorflow", "tensorflow", "torch", "torch"]
    assert set(df["status"]) == {"ok"}, df[["framework", "status", "error"]].to_string()
    for row in df.to_dict("records"):
        check_phases(row)
    assert "where the time went" in proc.stderr
    status = subprocess.run([sys.executable, "-m", "paradnn", "status", store],
                            capture_output=True, text=True, timeout=300)
    assert status.returncode == 0 and "where the time went (4 row(s)" in status.stdout


@pytest.mark.slow
def test_inprocess_executor_refuses_two_clashing_frameworks_with_one_line(tmp_path):
    """In one process TensorFlow then PyTorch would abort mid-sweep: the in-process executor
    says so before any config runs, and nothing is stored."""
    f = tmp_path / "mixed.yaml"
    f.write_text("parts:\n  - family: fc\n    fixed: {layers: 1, nodes: 8, input: 16, output: 4, "
                 "batch: 4}\n    axes: {framework: [tensorflow, torch]}\n")
    proc = subprocess.run([sys.executable, "-m", "paradnn", "sweep", f, "--store",
                           tmp_path / "r.db", "--executor", "inprocess", "--no-cache"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if "cannot run in the same process" in ln]
    assert lines and "executor='process'" in lines[0] and "Traceback" not in proc.stderr


def test_analysis_cache_keeps_answers_and_treats_damage_as_a_miss(tmp_path):
    import jax
    import numpy as np

    from paradnn.backends.jax import analyses

    restore = analyses.configure(tmp_path)
    try:
        calls = []
        compute = lambda: calls.append(1) or {"flops": 2.0}  # noqa: E731
        assert analyses.cached_json("t", "w1", compute) == {"flops": 2.0}
        analyses._memory.clear()  # as in a new process: from the folder
        assert analyses.cached_json("t", "w1", compute) == {"flops": 2.0} and calls == [1]
        shapes = {"a": jax.ShapeDtypeStruct((2, 3), np.float32), "b": jax.ShapeDtypeStruct((), np.int32)}
        tree = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.int32(7)}
        assert analyses.storable(shapes)
        analyses.save_arrays("init", "w1", tree)
        back = analyses.load_arrays("init", "w1", shapes)
        assert np.array_equal(back["a"], tree["a"]) and int(back["b"]) == 7
        (entry,) = (tmp_path / "analyses").glob("init-w1-*.bin")
        entry.write_bytes(entry.read_bytes()[:-1])  # truncated: a miss, never wrong numbers
        assert analyses.load_arrays("init", "w1", shapes) is None
    finally:
        restore()
        analyses._memory.clear()


@pytest.mark.slow
def test_warm_rerun_reuses_analyses_with_the_same_numbers(tmp_path):
    """A second sweep with the same cache folder loads the measured programs, initial states and
    analyses instead of computing them, and records the same counted numbers. A program JAX
    served from its own persistent cache is never kept (it would serialize without its
    functions and fail in the next process): after the kept programs are deleted, a third sweep
    loads them from JAX's cache and keeps none, and a fourth sweep (new processes) is still ok."""
    g = (grid("fc", layers=2, nodes=32, input=64, output=10, batch=8)
         + grid("rnn", cell="lstm", layers=1, embed=8, length=3, vocab=16, batch=2))
    cache = tmp_path / "cache"
    cold = sweep(g, store=tmp_path / "cold.db", settings=TINY, cache_dir=cache, progress=False)
    kinds = {p.name.split("-")[0] for p in (cache / "analyses").iterdir()}
    assert {"init", "residuals", "loop_costs", "program"} <= kinds
    assert list(cold["compile_source"]) == ["compiled", "compiled"]
    # A damaged entry is computed again, not an error.
    inits = sorted((cache / "analyses").glob("init-*"), key=lambda p: p.stat().st_size)
    inits[0].write_bytes(b"not an array")
    warm = sweep(g, store=tmp_path / "warm.db", settings=TINY, cache_dir=cache, progress=False)
    assert list(cold["status"]) == list(warm["status"]) == ["ok", "ok"]
    assert list(warm["compile_source"]) == ["paradnn program cache"] * 2
    same = ["flops_per_step", "bytes_per_step", "params", "step_loop_used", "memory_peak_bytes",
            "memory_activations_bytes", "memory_weights_bytes", "model_flops_per_step"]
    assert cold[same].to_dict("records") == warm[same].to_dict("records")
    for row in warm.to_dict("records"):
        check_phases(row)
    # Per config, not summed: the damaged initial state is computed again, and one recompute
    # on a loaded host can outweigh what the other config's load saved. The loaded one takes a
    # fraction of its compile (milliseconds against 0.1-0.3 s).
    init_cold, init_warm = cold["phase_init_s"].to_numpy(), warm["phase_init_s"].to_numpy()
    assert (init_warm < init_cold / 2).any(), (init_cold, init_warm)
    assert warm["phase_costs_s"].sum() < cold["phase_costs_s"].sum()
    assert warm["phase_trace_s"].sum() < cold["phase_trace_s"].sum()

    for kept in (cache / "analyses").glob("program-*"):
        kept.unlink()
    third = sweep(g, store=tmp_path / "third.db", settings=TINY, cache_dir=cache, progress=False)
    assert list(third["compile_source"]) == ["JAX persistent cache"] * 2
    assert not list((cache / "analyses").glob("program-*"))
    fourth = sweep(g, store=tmp_path / "fourth.db", settings=TINY, cache_dir=cache, progress=False)
    assert list(fourth["status"]) == ["ok", "ok"], list(fourth["error"])
    assert fourth[same].to_dict("records") == cold[same].to_dict("records")


def test_plan_wall_time_of_a_record_is_its_measured_phase_total():
    """The estimator's wall seconds of a record with a phase breakdown are its phase_total_s,
    not the gap to the previous record (which a pause between sessions would inflate)."""
    import pandas as pd

    from paradnn.analysis import cost

    df = pd.DataFrame({"time_utc": ["2026-01-01T00:00:00+00:00", "2026-01-01T00:00:50+00:00",
                                    "2026-01-01T00:01:00+00:00"],
                       "host": ["h"] * 3, "compile_s": [1.0] * 3, "step_time_s": [0.01] * 3,
                       "steps_per_call_used": [2] * 3, "timed_calls": [3] * 3,
                       "warmup_elapsed_s": [0.1] * 3, "phase_total_s": [2.5, None, 3.0]})
    walls = cost.wall_seconds(df)
    assert walls[0] == 2.5 and walls[2] == 3.0  # measured, although the gaps are NaN and 10 s
    assert walls[1] == 50.0  # no breakdown: the gap


@pytest.fixture
def starts(monkeypatch) -> list:
    """Every child process the executor's module paradnn.spawn starts in this test, as
    (role, preload, Started): the real processes, only recorded."""
    from paradnn import spawn

    started: list = []
    real = spawn.start

    def recording(role: str, preload: str = "", env: dict | None = None):
        found = real(role, preload, env)
        started.append((role, preload, found))
        return found

    monkeypatch.setattr(spawn, "start", recording)
    yield started
    spawn.discard()


def assert_reaped(starts: list) -> None:
    """No process of ``starts`` is left: each one exited and was waited for (no zombie)."""
    from paradnn import spawn

    assert spawn._prestarted is None
    for _, _, found in starts:
        assert found.proc.returncode is not None, found.proc.pid
        assert not Path(f"/proc/{found.proc.pid}").exists(), found.proc.pid


@pytest.mark.slow
def test_cli_sweep_measures_in_the_worker_it_prestarted(tmp_path, starts):
    """`paradnn sweep` starts its measuring worker before it imports its modules (JAX is
    imported there meanwhile); the process executor adopts it: one child for the whole sweep,
    and it is charged to the first record only, as the wait the sweep had."""
    from helpers import SMALL_FILE
    from paradnn.cli import main

    f = tmp_path / "s.yaml"
    f.write_text(SMALL_FILE.replace("nodes: 8", "nodes: [8, 12]"))
    store = tmp_path / "r.db"
    assert main(["sweep", str(f), "--store", str(store), "--cache-dir", str(tmp_path / "xla"),
                 "--quiet"]) == 0
    assert [(role, preload) for role, preload, _ in starts] == [("measure", "jax")]
    df = load(store).sort_values("time_utc")
    assert list(df["status"]) == ["ok", "ok"]
    first, second = df["phase_startup_s"]
    assert first > 0 and second == 0
    assert_reaped(starts)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["bad value", "missing file", "bad flag", "inprocess", "dry run"])
def test_cli_sweep_leaves_no_unused_worker_behind(tmp_path, starts, case):
    """A pre-started worker that no executor adopts (bad input exiting 2, another executor) is
    killed and reaped before `paradnn sweep` returns; a dry run starts none."""
    from helpers import SMALL_FILE
    from paradnn.cli import main

    f = tmp_path / "s.yaml"
    f.write_text(SMALL_FILE.replace("batch: 4", "batch: -4") if case == "bad value" else SMALL_FILE)
    args = ["sweep", str(tmp_path / "none.yaml" if case == "missing file" else f),
            "--store", str(tmp_path / "r.db"), "--no-cache", "--quiet"]
    args += {"inprocess": ["--executor", "inprocess"], "dry run": ["--dry-run"],
             "bad flag": ["--repeat", "many"]}.get(case, [])
    if case == "bad flag":  # argparse's own usage error: exit 2 through SystemExit
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 2
    else:
        assert main(args) == (2 if case in ("bad value", "missing file") else 0)
    assert [(role, preload) for role, preload, _ in starts] == ([] if case == "dry run" else
                                                                [("measure", "jax")])
    assert_reaped(starts)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="needs the torch extra: pip install 'paradnn[torch]'")
def test_cli_torch_sweep_gets_a_worker_that_never_imported_jax(tmp_path, starts):
    """The pre-started worker imports JAX: a torch config never runs in it, but in a fresh
    child that imported nothing before its init (a child never hosts two frameworks)."""
    from helpers import SMALL_FILE
    from paradnn.cli import main

    f = tmp_path / "s.yaml"
    f.write_text(SMALL_FILE + "framework: torch\n")
    store = tmp_path / "r.db"
    assert main(["sweep", str(f), "--store", str(store), "--no-cache", "--quiet"]) == 0
    assert list(load(store)["status"]) == ["ok"]
    # The pre-started JAX worker, killed unused when the sweep asked for torch's (the configs
    # are keyed with torch's context alone), and torch's own.
    assert [(role, preload) for role, preload, _ in starts] == [("measure", "jax"), ("measure", "")]
    assert_reaped(starts)
    assert starts[0][2].proc.returncode == -signal.SIGKILL
