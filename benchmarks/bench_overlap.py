"""Compiling ahead (issue 20 item 3): sequential against overlapped sweeps, cold.

    PYTHONPATH=. nice -n 10 python benchmarks/bench_overlap.py --rounds 2

A sweep file of 10 small configs (6 FC, 4 residual CNN, ``time_budget_s: 1``) is written to a
temporary folder and run as fresh ``python -m paradnn sweep FILE --overlap N`` processes, each
with an empty compilation cache folder and a new store (cold: every config compiles). Each
round runs four sweeps, their order alternating between rounds so that the host's load drift
hits every side alike:

* ``seq-pinned``: ``--overlap 0``, the measuring worker kept to core 0
  (``PARADNN_CPUS_MEASURE=0``);
* ``ovl-pinned``: ``--overlap 1``, the measuring worker on core 0 and the prepare worker on
  core 1 (``PARADNN_CPUS_PREPARE=1``): a host with more cores than the measuring worker uses,
  emulated on this 2-core one. Their cores differ, so the prepare worker is never stopped;
* ``seq``: ``--overlap 0`` on both cores;
* ``ovl-frozen``: ``--overlap 1`` on both cores: compiling shares the cores with the timing, so
  the prepare worker is stopped (SIGSTOP) during every warm-up and timed call.

Printed: one JSON object with every sweep's wall time (s, ``time.perf_counter`` around the
process), the median walls and the ratios sequential / overlapped per pair; from the sequential
pinned sweeps' records, the sum of the compile phases (trace, compile, init, costs, memory: the
work a prepare worker takes over) and of the timing phases (warm-up and timed calls) against the
overlapped wall; and per pair whether each config's step time agrees within the two records' 95%
confidence intervals of the median (``step_time_ci_low_s``, ``step_time_ci_high_s``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SWEEP = """\
# 10 small FC and CNN configs, time_budget_s 1 (bench_overlap.py)
parts:
  - family: fc
    fixed: {input: 64, output: 10, batch: 32}
    axes: {layers: [1, 4], nodes: [32, 128, 256]}
  - family: cnn
    fixed: {block: residual, blocks: 1, output: 10, batch: 2}
    axes: {filters: [4, 8], image: [32, 64]}
settings:
  time_budget_s: 1
"""

#: mode -> (--overlap, environment of the sweep process)
MODES = {
    "seq-pinned": (0, {"PARADNN_CPUS_MEASURE": "0"}),
    "ovl-pinned": (1, {"PARADNN_CPUS_MEASURE": "0", "PARADNN_CPUS_PREPARE": "1"}),
    "seq": (0, {}),
    "ovl-frozen": (1, {}),
}
PAIRS = (("seq-pinned", "ovl-pinned"), ("seq", "ovl-frozen"))
COMPILE_PHASES = ("trace", "compile", "init", "costs", "memory")
TIMING_PHASES = ("warmup", "timed")


def run_sweep(mode: str, sweep_file: Path, folder: Path) -> dict:
    """One cold sweep process of ``mode``: its wall time (s) and its store's rows."""
    from paradnn.store import load

    overlap, extra = MODES[mode]
    store, cache = folder / f"{mode}.db", folder / f"{mode}-cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARADNN_CPUS_")}
    env.update(extra, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "paradnn", "sweep", str(sweep_file), "--store",
                           str(store), "--cache-dir", str(cache), "--overlap", str(overlap), "--quiet"],
                          env=env, cwd=folder, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{mode} sweep failed ({done.returncode}):\n{done.stderr[-3000:]}")
    rows = load(store).to_dict("records")
    return {"wall_s": wall, "rows": rows}


def phase_sum(rows: list[dict], names: tuple[str, ...]) -> float:
    return sum(float(r.get(f"phase_{p}_s") or 0.0) for r in rows for p in names)


def agreement(a: list[dict], b: list[dict]) -> dict:
    """Configs of two sweeps whose step-time 95% intervals overlap, and the median ratio b/a."""
    by_a = {r["workload_key"]: r for r in a if r["status"] == "ok"}
    pairs = [(by_a[r["workload_key"]], r) for r in b if r["status"] == "ok" and r["workload_key"] in by_a]
    overlap = sum(1 for x, y in pairs if x["step_time_ci_low_s"] <= y["step_time_ci_high_s"]
                  and y["step_time_ci_low_s"] <= x["step_time_ci_high_s"])
    ratios = [y["step_time_s"] / x["step_time_s"] for x, y in pairs]
    return {"configs": len(pairs), "ci_overlap": overlap,
            "median_ratio": round(statistics.median(ratios), 3) if ratios else None,
            "ratios": [round(r, 3) for r in ratios]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ", ".join(MODES))
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="bench-overlap-") as tmp:
        sweep_file = Path(tmp) / "sweep.yaml"
        sweep_file.write_text(SWEEP)
        for r in range(args.rounds):
            for mode in (modes if r % 2 == 0 else modes[::-1]):
                folder = Path(tmp) / f"round{r}"
                folder.mkdir(exist_ok=True)
                run = run_sweep(mode, sweep_file, folder)
                runs[mode].append(run)
                print(f"round {r + 1} {mode}: {run['wall_s']:.1f} s (load average "
                      f"{os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
    out: dict = {"date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "rounds": args.rounds,
                 "load_average_end": [round(x, 1) for x in os.getloadavg()], "modes": {}}
    for mode, rs in runs.items():
        walls = [r["wall_s"] for r in rs]
        out["modes"][mode] = {
            "walls_s": [round(w, 1) for w in walls], "median_wall_s": round(statistics.median(walls), 1),
            "statuses": sorted(r["status"] for r in rs[0]["rows"]),
            "compile_phases_s": [round(phase_sum(r["rows"], COMPILE_PHASES), 1) for r in rs],
            "timing_phases_s": [round(phase_sum(r["rows"], TIMING_PHASES), 1) for r in rs],
            "prepared_ahead": [sum(bool(x.get("prepared_ahead")) for x in r["rows"]) for r in rs],
            "preparers_stopped": [sum(bool(x.get("preparers_stopped")) for x in r["rows"]) for r in rs],
            "prepare_wait_s": [round(sum(float(x.get("prepare_wait_s") or 0) for x in r["rows"]), 1) for r in rs],
        }
    for seq, ovl in PAIRS:
        if seq not in runs or ovl not in runs:
            continue
        per_round = [a["wall_s"] / b["wall_s"] for a, b in zip(runs[seq], runs[ovl])]
        ideal = [max(phase_sum(a["rows"], COMPILE_PHASES), phase_sum(a["rows"], TIMING_PHASES))
                 for a in runs[seq]]
        out[f"{seq} / {ovl}"] = {
            "wall_ratio_per_round": [round(x, 2) for x in per_round],
            "median_wall_ratio": round(statistics.median(per_round), 2),
            "max(sum compile, sum timing) of the sequential sweep, s": [round(x, 1) for x in ideal],
            "overlapped wall / that max": [round(b["wall_s"] / i, 2) for b, i in zip(runs[ovl], ideal)],
            "same configs and statuses": all(
                sorted((r["workload_key"], r["status"]) for r in a["rows"])
                == sorted((r["workload_key"], r["status"]) for r in b["rows"])
                for a, b in zip(runs[seq], runs[ovl])),
            "step_times": [agreement(a["rows"], b["rows"]) for a, b in zip(runs[seq], runs[ovl])],
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
