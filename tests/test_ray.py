"""The Ray executor on a real local cluster on loopback: a head and worker nodes, no mocks.

The module's cluster: a head (label ``pool=head``, one JAX CPU device) and a worker (``pool=w1``,
two JAX CPU devices through ``XLA_FLAGS``), so it is a mixed cluster: the two nodes' records
carry different platforms and keys. Tests that kill or add nodes start their own extra nodes
on it. The head checks node health every second, so a killed node is declared dead within
seconds (Ray's default takes tens of seconds).

Ray 2.60 (the version this was written against) starts clusters without token authentication
unless ``RAY_AUTH_MODE=token`` is set or a token file exists, so the nodes here are started with
``RAY_AUTH_MODE=disabled`` and join without a token. The nodes are
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
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'ray[default]>=2.40')")

from helpers import TINY, child_env  # noqa: E402
from paradnn.errors import SpecError  # noqa: E402
from paradnn.grids import grid  # noqa: E402
from paradnn.record import Record  # noqa: E402
from paradnn.store import load  # noqa: E402
from paradnn.sweeper import sweep  # noqa: E402

RAY_BIN = str(Path(sys.executable).parent / "ray")

#: The head's health checks: a node that stops answering is dead after about 3 s (6 missed
#: checks: a raylet starved of CPU for a second on a loaded 2-core host is not declared dead).
FAST_HEALTH = {"RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "500",
               "RAY_health_check_failure_threshold": "6", "RAY_health_check_initial_delay_ms": "0"}


def tagged_ok(workload, settings, memory_limit_bytes, sleep_s=0.3):
    """A stand-in measurement that says which Ray node ran it (its environment says), and
    leaves a mark in $PARADNN_TEST_MARKS when it starts."""
    from paradnn.runner import context

    node = os.environ.get("PARADNN_TEST_NODE")
    marks = os.environ.get("PARADNN_TEST_MARKS")
    if marks:
        Path(marks, f"{workload.spec.nodes}-{node}-{os.getpid()}").touch()
    time.sleep(sleep_s)
    platform, software = context(workload.framework)  # what the runner records
    return Record(status="ok", workload=workload.to_dict(), platform=platform,
                  software=software, settings=settings.to_dict(),
                  metrics={"params": 1, "test_node": node})


def slow_ok(workload, settings, memory_limit_bytes):
    """tagged_ok that takes 2 s: long enough to kill its node while it runs."""
    return tagged_ok(workload, settings, memory_limit_bytes, sleep_s=2.0)


def gated_ok(workload, settings, memory_limit_bytes):
    """slow_ok that first waits (120 s at most) while the file ``hold`` exists in
    $PARADNN_TEST_MARKS: a test holds the nodes there until a node it adds has joined, so that
    node finds configs left however slowly it starts."""
    marks = os.environ.get("PARADNN_TEST_MARKS")
    deadline = time.monotonic() + 120
    while marks and Path(marks, "hold").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return slow_ok(workload, settings, memory_limit_bytes)


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


def start_node(args: list[str], name: str, temp_dir: str, **env: str) -> subprocess.Popen:
    # The node's workers unpickle run_fns of this module: tests/ on their PYTHONPATH.
    # RAY_AUTH_MODE disabled, as the driver's default: a token left in ~/.ray/auth_token by an
    # earlier local `ray.init()` (Ray 2.60 makes one) would otherwise turn on token
    # authentication in these nodes, and the driver could not connect.
    env = child_env(PARADNN_TEST_NODE=name, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled",
                    PARADNN_TEST_MARKS=str(Path(temp_dir) / "marks"), **env)
    log = open(Path(temp_dir) / f"{name}.log", "w")  # noqa: SIM115 - the node's, for its life
    return subprocess.Popen([RAY_BIN, "start", "--block", "--node-ip-address=127.0.0.1",
                             "--num-cpus=1", "--disable-usage-stats", f"--labels=pool={name}",
                             *args],
                            env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop_node(proc: subprocess.Popen, first: int = signal.SIGTERM) -> None:
    for sig, wait_s in ((first, 5), (signal.SIGKILL, 10)):
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


def kill_node(proc: subprocess.Popen) -> None:
    """SIGKILL a node as a power cut would: its `ray start` process and every descendant (the
    raylet, and the workers, which leave the node's process group, with their measuring
    children) at once."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    doomed, todo = [], [proc.pid]
    while todo:
        pid = todo.pop()
        doomed.append(pid)
        todo += children.get(pid, [])
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    stop_node(proc, signal.SIGKILL)


