"""The Ray executor on a real local cluster: a head and a worker node on loopback.

Ray 2.60 (the version this was written against) starts clusters without token authentication
unless ``RAY_AUTH_MODE=token`` is set, so the nodes here join without a token. The nodes are
started with ``ray start --block`` in their own process groups and stopped by signalling those
groups, so the test never touches other Ray processes on the machine (``ray stop`` would).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'ray[default]>=2.40')")

from helpers import TINY, child_env  # noqa: E402
from paradnn.grids import grid  # noqa: E402
from paradnn.record import Record  # noqa: E402
from paradnn.store import load  # noqa: E402
from paradnn.sweeper import sweep  # noqa: E402

RAY_BIN = str(Path(sys.executable).parent / "ray")


def tagged_ok(workload, settings, memory_limit_bytes):
    """A stand-in measurement that says which Ray node ran it (its environment says)."""
    from paradnn.runner import context

    time.sleep(0.3)
    platform, software = context(workload.framework)  # what the runner records
    return Record(status="ok", workload=workload.to_dict(), platform=platform,
                  software=software, settings=settings.to_dict(),
                  metrics={"params": 1, "test_node": os.environ.get("PARADNN_TEST_NODE")})


def faulty(workload, settings, memory_limit_bytes):
    """nodes 40 hangs, 48 segfaults its child, 56 kills the Ray worker that runs the task."""
    nodes = workload.spec.nodes
    if nodes == 40:
        time.sleep(3600)
    if nodes == 48:
        os.kill(os.getpid(), signal.SIGSEGV)
    if nodes == 56:
        os.kill(os.getppid(), signal.SIGKILL)  # the Ray worker process: Ray loses the task
        time.sleep(60)
    return tagged_ok(workload, settings, memory_limit_bytes)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(args: list[str], name: str, temp_dir: str) -> subprocess.Popen:
    # The node's workers unpickle run_fns of this module: tests/ on their PYTHONPATH.
    env = child_env(PARADNN_TEST_NODE=name, RAY_USAGE_STATS_ENABLED="0")
    log = open(Path(temp_dir) / f"{name}.log", "w")
    return subprocess.Popen([RAY_BIN, "start", "--block", "--node-ip-address=127.0.0.1",
                             "--num-cpus=1", "--disable-usage-stats", *args],
                            env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop_node(proc: subprocess.Popen) -> None:
    for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
    # ray start --block exits before all of its daemons: kill what is left of its group.
    time.sleep(1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def cluster():
    temp_dir = tempfile.mkdtemp(prefix="pdray", dir="/tmp")  # short: Ray's socket paths
    port = free_port()
    address = f"127.0.0.1:{port}"
    nodes = [start_node(["--head", f"--port={port}", "--include-dashboard=false",
                         f"--temp-dir={temp_dir}"], "head", temp_dir)]
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or nodes[0].poll() is not None:
                    raise RuntimeError("Ray head did not start: "
                                       + (Path(temp_dir) / "head.log").read_text()[-2000:])
                time.sleep(0.5)
        nodes.append(start_node([f"--address={address}"], "worker", temp_dir))
        ray.init(address=address, logging_level="WARNING")
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            if time.monotonic() > deadline or nodes[1].poll() is not None:
                raise RuntimeError("Ray worker did not join: "
                                   + (Path(temp_dir) / "worker.log").read_text()[-2000:])
            time.sleep(0.5)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for proc in reversed(nodes):
            stop_node(proc)
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_ray_sweep_streams_records_from_both_nodes(cluster, tmp_path):
    db = tmp_path / "r.db"
    g = grid("fc", layers=2, nodes=list(range(32, 36)), input=64, output=10, batch=8)
    df = sweep(g, store=db, executor="ray", address=cluster, settings=TINY, run_fn=tagged_ok,
               cache_dir=None, progress=False, timeout_s=120)
    assert len(df) == 4 and set(df["status"]) == {"ok"}
    assert set(df["test_node"]) == {"head", "worker"}  # both nodes took tasks
    # resume: nothing runs again
    assert len(sweep(g, store=db, executor="ray", address=cluster, settings=TINY,
                     run_fn=tagged_ok, cache_dir=None, progress=False)) == 4
    assert len(load(db)) == 4


def test_ray_failures_are_recorded(cluster, tmp_path):
    db = tmp_path / "r.db"
    g = grid("fc", layers=2, nodes=[32, 40, 48, 56], input=64, output=10, batch=8)
    df = sweep(g, store=db, executor="ray", address=cluster, settings=TINY, run_fn=faulty,
               cache_dir=None, progress=False, timeout_s=8)
    status = dict(zip(df["nodes"], df["status"]))
    # 56 killed its Ray worker: a lost worker is an infrastructure fault, never stored as the
    # config's result; its claim is released so the next run of the sweep retries it.
    assert status == {32: "ok", 40: "timeout", 48: "crashed"}
    errors = dict(zip(df["nodes"], df["error"]))
    assert "SIGSEGV" in errors[48]
    assert len(load(db)) == 3
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0


def test_ray_real_runner(cluster, tmp_path):
    """One real measurement on a worker, with the compilation cache on that worker."""
    db, cache = tmp_path / "r.db", tmp_path / "xla"
    g = grid("fc", layers=2, nodes=32, input=64, output=10, batch=8)
    df = sweep(g, store=db, executor="ray", address=cluster, settings=TINY, cache_dir=cache,
               progress=False, timeout_s=300)
    row = df.iloc[0]
    assert row["status"] == "ok", row["error"]
    assert row["examples_per_sec"] > 0
    assert any(cache.rglob("*"))
    json.dumps(row.to_dict(), default=str)  # a plain row
