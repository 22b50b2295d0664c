"""Sweeps: resume after SIGKILL, concurrent sweeps on one store, crash/hang isolation, predicted
out-of-memory, and clear errors. Real SQLite, real child processes, real XLA for the runner path.

Faults are injected through ``run_fn`` (a test-only parameter): the top-level functions below
replace ``paradnn.runner.run_workload`` inside the sweep's child process.
"""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers import TINY, child_env
import paradnn
from paradnn import ParadnnError, SpecError, hostmem
from paradnn.grids import grid
from paradnn.record import Record
from paradnn.store import load
from paradnn.sweeper import sweep



def tiny_grid(nodes=(32, 40, 48, 56, 64)):
    return grid("fc", layers=2, nodes=list(nodes), input=64, output=10, batch=8)


# -- run functions injected into the child process -------------------------------------------

def fake_ok(workload, settings, memory_limit_bytes):
    """A measurement stand-in: a record with this host's platform, after PARADNN_TEST_SLEEP s."""
    from paradnn.runner import context

    time.sleep(float(os.environ.get("PARADNN_TEST_SLEEP", "0")))
    platform, software = context(workload.framework)  # what the runner records
    return Record(status="ok", workload=workload.to_dict(), platform=platform,
                  software=software, settings=settings.to_dict(),
                  metrics={"examples_per_sec": 1.0, "params": workload.spec.nodes})


def faulty(workload, settings, memory_limit_bytes):
    """nodes 40 hangs, 48 kills its process with SIGSEGV, 56 raises; the rest succeed."""
    nodes = workload.spec.nodes
    if nodes == 40:
        time.sleep(3600)
    if nodes == 48:
        os.kill(os.getpid(), signal.SIGSEGV)
    if nodes == 56:
        raise RuntimeError("injected bug")
    return fake_ok(workload, settings, memory_limit_bytes)


# -- tests ----------------------------------------------------------------------------------

def test_crash_hang_error_are_recorded_and_the_sweep_finishes(tmp_path):
    db = tmp_path / "r.db"
    out = io.StringIO()
    t0 = time.monotonic()
    df = sweep(tiny_grid(), store=db, settings=TINY, timeout_s=6, run_fn=faulty,
               cache_dir=None, progress=out)
    elapsed = time.monotonic() - t0
    status = dict(zip(df["nodes"], df["status"]))
    assert status == {32: "ok", 40: "timeout", 48: "crashed", 56: "error", 64: "ok"}
    errors = dict(zip(df["nodes"], df["error"]))
    assert "time limit of 6 s" in errors[40]
    assert "SIGSEGV" in errors[48]
    assert "RuntimeError: injected bug" in errors[56]
    assert elapsed < 60, elapsed  # the hang cost its time limit, not an hour
    # progress: done/total, counts, ETA
    lines = out.getvalue().strip().splitlines()
    # The sweep's last line is where the time went; the progress line's last state before it.
    assert lines[-1].startswith("paradnn sweep: where the time went, summed over the 5 record(s)")
    last = [line for line in lines if line.startswith("[")][-1]
    assert "5/5" in last and "ok 2" in last and "timeout 1" in last and "crashed 1" in last
    assert "ETA" in last
    # Every status is final: resuming runs nothing and adds no row.
    again = sweep(tiny_grid(), store=db, settings=TINY, run_fn=faulty, cache_dir=None,
                  progress=False)
    assert len(again) == 5 and len(load(db)) == 5