def node_id(pool: str) -> str | None:
    """The id of the alive node labelled ``pool``."""
    for n in ray.nodes():
        if n["Alive"] and (n.get("Labels") or {}).get("pool") == pool:
            return n["NodeID"]
    return None


def wait_for(what: str, check, timeout_s: float = 90, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline or proc is not None and proc.poll() is not None:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


class Cluster:
    """The module's cluster: its address, its temp folder, and a way to add nodes to it."""

    def __init__(self, address: str, temp_dir: str):
        self.address, self.temp_dir = address, temp_dir
        self.nodes: list[subprocess.Popen] = []

    @property
    def marks(self) -> Path:
        return Path(self.temp_dir) / "marks"

    def add(self, name: str, wait: bool = True, **env: str) -> subprocess.Popen:
        proc = start_node([f"--address={self.address}"], name, self.temp_dir, **env)
        self.nodes.append(proc)
        if wait:
            wait_for(f"node {name} to join", lambda: node_id(name), proc=proc)
        return proc

    def busy(self, pool: str) -> bool:
        """Whether the node labelled ``pool`` runs a task now (its one CPU is taken)."""
        nid = node_id(pool)
        free = ray._private.state.available_resources_per_node().get(nid, {})
        return nid is not None and free.get("CPU", 0) < 1


@pytest.fixture(scope="module")
def cluster():
    temp_dir = tempfile.mkdtemp(prefix="pdray", dir="/tmp")  # short: Ray's socket paths
    (Path(temp_dir) / "marks").mkdir()
    port = free_port()
    address = f"127.0.0.1:{port}"
    c = Cluster(address, temp_dir)
    c.nodes.append(start_node(["--head", f"--port={port}", "--include-dashboard=false",
                               f"--temp-dir={temp_dir}"], "head", temp_dir, **FAST_HEALTH))
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or c.nodes[0].poll() is not None:
                    raise RuntimeError("Ray head did not start: "
                                       + (Path(temp_dir) / "head.log").read_text()[-2000:])
                time.sleep(0.5)
        ray.init(address=address, logging_level="WARNING")
        # Two JAX CPU devices on w1: another platform (device_count 2) than the head's.
        c.add("w1", XLA_FLAGS="--xla_force_host_platform_device_count=2")
        wait_for("the head to register", lambda: node_id("head"))
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for proc in reversed(c.nodes):
            stop_node(proc)
        shutil.rmtree(temp_dir, ignore_errors=True)


def fc_grid(nodes):
    return grid("fc", layers=2, nodes=list(nodes), input=64, output=10, batch=8)


def test_mixed_nodes_rows_carry_their_node_platform_and_resume_per_platform(cluster, tmp_path):
    db = tmp_path / "r.db"
    g = fc_grid(range(32, 36))
    df = sweep(g, store=db, executor="ray", address=cluster.address, settings=TINY,
               run_fn=tagged_ok, cache_dir=None, progress=False, timeout_s=120)
    assert len(df) == 4 and set(df["status"]) == {"ok"}
    assert set(df["test_node"]) == {"head", "w1"}  # both nodes took tasks
    # each row's platform is its own node's: the head sees 1 JAX device, w1 sees 2
    assert {n: {1: "head", 2: "w1"}[c] for n, c in zip(df["test_node"], df["device_count"])} == \
        {"head": "head", "w1": "w1"}
    assert df["key"].nunique() == 4 and df.attrs["missing"] == []
    # resume: nothing runs again, though the rows have two platforms' keys
    again = sweep(g, store=db, executor="ray", address=cluster.address, settings=TINY,
                  run_fn=tagged_ok, cache_dir=None, progress=False)
    assert len(again) == 4 and again.attrs["written"] == []
    # pinned to the head's platform (a label selector): exactly the configs w1 measured run again
    on_w1 = set(df.loc[df["test_node"] == "w1", "nodes"])
    head = sweep(g, store=db, executor="ray", address=cluster.address, settings=TINY,
                 run_fn=tagged_ok, cache_dir=None, progress=False,
                 resources={"num_cpus": 1, "label_selector": {"pool": "head"}})
    fresh = head[head["key"].isin({k for k, _ in head.attrs["written"]})]
    assert set(fresh["nodes"]) == on_w1 and set(fresh["test_node"]) == {"head"}
    assert len(load(db)) == 4 + len(on_w1)


def test_bad_resources_name_the_parameter(cluster, tmp_path):
    with pytest.raises(SpecError, match="resources"):
        sweep(fc_grid([32]), store=tmp_path / "r.db", executor="ray", address=cluster.address,
              settings=TINY, run_fn=tagged_ok, cache_dir=None, progress=False,
              resources={"num_cpus": -1})


def test_ray_failures_are_recorded(cluster, tmp_path):
    db = tmp_path / "r.db"
    g = fc_grid([32, 40, 48, 56])
    df = sweep(g, store=db, executor="ray", address=cluster.address, settings=TINY,
               run_fn=faulty, cache_dir=None, progress=False, timeout_s=8)
    status = dict(zip(df["nodes"], df["status"]))
    # 56 kills its Ray worker on every attempt: a lost worker is an infrastructure fault, never
    # stored as the config's result; after MAX_ATTEMPTS the config is named missing.
    assert status == {32: "ok", 40: "timeout", 48: "crashed"}
    errors = dict(zip(df["nodes"], df["error"]))
    assert "SIGSEGV" in errors[48]
    assert len(df.attrs["missing"]) == 1 and "nodes=56" in df.attrs["missing"][0][0]
    assert "3 time(s)" in df.attrs["missing"][0][2]
    assert len(load(db)) == 3
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0


@pytest.mark.slow
def test_node_killed_and_node_added_mid_sweep(cluster, tmp_path):
    """A node SIGKILLed while it measures: its config runs again elsewhere; a node that joins
    mid-sweep takes configs; every config is stored exactly once, none missing.

    From the kill until the new node has joined, the other nodes hold the configs they start
    (``gated_ok``): otherwise they could drain the queue before a node that starts slowly on a
    loaded host registers, and whether it took configs would be a race."""
    victim = cluster.add("victim")
    db = tmp_path / "r.db"
    g = fc_grid(range(32, 46))
    out: dict = {}

    def run():
        try:
            out["df"] = sweep(g, store=db, executor="ray", address=cluster.address,
                              settings=TINY, run_fn=gated_ok, cache_dir=None, progress=False,
                              timeout_s=120)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()

    def measuring() -> set[int]:
        """Configs the victim started and that have no row yet: it measures them now."""
        started = {int(p.name.split("-")[0]) for p in cluster.marks.glob("*-victim-*")}
        return started - (set(load(db)["nodes"]) if started and db.exists() else set())

    wait_for("the victim node to measure a config", measuring, timeout_s=120)
    hold = cluster.marks / "hold"
    hold.touch()
    try:
        kill_node(victim)
        killed_at = time.monotonic()
        cluster.add("late")  # waits until it has joined
    finally:
        hold.unlink()
    thread.join(timeout=180)
    assert not thread.is_alive() and "error" not in out, out.get("error")
    df = out["df"]
    assert df.attrs["missing"] == []
    assert sorted(df["nodes"]) == list(range(32, 46))  # each config once
    assert set(df["status"]) == {"ok"} and len(load(db)) == 14
    started_on_victim = {int(p.name.split("-")[0]) for p in cluster.marks.glob("*-victim-*")}
    stored_by_victim = set(df.loc[df["test_node"] == "victim", "nodes"])
    lost = started_on_victim - stored_by_victim
    assert lost, "the victim was killed while it measured a config"
    assert set(df.loc[df["nodes"].isin(lost), "test_node"]) <= {"head", "w1", "late"}
    assert "late" in set(df["test_node"]), "the node added mid-sweep took configs"
    assert time.monotonic() - killed_at < 120


@pytest.mark.slow
def test_driver_killed_then_resumed(cluster, tmp_path):
    db = tmp_path / "r.db"
    code = ("import test_ray, paradnn\n"
            "from helpers import TINY\n"
            f"paradnn.sweep(test_ray.fc_grid(range(32, 38)), store={str(db)!r}, executor='ray', "
            f"address={cluster.address!r}, settings=TINY, run_fn=test_ray.slow_ok, "
            "cache_dir=None, progress=False, timeout_s=120)\n")
    driver = subprocess.Popen([sys.executable, "-c", code], env=child_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def rows() -> int:
        try:
            with sqlite3.connect(db) as con:
                return con.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        except sqlite3.Error:
            return 0

    try:
        wait_for("the driver's first row", rows, timeout_s=120, proc=driver)
    finally:
        driver.kill()
        driver.wait()
    before = rows()
    assert 1 <= before < 6
    df = sweep(fc_grid(range(32, 38)), store=db, executor="ray", address=cluster.address,
               settings=TINY, run_fn=slow_ok, cache_dir=None, progress=False, timeout_s=120)
    assert sorted(df["nodes"]) == list(range(32, 38)) and df.attrs["missing"] == []
    assert len(df.attrs["written"]) == 6 - before  # resume measured exactly what was missing
    assert len(load(db)) == 6


def test_unreachable_head_is_one_line_exit_2(tmp_path):
    sweep_yaml = tmp_path / "s.yaml"
    sweep_yaml.write_text("family: fc\nfixed: {layers: 2, input: 64, output: 10, batch: 8}\n"
                          "axes: {nodes: [32]}\n")
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    proc = subprocess.run([sys.executable, "-m", "paradnn", "sweep", str(sweep_yaml), "--store",
                           str(tmp_path / "r.db"), "--executor", "ray", "--address", address,
                           "--quiet"], check=False, capture_output=True, text=True, env=child_env(), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and address in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r.db").exists()


@pytest.mark.slow
def test_cli_names_missing_configs_exit_1_then_measures_them(cluster, tmp_path):
    """Real measurements through `paradnn sweep`: a config pinned (a label selector) to a node
    that is killed while it measures it is named missing, exit 1, nothing stored; the same
    config on the other nodes is then measured, with the compilation cache on the workers."""
    cluster.add("v2")
    body = ("family: fc\nfixed: {layers: 2, input: 64, output: 10, batch: 8}\n"
            "axes: {nodes: [32]}\n"
            "settings: {steps_per_call: 2, warmup_calls: 1, warmup_s: 0, min_calls: 6, "
            "max_calls: 6, ci_target: 0.5, time_budget_s: 0.2}\n")
    pinned, free = tmp_path / "pinned.yaml", tmp_path / "free.yaml"
    pinned.write_text(body + "run: {resources: {num_cpus: 1, label_selector: {pool: v2}}}\n")
    free.write_text(body)
    db, cache = tmp_path / "r.db", tmp_path / "xla"
    args = ["--store", str(db), "--executor", "ray", "--address", cluster.address,
            "--cache-dir", str(cache), "--timeout", "300"]
    proc = subprocess.Popen([sys.executable, "-m", "paradnn", "sweep", str(pinned), *args],
                            env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(iter(proc.stderr.readline, "")))
    reader.start()
    try:
        # After the probe (which also runs on v2), once v2 measures a config: kill it.
        wait_for("the pinned sweep to start measuring on v2",
                 lambda: any("to measure" in line for line in err) and cluster.busy("v2"),
                 timeout_s=180, proc=proc)
        kill_node(cluster.nodes[-1])
        proc.wait(timeout=120)
    finally:
        proc.kill()
        reader.join()
    text = "".join(err)
    assert proc.returncode == 1, text
    assert "1 config(s) missing" in text and "nodes=32" in text
    assert "1/1" in text and "missing 1" in text  # the progress total kept it
    assert len(load(db)) == 0
    done = subprocess.run([sys.executable, "-m", "paradnn", "sweep", str(free), *args, "--quiet"],
                          check=False, env=child_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    df = load(db)
    assert list(df["nodes"]) == [32] and set(df["status"]) == {"ok"}
    assert (df["examples_per_sec"] > 0).all()
    assert any(cache.rglob("*"))
    json.dumps(df.iloc[0].to_dict(), default=str)  # a plain row


def test_placement_rules_follow_ray_resources_and_labels():
    from paradnn.executors.ray import node_fits

    node = {"Resources": {"CPU": 4.0, "GPU": 1.0}, "Labels": {"platform": "a100"}}
    assert node_fits(node, {"num_gpus": 1, "label_selector": {"platform": "a100"}})
    assert not node_fits(node, {"num_gpus": 2})
    assert not node_fits(node, {"num_cpus": 8})
    assert not node_fits(node, {"resources": {"TPU": 4}})
    assert not node_fits(node, {"label_selector": {"platform": "!a100"}})
    assert node_fits(node, {"label_selector": {"platform": "in(h100,a100)"}})
    assert not node_fits(node, {"label_selector": {"platform": "!in(h100,a100)"}})
    assert node_fits(node, {"label_selector": {"zone": "!east"}})  # an absent label is not east


def test_progress_keeps_a_missing_config_in_its_total():
    import io

    from paradnn.sweeper import Progress

    bar = Progress(3, 0, io.StringIO())
    bar.miss()
    assert bar.total == 3 and "1/3" in bar.line() and "missing 1" in bar.line()
