"""Compiling ahead (the process executor's ``overlap``) and the sweep's heartbeat lines
(issue 20 item 3, issue 25 item 2). Real child processes, real XLA compiles of tiny models."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from paradnn import progress
from paradnn.errors import ParadnnError, SpecError
from paradnn.grids import grid
from paradnn.record import Record
from paradnn.sweeper import sweep

from helpers import SMALL_FILE, TINY, child_env


def mixed_grid():
    """Two tiny FC configs, a tiny residual CNN and an FC whose weights alone exceed the
    4 MB limit the tests use (predicted oom, never compiled)."""
    return (grid("fc", layers=1, nodes=[16, 32], input=16, output=4, batch=4)
            + grid("cnn", block="residual", blocks=1, filters=4, image=32, output=10, batch=2)
            + grid("fc", layers=2, nodes=4096, input=4096, output=10, batch=8))


def outcome(df) -> dict[str, str]:
    return dict(zip(df["workload_key"], df["status"]))


@pytest.mark.slow
def test_overlap_forced_on_a_cpu_gives_the_configs_and_statuses_of_a_sequential_sweep(tmp_path):
    """Same configs, same statuses; the configs after the first were compiled ahead, and on
    these shared cores their prepare worker was stopped during every timed call."""
    kw = dict(settings=TINY, memory_limit_bytes="4MB", progress=False, timeout_s=300)
    seq = sweep(mixed_grid(), store=tmp_path / "seq.db", cache_dir=tmp_path / "c1", overlap=0, **kw)
    ovl = sweep(mixed_grid(), store=tmp_path / "ovl.db", cache_dir=tmp_path / "c2", overlap=1, **kw)
    assert len(seq) == len(ovl) == 4
    assert outcome(seq) == outcome(ovl)
    assert sorted(outcome(ovl).values()) == ["ok", "ok", "ok", "oom"]
    assert (seq["overlap_workers"] == 0).all() and not seq["prepared_ahead"].any()
    assert (ovl["overlap_workers"] == 1).all()
    ok = ovl[ovl["status"] == "ok"]
    # The first config is measured before any worker could compile it; the CNN and the second
    # FC are compiled ahead, so their measurement loads the compiled program from the cache.
    assert ok["prepared_ahead"].sum() >= 2, ok[["nodes", "prepared_ahead"]]
    ahead = ok[ok["prepared_ahead"].astype(bool)]
    assert set(ahead["compile_source"]) == {"paradnn program cache"}, ahead[["nodes", "compile_source"]]
    # Loading is a fraction of a fresh compile (about 10x): summed, so one load delayed on the
    # shared cores (the prepare worker compiles beside it) does not decide it.
    fresh = seq.set_index("workload_key").loc[ahead["workload_key"], "phase_compile_s"]
    assert ahead["phase_compile_s"].sum() < fresh.sum(), (ahead["phase_compile_s"], fresh)
    assert ok["preparers_stopped"].astype(bool).all()


def kill_prepare_workers() -> int:
    """SIGKILL every prepare worker of this process (found in /proc); returns how many."""
    killed = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmd = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"paradnn.executors.child" in cmd and b"prepare" in cmd:
            os.kill(int(stat.parent.name), signal.SIGKILL)
            killed += 1
    return killed


class KillOnCompileAhead(io.StringIO):
    """A progress stream that kills the prepare worker the first time a heartbeat says the
    sweep waits for it."""

    killed = 0

    def write(self, text: str) -> int:
        if not self.killed and "compiling ahead" in text:
            self.killed = kill_prepare_workers()
        return super().write(text)


def first_at_once(workload, settings, memory_limit_bytes):
    """layers 1: an ok record at once, so that the sweep waits for the prepare worker that has
    only just started on the second config (its start and compile take seconds, the heartbeat
    0.05 s); with a real first measurement a fast prepare worker could finish first and the
    wait would never come. Other configs: the real measurement."""
    from paradnn.runner import context, run_workload

    if workload.spec.layers == 1:
        platform, software = context(workload.framework)
        return Record(status="ok", workload=workload.to_dict(), platform=platform, software=software,
                      settings=settings.to_dict(), metrics={"examples_per_sec": 1.0})
    return run_workload(workload, settings, memory_limit_bytes)


@pytest.mark.slow
def test_a_prepare_worker_killed_mid_sweep_costs_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "EVERY_S", 0.05)
    stream = KillOnCompileAhead()
    g = grid("fc", layers=[1, 2], nodes=16, input=16, output=4, batch=4)
    df = sweep(g, store=tmp_path / "r.db", cache_dir=tmp_path / "c", settings=TINY, progress=stream,
               timeout_s=300, overlap=1, run_fn=first_at_once)
    assert stream.killed == 1, stream.getvalue()
    assert list(df["status"]) == ["ok", "ok"], df["error"].tolist()
    # The killed worker's config was compiled by the measuring worker itself: nothing recorded
    # of the kill, and the record says it was not prepared ahead.
    second = df[df["layers"] == 2].iloc[0]
    assert not second["prepared_ahead"] and second["phase_compile_s"] > 0


def crash_in_timing_then_check(workload, settings, memory_limit_bytes):
    """nodes 9: enters the timing phase (the parent stops the prepare workers) and dies there.
    nodes 10: an error record if any prepare worker of the sweep is stopped now."""
    from paradnn.runner import context

    nodes = workload.spec.nodes
    if nodes == 9:
        progress.phase(progress.TIMING)
        os.kill(os.getpid(), signal.SIGKILL)
    stopped = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmd = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getppid() and b"prepare" in cmd and fields[0] in ("T", "t"):
            stopped.append(stat.parent.name)
    if stopped:
        raise RuntimeError(f"prepare workers still stopped: {stopped}")
    platform, software = context(workload.framework)
    return Record(status="ok", workload=workload.to_dict(), platform=platform, software=software,
                  settings=settings.to_dict(), metrics={"examples_per_sec": 1.0})


@pytest.mark.slow
def test_stopped_prepare_workers_are_resumed_after_the_measuring_worker_crashes(tmp_path):
    g = grid("fc", layers=1, nodes=[8, 9, 10], input=8, output=2, batch=4)
    df = sweep(g, store=tmp_path / "r.db", cache_dir=tmp_path / "c", settings=TINY, progress=False,
               timeout_s=300, overlap=1, run_fn=crash_in_timing_then_check)
    by = {r["nodes"]: r for r in df.to_dict("records")}
    assert by[8]["status"] == "ok"
    assert by[9]["status"] == "crashed" and by[9]["child_signal"] == "SIGKILL"
    assert by[9]["preparers_stopped"]  # the crash happened while they were stopped
    assert by[10]["status"] == "ok", by[10]["error"]  # ... and they run again


def slow_compile(workload, settings, memory_limit_bytes):
    import time

    from paradnn.runner import context

    progress.phase("compiling")
    time.sleep(0.6)
    platform, software = context(workload.framework)
    return Record(status="ok", workload=workload.to_dict(), platform=platform, software=software,
                  settings=settings.to_dict(), metrics={"examples_per_sec": 1.0})


@pytest.mark.slow
def test_a_config_longer_than_the_heartbeat_prints_its_phase(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "EVERY_S", 0.1)
    out = io.StringIO()
    g = grid("fc", layers=1, nodes=8, input=8, output=2, batch=4)
    sweep(g, store=tmp_path / "r.db", cache_dir=None, settings=TINY, progress=out, timeout_s=120,
          run_fn=slow_compile)
    lines = out.getvalue().splitlines()
    beats = [s for s in lines if re.fullmatch(r"paradnn sweep: fc layers=1 nodes=8 \S.*: compiling for "
                                              r"\S+ \(\S+ so far\)", s)]
    assert beats, out.getvalue()
    # The progress line's own history is unchanged: one line per started and finished config.
    assert sum("running fc" in s for s in lines) == 1


def test_overlap_is_checked_where_it_is_given(tmp_path):
    g = grid("fc", layers=1, nodes=8, input=8, output=2, batch=4)
    cores = os.cpu_count()
    for bad in (-1, cores + 1, "many", 1.5, True):
        with pytest.raises(SpecError, match=r"invalid overlap=.*auto or an integer from 0 to"):
            sweep(g, store=tmp_path / "r.db", overlap=bad, progress=False)
    with pytest.raises(SpecError, match="executor='process'"):
        sweep(g, store=tmp_path / "r.db", executor="inprocess", overlap=1, progress=False)
    path = tmp_path / "s.yaml"
    path.write_text("family: fc\nlayers: 1\nnodes: 8\ninput: 8\noutput: 2\nbatch: 4\nrun: {overlap: -1}\n")
    with pytest.raises(ParadnnError, match=r"run\.overlap.*-1 is not auto or an integer"):
        sweep(str(path), store=tmp_path / "r.db", progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("value", ["x", "-1", "999"])
def test_bad_overlap_flag_is_one_line_exit_2(tmp_path, value):
    path = tmp_path / "s.yaml"
    path.write_text(SMALL_FILE)
    proc = subprocess.run([sys.executable, "-m", "paradnn", "sweep", str(path), "--overlap", value],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120, env=child_env())
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("paradnn: error: "), proc.stderr
    assert "overlap" in lines[0] and repr(value) in lines[0] and "auto or an integer from 0 to" in lines[0]
    assert proc.stdout == ""


def test_a_heartbeat_on_a_terminal_is_its_own_line_and_the_bar_is_drawn_again():
    from paradnn.sweeper import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    bar = Progress(2, 0, out)
    bar.begin(grid("fc", layers=1, nodes=8, input=8, output=2, batch=4)[0])
    bar.note("paradnn sweep: fc: compiling for 5s (5s so far)")
    text = out.getvalue()
    _, found, tail = text.partition("\rparadnn sweep: fc: compiling for 5s (5s so far)")
    assert found and "\n" in tail, text
    padding, _, redrawn = tail.partition("\n")
    # The heartbeat covers the old bar (padded), ends its line, and the bar is drawn below it.
    assert padding.strip() == "" and redrawn.startswith("\r[") and "running fc" in redrawn, text
