"""Sweep benchmarks (issue 3): run overhead and the warm compilation cache.

    PYTHONPATH=. python benchmarks/bench_sweep.py [--sweep sweeps/smoke.yaml]

1. Overhead: wall time of ``paradnn.sweep`` (process executor, empty compilation cache, new
   store) over the sum of the wall times of in-process ``paradnn.run`` calls of the same configs
   in a fresh interpreter without a compilation cache. Target: at most 1.25x.
2. Warm cache: the same sweep into another new store with the now warm cache directory.
   Target: at least 3x faster than the cold sweep.

Prints one JSON object; times in seconds, measured with time.perf_counter on this host.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BASELINE = """
import json, sys, time
t0 = time.perf_counter()
from paradnn.grids import load_sweep_file
from paradnn.measure import MeasureSettings
from paradnn.runner import run_workload
plan = load_sweep_file(sys.argv[1])
settings = MeasureSettings(**plan.settings)
import_s = time.perf_counter() - t0
times, statuses = [], []
for w in plan.workloads:
    t = time.perf_counter()
    statuses.append(run_workload(w, settings).status)
    times.append(time.perf_counter() - t)
print(json.dumps({"import_s": import_s, "run_s": times, "statuses": statuses}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sweep", default=str(ROOT / "sweeps" / "smoke.yaml"))
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", BASELINE, args.sweep], env=env, check=True,
                         capture_output=True, text=True).stdout
    base = json.loads(out.strip().splitlines()[-1])

    from paradnn.sweeper import sweep

    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "xla"
        t = time.perf_counter()
        cold_df = sweep(args.sweep, store=Path(tmp) / "cold.db", cache_dir=cache, progress=False)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        warm_df = sweep(args.sweep, store=Path(tmp) / "warm.db", cache_dir=cache, progress=False)
        warm = time.perf_counter() - t
    result = {
        "sweep_file": args.sweep,
        "configs": len(base["run_s"]),
        "inprocess_run_sum_s": round(sum(base["run_s"]), 3),
        "inprocess_import_s": round(base["import_s"], 3),
        "sweep_cold_s": round(cold, 3),
        "overhead_ratio": round(cold / sum(base["run_s"]), 3),
        "sweep_warm_s": round(warm, 3),
        "warm_speedup": round(cold / warm, 3),
        "cold_compile_s_sum": round(float(cold_df["compile_s"].sum()), 3),
        "warm_compile_s_sum": round(float(warm_df["compile_s"].sum()), 3),
        "statuses": sorted(set(base["statuses"]) | set(cold_df["status"])),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