def test_oversized_fc_is_oom_before_running_and_small_one_runs(tmp_path):
    """Real runner, real XLA: the predicted out-of-memory never runs; the small model does."""
    db, cache = tmp_path / "r.db", tmp_path / "xla"
    workloads = grid("fc", layers=2, nodes=[32, 4096], input=4096, output=10, batch=8)
    df = sweep(workloads, store=db, settings=TINY, memory_limit_bytes="4MB", cache_dir=cache,
               progress=False, timeout_s=300)
    small, big = (df[df["nodes"] == n].iloc[0] for n in (32, 4096))
    assert big["status"] == "oom", big["error"]
    assert big["error"].startswith("predicted")
    assert big["step_time_s"] != big["step_time_s"]  # NaN: never timed
    assert small["status"] == "ok", small["error"]
    assert small["examples_per_sec"] > 0 and small["compile_s"] > 0
    assert small["steps_per_call"] == 2
    # The sweep's worker started with huge pages for malloc (paradnn.hostmem), where the
    # kernel lets a process choose and the test's own environment does not decide it.
    if hostmem.thp_mode() == "madvise" and hostmem.child_env(os.environ):
        assert small["host_huge_pages"] == "malloc"
    assert small["host_huge_pages"] in hostmem.STATES and small["page_faults_per_step"] >= 0
    # The persistent compilation cache received the small model's programs.
    assert any(cache.rglob("*"))
    # Records carry the key the sweep predicted: resuming skips both.
    sweep(workloads, store=db, settings=TINY, memory_limit_bytes="4MB", cache_dir=cache,
          progress=False)
    assert len(load(db)) == 2


def test_repeat_measures_again_and_inprocess(tmp_path):
    db = tmp_path / "r.db"
    g = tiny_grid((32, 64))
    assert len(sweep(g, store=db, settings=TINY, run_fn=fake_ok, executor="inprocess",
                     progress=False)) == 2
    df = sweep(g, store=db, settings=TINY, run_fn=fake_ok, executor="inprocess", repeat=3,
               progress=False)
    assert len(df) == 6 and df.groupby("key").size().tolist() == [3, 3]
    # Other measurement settings are other configs.
    df = sweep(g, store=db, settings=TINY.replace(steps_per_call=3), run_fn=fake_ok,
               executor="inprocess", progress=False)
    assert len(df) == 2 and len(load(db)) == 8


DRIVER = textwrap.dedent("""
    import sys
    from test_sweep import fake_ok, tiny_grid, TINY
    from paradnn.sweeper import sweep
    sweep(tiny_grid(range(32, 32 + {n})), store=sys.argv[1], settings=TINY, run_fn=fake_ok,
          cache_dir=None, progress=False)
""")


def start_driver(db: Path, n: int, sleep: float) -> subprocess.Popen:
    code = DRIVER.format(n=n)
    return subprocess.Popen([sys.executable, "-c", code, str(db)],
                            env=child_env(PARADNN_TEST_SLEEP=str(sleep)))


