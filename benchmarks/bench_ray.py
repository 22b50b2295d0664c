"""Ray sweep throughput against the number of nodes (issue 38), on a loopback cluster.

    PYTHONPATH=. python benchmarks/bench_ray.py --nodes 3 --configs 24 --seconds 1 --rounds 2

Starts one Ray cluster on 127.0.0.1 (a head and ``--nodes - 1`` workers, one CPU each, each
labelled ``pool=nI``) and sweeps ``--configs`` FC configs into a fresh store per run with
``executor="ray"``, once per node count n = 1 .. ``--nodes``, in an order that alternates between
rounds (1, 2, 3, then 3, 2, 1, ...) so that the host's load drift hits every count alike. The
count is chosen with the sweep's ``label_selector`` (``pool in (n0, ..., n{n-1})``), so every run
uses the same cluster.

Each config's measurement is a stand-in that sleeps ``--seconds`` in its node's child process
(and records that node's real platform): a loopback host has too few cores for n real
measurements to run side by side, so what is measured is what the sweep itself adds per node:
scheduling, the result's trip back, and the driver's store write, one committed row per
config. The ideal execution time is ``configs * seconds / n``.

Printed: one JSON object with, per node count, every run's wall time (s, around
``paradnn.sweep``), its set-up (workers started and every eligible node's platform probed, s;
``attrs["timing"]["setup_s"]``), its execution (wall minus set-up), the driver's store writes
(s in all and ms per row) and the medians; and the ratios ``wall(1) / wall(n)`` and
``execution(1) / execution(n)``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RAY_BIN = str(Path(sys.executable).parent / "ray")


def sleeping_ok(workload, settings, memory_limit_bytes, seconds: float = 1.0):
    """A stand-in measurement: ``seconds`` of sleep on the node, an ok record with the node's
    platform (what the runner records there)."""
    from paradnn.record import Record
    from paradnn.runner import context

    time.sleep(seconds)
    platform, software = context(workload.framework)
    return Record(status="ok", workload=workload.to_dict(), platform=platform,
                  software=software, settings=settings.to_dict(), metrics={"params": 1})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], name: str, temp_dir: str) -> subprocess.Popen:
    # The stand-in is unpickled by module name in each node's child processes: benchmarks/ too.
    path = os.pathsep.join([str(ROOT), str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "RAY_USAGE_STATS_ENABLED": "0"}
    log = open(Path(temp_dir) / f"{name}.log", "w")  # noqa: SIM115 - the node's, for its life
    return subprocess.Popen([RAY_BIN, "start", "--block", "--node-ip-address=127.0.0.1",
                             "--num-cpus=1", "--disable-usage-stats", f"--labels=pool={name}",
                             *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    # Each node is its own process group (start_new_session): nothing else on the host is hit.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass


def start_cluster(nodes: int, temp_dir: str, procs: list[subprocess.Popen]) -> str:
    """A head and ``nodes - 1`` workers on loopback, labelled ``pool=n0`` .. ``pool=n{nodes-1}``,
    their processes appended to ``procs`` (for the caller to stop, whatever happens); returns
    the address once all have joined (this process is connected to it)."""
    import ray

    port = _free_port()
    address = f"127.0.0.1:{port}"
    procs.append(_start(["--head", f"--port={port}", "--include-dashboard=false",
                         f"--temp-dir={temp_dir}"], "n0", temp_dir))
    deadline = time.monotonic() + 180
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("the Ray head did not start") from None
            time.sleep(0.5)
    ray.init(address=address, logging_level="WARNING")
    # One at a time: nodes started together on one host race for the same ports.
    for i in range(1, nodes):
        procs.append(_start([f"--address={address}"], f"n{i}", temp_dir))
        while len([n for n in ray.nodes() if n["Alive"]]) < i + 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"Ray worker n{i} did not join")
            time.sleep(0.5)
    return address


def one_run(address: str, n: int, configs: int, seconds: float, folder: Path) -> dict:
    """One sweep of ``configs`` configs on the first ``n`` nodes into a fresh store."""
    import bench_ray  # by its module name, not __main__: the nodes' children import it so

    from paradnn.grids import grid
    from paradnn.measure import MeasureSettings
    from paradnn.sweeper import sweep

    g = grid("fc", layers=2, nodes=list(range(32, 32 + configs)), input=64, output=10, batch=8)
    pools = ", ".join(f"n{i}" for i in range(n))
    store = folder / f"r{n}-{time.monotonic_ns()}.db"
    t0 = time.perf_counter()
    df = sweep(g, store=store, executor="ray", address=address, settings=MeasureSettings(),
               run_fn=functools.partial(bench_ray.sleeping_ok, seconds=seconds), cache_dir=None,
               progress=False, timeout_s=600, retry_unstable_s=0,
               resources={"num_cpus": 1, "label_selector": {"pool": f"in({pools})"}})
    wall = time.perf_counter() - t0
    timing = df.attrs["timing"]
    if len(df) != configs or df.attrs["missing"]:
        raise RuntimeError(f"{n} node(s): {len(df)} rows of {configs}, missing {df.attrs['missing']}")
    return {"wall_s": wall, "setup_s": timing["setup_s"], "execution_s": wall - timing["setup_s"],
            "store_s": timing["store_s"], "store_ms_per_row": 1000 * timing["store_s"] / configs}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=3, help="largest node count (head included)")
    p.add_argument("--configs", type=int, default=24, help="configs per sweep")
    p.add_argument("--seconds", type=float, default=1.0, help="seconds of one stand-in measurement")
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import ray

    temp_dir = tempfile.mkdtemp(prefix="pdbray", dir="/tmp")  # short: Ray's socket paths
    procs: list[subprocess.Popen] = []
    runs: dict[int, list[dict]] = {n: [] for n in range(1, args.nodes + 1)}
    try:
        address = start_cluster(args.nodes, temp_dir, procs)
        one_run(address, args.nodes, args.nodes, 0.0, Path(temp_dir))  # warm every node's workers
        for r in range(args.rounds):
            order = list(runs) if r % 2 == 0 else list(reversed(runs))
            for n in order:
                runs[n].append(one_run(address, n, args.configs, args.seconds, Path(temp_dir)))
                print(f"round {r + 1}, {n} node(s): {runs[n][-1]}", file=sys.stderr)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(temp_dir, ignore_errors=True)
    median = {n: {k: statistics.median(run[k] for run in rs) for k in rs[0]} for n, rs in runs.items()}
    print(json.dumps({
        "configs": args.configs, "seconds_per_config": args.seconds, "rounds": args.rounds,
        "cpu_cores": os.cpu_count(), "runs": runs, "median": median,
        "ideal_execution_s": {n: args.configs * args.seconds / n for n in runs},
        "wall_ratio_1_over_n": {n: median[1]["wall_s"] / m["wall_s"] for n, m in median.items()},
        "execution_ratio_1_over_n": {n: median[1]["execution_s"] / m["execution_s"]
                                     for n, m in median.items()},
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