def count(db: Path, table: str) -> int:
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def wait_for(predicate, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"paradnn.executors.child" in cmd and str(pid).encode() in cmd:
                out.append(int(entry.name))
    return out


def test_sigkill_at_several_points_then_resume_gives_every_config_once(tmp_path):
    db, n = tmp_path / "r.db", 10
    # Kill points: while the first config is in flight, after 3 rows, after 6 rows.
    for condition in (lambda: count(db, "claims") >= 1,
                      lambda: count(db, "records") >= 3,
                      lambda: count(db, "records") >= 6):
        proc = start_driver(db, n, sleep=0.3)
        wait_for(lambda: condition() or proc.poll() is not None)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        # the orphaned child notices its parent is gone and exits instead of measuring on
        wait_for(lambda: not children_of(proc.pid), timeout_s=10)
    assert count(db, "records") < n
    proc = start_driver(db, n, sleep=0.0)
    assert proc.wait(timeout=120) == 0
    df = load(db)
    assert len(df) == n
    assert sorted(df["nodes"]) == list(range(32, 32 + n))
    assert df["key"].is_unique
    assert count(db, "claims") == 0


@pytest.mark.slow
def test_sigterm_and_ctrl_c_stop_the_command_cleanly_then_resume_gives_every_config_once(tmp_path):
    """`paradnn sweep` on the command line, real runner and XLA: SIGTERM (what `timeout` or a
    job scheduler sends), SIGHUP (its terminal closed) and then SIGINT (Ctrl-C), each after rows
    were stored, end the command with 143, 129 and 130, one line saying how many rows this run
    wrote and how to go on, no traceback, and no child process left behind; a SIGHUP the command
    was started ignoring (nohup) does not stop it; the same command then measures the rest."""
    n = 20
    sweep_file = tmp_path / "grid.yaml"
    sweep_file.write_text(textwrap.dedent(f"""
        family: fc
        fixed: {{layers: 1, input: 8, output: 2, batch: 4}}
        axes: {{nodes: {list(range(8, 8 + n))}}}
        settings: {{steps_per_call: 2, warmup_calls: 1, min_calls: 6, max_calls: 6, time_budget_s: 0.2}}
        """))
    db = tmp_path / "r.db"
    command = [sys.executable, "-m", "paradnn", "sweep", str(sweep_file), "--store", str(db), "--quiet"]
    for stop, code, line, nohup in ((signal.SIGTERM, 143, "paradnn: terminated (SIGTERM)", False),
                                    (signal.SIGHUP, 129, "paradnn: terminated (SIGHUP)", False),
                                    (signal.SIGHUP, 143, "paradnn: terminated (SIGTERM)", True),
                                    (signal.SIGINT, 130, "paradnn: interrupted", False)):
        before = count(db, "records")
        # nohup's way: SIGHUP ignored, then exec (an ignored signal stays ignored across exec).
        started = ([sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
                    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])", *command[1:]]
                   if nohup else command)
        proc = subprocess.Popen(started, env=child_env(), stderr=subprocess.PIPE, text=True)
        wait_for(lambda: count(db, "records") > before or proc.poll() is not None, timeout_s=180)
        assert proc.poll() is None, "the sweep ended before it could be stopped"
        children = children_of(proc.pid)
        if nohup:  # the hangup is ignored: the sweep stores another row, then SIGTERM stops it
            proc.send_signal(stop)
            seen = count(db, "records")
            wait_for(lambda: count(db, "records") > seen or proc.poll() is not None, timeout_s=180)
            assert proc.poll() is None, "the sweep ended after a SIGHUP it was started ignoring"
            stop = signal.SIGTERM
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == code, err[-2000:]
        assert "Traceback" not in err, err[-2000:]
        written = count(db, "records") - before
        assert 0 < written < n
        assert err.rstrip().endswith(line), err[-500:]
        assert (f"paradnn sweep: stopped; {written} row(s) written to {db} since this sweep started "
                "are kept") in err, err[-1000:]
        # The measuring child was stopped with its driver (the same check as after SIGKILL).
        assert children
        wait_for(lambda: not children_of(proc.pid), timeout_s=10)
    proc = subprocess.run(command, env=child_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    df = load(db)
    assert sorted(df["nodes"]) == list(range(8, 8 + n)) and df["key"].is_unique
    assert count(db, "claims") == 0


def test_two_sweeps_on_one_store_at_once(tmp_path):
    db, n = tmp_path / "r.db", 12
    procs = [start_driver(db, n, sleep=0.2) for _ in range(2)]
    assert [p.wait(timeout=180) for p in procs] == [0, 0]
    df = load(db)
    assert len(df) == n and df["key"].is_unique
    assert sorted(df["nodes"]) == list(range(32, 32 + n))
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


def test_sweep_errors(tmp_path):
    foreign = tmp_path / "mine.db"
    foreign.write_text("not a store")
    before = (foreign.read_bytes(), foreign.stat().st_mtime_ns)
    with pytest.raises(ParadnnError, match="not a paradnn store"):
        sweep(tiny_grid((32,)), store=foreign, run_fn=fake_ok, progress=False)
    assert (foreign.read_bytes(), foreign.stat().st_mtime_ns) == before
    with pytest.raises(SpecError, match="grid item"):
        sweep(["fc"], store=tmp_path / "a.db", progress=False)
    with pytest.raises(SpecError, match="executor"):
        sweep(tiny_grid((32,)), store=tmp_path / "a.db", executor="slurm", progress=False)
    with pytest.raises(SpecError, match="repeat"):
        sweep(tiny_grid((32,)), store=tmp_path / "a.db", repeat=0, progress=False)
    with pytest.raises(ParadnnError, match="cannot be sent to a child process"):
        sweep(tiny_grid((32,)), store=tmp_path / "a.db", run_fn=lambda *a: None,
              progress=False, cache_dir=None)
    bad = tmp_path / "bad.yaml"
    bad.write_text("family: fc\nlayers: 2\nnodes: 32\ninput: 64\noutput: 10\nbatch: 8\n"
                   "run: {retries: 2}\n")
    with pytest.raises(ParadnnError, match=r"bad\.yaml: key 'run\.retries': unknown key"):
        sweep(bad, store=tmp_path / "a.db")


def test_sweep_config_resolves_file_then_overrides(tmp_path):
    """A sweep file's run values apply unless an argument overrides them; every value is checked
    (parameter, value, what is allowed), also when a field is replaced; a resolved config runs
    as is and refuses further overrides."""
    import dataclasses

    from paradnn.measure import MeasureSettings
    from paradnn.sweeper import DEFAULT_TIMEOUT_S, SweepConfig

    f = tmp_path / "s.yaml"
    f.write_text("family: fc\nlayers: 2\nnodes: [32, 40]\ninput: 64\noutput: 10\nbatch: 8\n"
                 "settings: {min_calls: 7}\n"
                 "run: {repeat: 2, timeout_s: 60, memory_limit: 1GB, cache_dir: null}\n")
    c = SweepConfig.resolve(f, tmp_path / "a.db", repeat=3, settings={"max_calls": 9})
    assert (c.repeat, c.timeout_s, c.memory_limit_bytes, c.cache_dir) == (3, 60.0, 10**9, None)
    assert (c.settings.min_calls, c.settings.max_calls) == (7, 9)
    assert c.source == str(f) and len(c.workloads) == 2 and c.executor == "process"
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.repeat = 4  # type: ignore[misc]
    g = SweepConfig.resolve(tiny_grid((32,)), "b.db")
    assert (g.repeat, g.timeout_s, g.memory_limit_bytes, g.source) == (1, DEFAULT_TIMEOUT_S,
                                                                       None, "<grid>")
    assert g.settings == MeasureSettings() and g.cache_dir is not None
    with pytest.raises(SpecError, match="timeout_s"):
        dataclasses.replace(g, timeout_s=-1)
    with pytest.raises(SpecError, match="memory limit"):
        SweepConfig.resolve(tiny_grid((32,)), memory_limit_bytes="lots")
    with pytest.raises(SpecError, match="resources.*only with executor='ray'"):
        SweepConfig.resolve(tiny_grid((32,)), resources={"num_gpus": 1})
    with pytest.raises(SpecError, match="remeasure_unstable"):
        SweepConfig.resolve(tiny_grid((32,)), remeasure_unstable="yes")
    run = dataclasses.replace(g, store=tmp_path / "b.db", executor="inprocess", cache_dir=None,
                              settings=TINY)
    df = sweep(run, run_fn=fake_ok, progress=False)
    assert list(df["nodes"]) == [32] and list(df["min_calls"]) == [TINY.min_calls]
    with pytest.raises(SpecError, match="store"):
        sweep(run, store=tmp_path / "c.db", progress=False)
    with pytest.raises(SpecError, match="repeat"):
        sweep(run, repeat=2, progress=False)


def test_sweep_file_and_cli(tmp_path, capsys):
    from paradnn.cli import main

    sweep_file = tmp_path / "s.yaml"
    sweep_file.write_text(textwrap.dedent("""
        family: fc
        fixed: {layers: 2, input: 64, output: 10, batch: 8}
        nodes: 32
        settings: {steps_per_call: 2, warmup_calls: 1, min_calls: 6, max_calls: 6,
                   time_budget_s: 0.2}
        run: {executor: inprocess}
        """))
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    assert main(["sweep", str(sweep_file), "--store", str(a), "--no-cache", "--quiet"]) == 0
    assert main(["sweep", str(sweep_file), "--store", str(b), "--no-cache", "--quiet",
                 "--repeat", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "1 rows for this sweep (ok 1)" in lines[0]
    assert "2 rows for this sweep (ok 2)" in lines[1]
    out = tmp_path / "all.db"
    assert main(["merge", str(a), str(b), "-o", str(out)]) == 0
    assert "3 rows added, 0 already present" in capsys.readouterr().out
    assert main(["status", str(out)]) == 0
    status = capsys.readouterr().out
    assert "3 rows" in status and "by family" in status and "cpu/" in status
    assert main(["export", str(out), "-o", str(tmp_path / "all.parquet")]) == 0
    assert len(load(out)) == 3
    assert main(["sweep", str(tmp_path / "missing.yaml"), "--store", str(a)]) == 2
    assert "no such file" in capsys.readouterr().err


def flaky(workload, settings, memory_limit_bytes):
    """ok records; nodes 40 is noisy (``stable`` false) the first time it runs in a store."""
    record = fake_ok(workload, settings, memory_limit_bytes)
    marker = Path(os.environ["PARADNN_TEST_MARKER"])
    noisy = workload.spec.nodes == 40 and not marker.exists()
    if noisy:
        marker.touch()
    return record.with_metrics(stable=not noisy)


def test_remeasure_unstable_measures_only_the_noisy_config_again(tmp_path, monkeypatch):
    db = tmp_path / "r.db"
    monkeypatch.setenv("PARADNN_TEST_MARKER", str(tmp_path / "noisy-once"))
    g = tiny_grid((32, 40))
    kw = dict(store=db, settings=TINY, run_fn=flaky, cache_dir=None, progress=False,
              executor="inprocess", retry_unstable_s=0)  # no automatic retry: this is the manual one
    first = sweep(g, **kw)
    assert dict(zip(first["nodes"], first["stable"])) == {32: True, 40: False}
    # A plain resume counts the unstable row as done; --remeasure-unstable does not.
    assert len(sweep(g, **kw)) == 2
    again = sweep(g, remeasure_unstable=True, **kw)
    # One row per config: the new attempt replaces the unstable one, which it names; the
    # replaced attempt stays in the store (attempts=True).
    assert sorted(zip(again["nodes"], again["stable"])) == [(32, True), (40, True)]
    every = paradnn.load(db, attempts=True)
    assert sorted(zip(every["nodes"], every["stable"])) == [(32, True), (40, False), (40, True)]
    old = every[(every["nodes"] == 40) & ~every["stable"].astype(bool)].iloc[0]
    new = again[again["nodes"] == 40].iloc[0]
    assert new["retry_of"] == old["time_utc"]
    # Now every config has a stable row: nothing left to measure.
    assert len(sweep(g, remeasure_unstable=True, **kw)) == 2 and len(paradnn.load(db, attempts=True)) == 3


# -- automatic retry of unstable configs (issue 25) ---------------------------------------------

def _retries(df):
    """The rows of a sweep's automatic retry: they ran with a longer budget than they name."""
    return df[df["time_budget_used_s"].astype(float) > df["time_budget_s"].astype(float)]


@pytest.mark.slow
def test_unstable_configs_are_retried_once_with_a_longer_budget_within_the_bound(tmp_path):
    """Two real tiny configs that cannot meet a 1e-6 precision target at a 0.2 s budget: with
    the retry off they stay as measured; a bound smaller than one retry's timing budget retries
    none; a sufficient bound measures each once more with 4x the budget, under the same record
    key (the settings asked for), both rows kept; a resumed sweep repeats nothing. Configs whose
    timing ended at max_calls, not at the budget, are not retried."""
    from paradnn.sweeper import RETRY_BUDGET_FACTOR

    db = tmp_path / "r.db"
    # No call meets the target: timing runs until the budget (max_calls as far as allowed).
    settings = TINY.replace(ci_target=1e-6, max_calls=1_000_000)
    g = grid("fc", layers=2, nodes=[16, 32], input=12, output=5, batch=4)
    kw = dict(store=db, executor="inprocess", settings=settings, cache_dir=None)

    first = sweep(g, retry_unstable_s=0, progress=False, **kw)
    assert len(first) == 2 and not first["stable"].astype(bool).any()
    assert (first["time_budget_used_s"] == 0.2).all() and _retries(first).empty

    budget = 0.2 * RETRY_BUDGET_FACTOR
    stream = io.StringIO()
    small = sweep(g, retry_unstable_s=budget / 2, progress=stream, **kw)
    assert len(small) == 2, stream.getvalue()
    assert "0 of 2 unstable config(s) measured again" in stream.getvalue()
    assert "2 not retried" in stream.getvalue()

    stream = io.StringIO()
    again = sweep(g, retry_unstable_s=600, progress=stream, **kw)
    assert "2 of 2 unstable config(s) measured again" in stream.getvalue(), stream.getvalue()
    # The lines name the stopping rule that was missed and each retry's precision against it.
    assert ("2 config(s) came back unstable (their precision target missed: the median step time's 95% CI "
            "within +-0.0001%)") in stream.getvalue()
    assert stream.getvalue().count("still unstable (median +-") == 2 and "target +-0.0001%: NOT met" in stream.getvalue()
    retry = _retries(again)
    # One row per config: each retry replaces the row it retried and names it (retry_of); the
    # store keeps both attempts (attempts=True).
    assert len(again) == 2 and len(retry) == 2
    assert sorted(retry["retry_of"]) == sorted(first["time_utc"])
    assert len(paradnn.load(db, attempts=True)) == 4
    assert set(retry["key"]) == set(first["key"])  # the config's own key: it counts on resume
    assert (retry["time_budget_s"] == 0.2).all() and (retry["time_budget_used_s"] == budget).all()
    # The longer budget was used: the protocol timed past the original budget.
    assert (retry["timing_s"] > 0.2 * 2).all() and (first["timing_s"] < budget).all()

    stream = io.StringIO()
    resumed = sweep(g, retry_unstable_s=600, progress=stream, **kw)
    assert len(resumed) == 2 and "measured again" not in stream.getvalue()

    stream = io.StringIO()
    capped = sweep(g, retry_unstable_s=600, progress=stream, **{
        **kw, "store": tmp_path / "capped.db", "settings": settings.replace(max_calls=6)})
    assert len(capped) == 2 and (capped["timed_calls"] == 6).all()
    assert "2 unstable config(s) not retried: their timing ended at max_calls" in stream.getvalue()


def slow_unstable(workload, settings, memory_limit_bytes):
    """An unstable ok record after 3 s of which 0.2 s timing (2 of its 3 calls)."""
    time.sleep(3.0)
    return fake_ok(workload, settings, memory_limit_bytes).with_metrics(
        stable=False, timing_s=0.2, timed_calls=2)


@pytest.mark.slow
def test_retries_stop_at_the_extra_time_bound(tmp_path):
    """A retry of these configs is estimated at their measured wall time (3 s and the
    executor's share) - 0.2 s timing + the 4 x 0.2 s budget, about 3.6-4.5 s, and takes 3 s:
    within 8.6 s of extra time the first starts (0 + est), the second too (3 + est), the
    third not (6 + est > 8.6); the summary says so, and the next run retries only that one."""
    from paradnn.runner import context

    # The framework's start-up (seconds in a fresh worker on a loaded host) would otherwise land
    # in the first config's wall time and its retry estimate, past the 8.6 s.
    context("jax")
    db = tmp_path / "r.db"
    g = tiny_grid((32, 40, 48))
    kw = dict(store=db, settings=TINY, run_fn=slow_unstable, cache_dir=None,
              executor="inprocess")
    assert len(sweep(g, progress=False, retry_unstable_s=0, **kw)) == 3
    stream = io.StringIO()
    df = sweep(g, progress=stream, retry_unstable_s=8.6, **kw)
    assert len(df) == 3 and list(_retries(df)["nodes"]) == [32, 40], stream.getvalue()  # grid order
    assert len(paradnn.load(db, attempts=True)) == 5
    assert "2 of 3 unstable config(s) measured again" in stream.getvalue()
    assert "1 not retried within the 8.6 s of extra time" in stream.getvalue()
    again = sweep(g, progress=False, retry_unstable_s=8.6, **kw)
    assert len(again) == 3 and sorted(_retries(again)["nodes"]) == [32, 40, 48]


def test_retry_unstable_s_is_checked_where_it_is_given(tmp_path, capsys):
    """The flag, the sweep file's run key and the API name the value and what is allowed."""
    from paradnn.cli import main

    f = tmp_path / "s.yaml"
    f.write_text("family: fc\nlayers: 2\nnodes: 32\ninput: 64\noutput: 10\nbatch: 8\n")
    with pytest.raises(SystemExit) as info:
        main(["sweep", str(f), "--retry-unstable-s", "-1"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "retry-unstable-s" in err[0] and "[0, " in err[0]
    bad = tmp_path / "bad.yaml"
    bad.write_text(f.read_text() + "run: {retry_unstable_s: soon}\n")
    with pytest.raises(ParadnnError, match="run.retry_unstable_s"):
        sweep(bad, store=tmp_path / "a.db", progress=False)
    with pytest.raises(SpecError, match="retry_unstable_s"):
        sweep(tiny_grid((32,)), store=tmp_path / "a.db", retry_unstable_s=float("inf"),
              progress=False)
    assert not (tmp_path / "a.db").exists()


def test_retry_unstable_s_defaults(tmp_path, monkeypatch):
    """Unset, the retry gets DEFAULT_RETRY_UNSTABLE_S; $PARADNN_RETRY_UNSTABLE_S (0 in this
    suite: tests/conftest.py) replaces it, checked as the setting is; a file's key wins."""
    from paradnn.sweeper import DEFAULT_RETRY_UNSTABLE_S, SweepConfig

    assert SweepConfig.resolve(tiny_grid((32,))).retry_unstable_s == 0  # the suite's default
    monkeypatch.delenv("PARADNN_RETRY_UNSTABLE_S")
    assert SweepConfig.resolve(tiny_grid((32,))).retry_unstable_s == DEFAULT_RETRY_UNSTABLE_S
    assert SweepConfig(workloads=(), store="a.db").retry_unstable_s == DEFAULT_RETRY_UNSTABLE_S
    f = tmp_path / "s.yaml"
    f.write_text("family: fc\nlayers: 2\nnodes: 32\ninput: 64\noutput: 10\nbatch: 8\n"
                 "run: {retry_unstable_s: 90}\n")
    monkeypatch.setenv("PARADNN_RETRY_UNSTABLE_S", "-5")
    assert SweepConfig.resolve(f).retry_unstable_s == 90
    assert SweepConfig.resolve(f, retry_unstable_s=0).retry_unstable_s == 0
    with pytest.raises(SpecError, match="PARADNN_RETRY_UNSTABLE_S"):
        SweepConfig.resolve(tiny_grid((32,)))


def contended_unstable(workload, settings, memory_limit_bytes):
    """An unstable ok record measured while other processes kept a core busy."""
    return fake_ok(workload, settings, memory_limit_bytes).with_metrics(
        stable=False, contended=True, host_other_busy_cores=1.0)


def test_a_config_measured_on_a_busy_host_is_not_retried(tmp_path):
    """Retries only where they can help: an unstable config measured while the host was busy
    (contended) is not retried (a longer budget would measure the load), and the summary says
    so with the recipe; nothing of the retry bound is spent."""
    stream = io.StringIO()
    df = sweep(tiny_grid((32, 40)), store=tmp_path / "c.db", settings=TINY, run_fn=contended_unstable,
               cache_dir=None, executor="inprocess", progress=stream, retry_unstable_s=600)
    assert len(df) == 2 and len(paradnn.load(tmp_path / "c.db", attempts=True)) == 2
    out = stream.getvalue()
    assert "2 unstable config(s) not retried: they were measured while other processes kept the host busy" in out
    assert "measured again" not in out


def test_no_retry_while_the_host_stays_busy(tmp_path, monkeypatch):
    """Before retrying, the sweep waits a bounded time for the host to be quiet; a host kept
    busy by another process (here: a spinning child, against a threshold of 0.05 cores) gets no
    retry, and the summary names the load and the recipe."""
    from paradnn.sweeper import retry

    monkeypatch.setenv("PARADNN_PROBE_MAX_LOAD", "0.05")
    monkeypatch.setattr(retry, "QUIET_WAIT_S", 2.0)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        stream = io.StringIO()
        t0 = time.perf_counter()
        df = sweep(tiny_grid((32,)), store=tmp_path / "b.db", settings=TINY, run_fn=flaky_always,
                   cache_dir=None, executor="inprocess", progress=stream, retry_unstable_s=600)
        waited = time.perf_counter() - t0
    finally:
        spinner.kill()
        spinner.wait()
    out = stream.getvalue()
    assert len(df) == 1 and "measured again" not in out, out
    assert "not retried: the host stayed busy" in out and "--remeasure-unstable" in out
    assert waited < 30.0  # bounded by QUIET_WAIT_S (2 s here), not the retry bound


def flaky_always(workload, settings, memory_limit_bytes):
    """An unstable ok record of a quiet host."""
    return fake_ok(workload, settings, memory_limit_bytes).with_metrics(stable=False, contended=False)


def test_a_run_setting_declared_once_is_a_file_key_flags_and_a_field(tmp_path):
    """A run setting registered in one place (paradnn.grids.runsettings.register, before the
    sweeper is imported, as a plug-in would) is a sweep file's run: key (checked as declared),
    a `paradnn sweep` flag, a `paradnn plan` flag, and a SweepConfig field, resolved from the
    argument, else the file, else its default."""
    f = tmp_path / "s.yaml"
    f.write_text("family: fc\nlayers: 2\nnodes: 32\ninput: 64\noutput: 10\nbatch: 8\n"
                 "run: {warm_grace_s: 7}\n")
    script = textwrap.dedent(f"""
        import argparse, dataclasses
        from paradnn.errors import ParadnnError
        from paradnn.grids import runsettings
        from paradnn.units import parse_number

        runsettings.register(runsettings.RunSetting(
            "warm_grace_s", 3.0, lambda v, p: parse_number(v, p, 0.0, 60.0), "seconds from 0 to 60",
            "seconds of grace", annotation="float", key="warm_grace_s", flag="--warm-grace",
            metavar="SECONDS", plan=True))
        from paradnn.cli import build_parser
        from paradnn.grids import RUN_KEYS, load_sweep_file
        from paradnn.sweeper import SweepConfig

        assert "warm_grace_s" in RUN_KEYS
        assert load_sweep_file({str(f)!r}).run["warm_grace_s"] == 7
        bad = {str(tmp_path / "bad.yaml")!r}
        open(bad, "w").write(open({str(f)!r}).read().replace("7", "99"))
        try:
            load_sweep_file(bad)
            raise AssertionError("run.warm_grace_s: 99 was accepted")
        except ParadnnError as exc:
            assert "run.warm_grace_s" in str(exc) and "60" in str(exc), exc
        assert "warm_grace_s" in {{f.name for f in dataclasses.fields(SweepConfig)}}
        assert SweepConfig.resolve({str(f)!r}).warm_grace_s == 7
        assert SweepConfig.resolve({str(f)!r}, warm_grace_s=2).warm_grace_s == 2
        assert SweepConfig(workloads=(), store="a.db").warm_grace_s == 3.0
        sweep_args = build_parser("sweep").parse_args(["sweep", {str(f)!r}, "--warm-grace", "5"])
        plan_args = build_parser("plan").parse_args(["plan", "--warm-grace", "4", {str(f)!r}])
        assert (sweep_args.warm_grace, plan_args.warm_grace) == (5.0, 4.0)
        assert runsettings.from_flags(sweep_args)["warm_grace_s"] == 5.0
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
    # A bad value of the flag is a usage error naming the flag, the value and what is allowed.
    bad = subprocess.run([sys.executable, "-c", script.replace('"--warm-grace", "5"', '"--warm-grace", "-1"')],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert bad.returncode == 2 and "warm-grace" in bad.stderr and "-1" in bad.stderr, bad.stderr[-3000:]
