"""Sweep throughput (issue 20): a sweep's wall time, cold and warm, against a reference checkout.

    PYTHONPATH=. python benchmarks/bench_sweep.py --reference /path/to/old/checkout --rounds 3

Each round runs, as fresh ``python -m paradnn sweep FILE`` processes (what a user runs), in an
order that alternates between rounds so that the host's load drift hits both sides alike:

* this checkout, cold: an empty compilation cache folder and a new store;
* this checkout, warm: the same cache folder again, into another new store;
* the reference checkout (``--reference``, e.g. the old main), cold and warm the same way.

Each side has its own peak-probe cache (``PARADNN_CACHE`` in a temporary folder), probed before
the first round (:func:`probe_cache`), so that no timed sweep measures the host's peak. The
automatic retry of unstable configs is off (``PARADNN_RETRY_UNSTABLE_S=0``): it adds timed work
on some runs and not others.

Printed: one JSON object with every run's wall time (s, ``time.perf_counter`` around the
process), the medians, the ratios ``reference cold / cold`` (target >= 3) and ``cold / warm``
(target >= 5), and this checkout's per-phase totals (s, summed over the records of the median
cold and warm runs; docs/metrics.md, Phases). ``--no-reference`` measures this checkout alone.

``--plain`` adds a third side to each round: ``benchmarks/plain_sweep.py``, a hand-written JAX
script that only compiles and runs the file's configs (cold: an empty JAX persistent cache;
warm: the same cache again). Printed besides: ``cold_over_plain_cold`` and
``warm_over_plain_warm`` (paradnn's cost over that script) and ``reference_cold_over_plain_cold``
(how much faster than the reference a one-process sweeper that only traces, compiles and runs
these programs can be: the ceiling of ``reference_cold_over_cold``).

``--grid40`` instead measures this checkout on a 40-config sweep of small FC and CNN models with
``time_budget_s: 1`` (the file is written to a temporary folder): a cold sweep, a warm re-run,
and a second cold sweep (fresh cache) whose wall time ``paradnn plan``'s estimator
(:func:`paradnn.analysis.cost.estimate`, fitted on the first cold sweep's store) predicts.
Printed: per config, the median of wall minus the timing phase (``phase_total_s -
phase_warmup_s - phase_timed_s``, s) cold and warm; the timing phases' share of the warm sweep's
wall time; and estimate / actual.

``--agreement`` instead measures six mid-size FC, CNN and RNN configs at the default timing
protocol with both checkouts, ``--rounds`` runs of each in alternating order, and compares the
two stores with this checkout's ``paradnn compare`` (:func:`agreement`): whether the new
sweeper measures the same step times as the old one.
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
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]


def probe_cache(checkout: Path, folder: Path, tries: int = 3) -> bool:
    """Give ``checkout`` its own peak-probe cache in ``folder`` (``PARADNN_CACHE``), measured
    before any timed sweep, and say whether it holds a quiet probe. Each side needs its own: a
    checkout before the one-peak-per-host policy writes the cache in its earlier format, which
    replaces the newer list of probes, so that interleaved with it this checkout would probe
    again inside a timed sweep (seconds of "other" in its records). Up to ``tries`` probes until
    the cache holds a quiet one (either format), so that neither side probes while timed."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "PARADNN_CACHE": str(folder)}
    for _ in range(tries):
        subprocess.run([sys.executable, "-m", "paradnn", "probe", "--refresh"], env=env, cwd=checkout,
                       capture_output=True, text=True)
        try:
            cache = json.loads((folder / "probe.json").read_text())
        except (OSError, ValueError):
            continue
        for value in cache.values():
            entries = value.get("measurements", [value]) if isinstance(value, dict) else []
            if any("peak_flops" in e and not e.get("contended") for e in entries):
                return True
    return False


def timed_process(argv: list[str], env: dict[str, str], cwd: Path, what: str) -> float:
    """Wall time (s) of one process running ``argv``; SystemExit naming ``what`` if it fails."""
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{what} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def run_sweep(checkout: Path, sweep_file: str, store: Path, cache: Path,
              probes: Path | None = None, extra: tuple[str, ...] = ()) -> float:
    """Wall time (s) of one ``paradnn sweep`` process of ``checkout`` (``probes``: its own
    peak-probe cache folder, :func:`probe_cache`; ``extra``: more arguments of the command)."""
    # No automatic retry of unstable configs (issue 25): it adds timed work by design, on some
    # runs and not others, which is not the sweep overhead measured here.
    env = {**os.environ, "PYTHONPATH": str(checkout), "PARADNN_RETRY_UNSTABLE_S": "0"}
    if probes is not None:
        env["PARADNN_CACHE"] = str(probes)
    return timed_process([sys.executable, "-m", "paradnn", "sweep", sweep_file, "--store", str(store),
                          "--cache-dir", str(cache), "--quiet", *extra], env, checkout, f"sweep of {checkout}")


def run_plain(sweep_file: str, cache: Path) -> float:
    """Wall time (s) of one ``benchmarks/plain_sweep.py`` process (the hand-written JAX script:
    compile and run the file's configs, nothing else) with JAX's persistent cache in ``cache``."""
    return timed_process([sys.executable, str(ROOT / "benchmarks" / "plain_sweep.py"), sweep_file,
                          "--cache", str(cache)], {**os.environ, "PYTHONPATH": str(ROOT)}, ROOT, "plain_sweep")


def phases(store: Path) -> dict[str, float]:
    """Per-phase totals (s) of a store written by this checkout."""
    from paradnn.record import phase_totals
    from paradnn.store import load

    return {k: round(v, 3) for k, v in phase_totals(load(store).to_dict("records")).items()}


GRID40 = """\
# 40 small FC and CNN configs, time_budget_s 1 (issue 20's throughput check)
parts:
  - family: fc
    fixed: {input: 64, output: 10}
    axes: {layers: [1, 2, 4, 8], nodes: [32, 64, 128, 256], batch: [8, 32]}
  - family: cnn
    fixed: {block: residual, blocks: 1, output: 10}
    axes: {filters: [4, 8], image: [32, 64], batch: [2, 4]}
settings:
  time_budget_s: 1
"""


def grid40() -> dict:
    import pandas as pd

    from paradnn.analysis.cost import estimate
    from paradnn.grids import load_sweep_file
    from paradnn.measure import MeasureSettings
    from paradnn.store import load

    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "grid40.yaml"
        f.write_text(GRID40)
        walls, frames = {}, {}
        for name, cache in (("cold", "a"), ("warm", "a"), ("cold2", "b")):
            store = Path(tmp) / f"{name}.db"
            walls[name] = run_sweep(ROOT, str(f), store, Path(tmp) / cache)
            frames[name] = load(store)
            print(f"grid40 {name}: {walls[name]:.1f} s", file=sys.stderr)
        plan = load_sweep_file(f)
        est = estimate(frames["cold"], plan.workloads, MeasureSettings(**plan.settings))

        def rest(df: pd.DataFrame) -> float:
            return float((df["phase_total_s"] - df["phase_warmup_s"] - df["phase_timed_s"]).median())

        warm = frames["warm"]
        timing_share = float((warm["phase_warmup_s"] + warm["phase_timed_s"]).sum()) / walls["warm"]
        return {
            "configs": len(plan.workloads),
            "statuses": sorted(set(frames["cold"]["status"]) | set(warm["status"])),
            "wall_s": {k: round(v, 1) for k, v in walls.items()},
            "median_wall_minus_timing_per_config_s": {"cold": round(rest(frames["cold"]), 2),
                                                     "warm": round(rest(warm), 2)},
            "timing_share_of_warm_wall": round(timing_share, 3),
            "plan_estimate_s": round(float(est.table["wall_s"].sum()), 1),
            "plan_estimate_over_actual_cold2": round(float(est.table["wall_s"].sum()) / walls["cold2"], 3),
            "phases_cold_s": phases(Path(tmp) / "cold.db"),
            "phases_warm_s": phases(Path(tmp) / "warm.db"),
            "load_average": os.getloadavg()[0],
        }


AGREEMENT = """\
# Six configs big enough for their step times to repeat (0.3-30 ms), at the default timing
# protocol: does the new sweeper measure what the old one did? (issue 20)
parts:
  - family: fc
    fixed: {layers: 4, input: 512, output: 100, batch: 64}
    axes: {nodes: [256, 1024]}
  - family: cnn
    fixed: {block: residual, blocks: 1, image: 32, output: 10, batch: 8}
    axes: {filters: [8, 16]}
  - family: rnn
    fixed: {cell: lstm, layers: 1, length: 16, vocab: 256, batch: 16}
    axes: {embed: [64, 128]}
settings:
  time_budget_s: 1
"""


def agreement(reference: Path, rounds: int, keep: Path | None = None) -> dict:
    """The same six configs measured by this checkout and ``reference``, one run of each per
    round in alternating order (``--repeat r``), then compared as a user would: ``paradnn
    compare REFERENCE NEW`` of this checkout (runs pooled per config, a test and a noise floor
    per config, docs/compare.md). Printed: its verdict counts, the median of the per-config
    ratios (x, new / reference step time) and each config's ratio with its 95% interval.
    ``keep``: a folder for the two stores (``new.db``, ``reference.db``), kept afterwards."""
    sides = {"new": ROOT, "reference": reference}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        stores = keep if keep is not None else tmp
        stores.mkdir(parents=True, exist_ok=True)
        f = Path(tmp) / "agreement.yaml"
        f.write_text(AGREEMENT)
        probes = {side: Path(tmp) / f"{side}-probe" for side in sides}
        for side in sides:
            probe_cache(sides[side], probes[side])
        for r in range(rounds):
            for side in (list(sides) if r % 2 == 0 else list(reversed(sides))):
                wall = run_sweep(sides[side], str(f), stores / f"{side}.db", tmp / f"{side}-xla",
                                 probes[side], extra=("--repeat", str(r + 1)))
                print(f"agreement round {r + 1} {side}: {wall:.1f} s", file=sys.stderr)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-m", "paradnn", "compare", str(stores / "reference.db"),
                               str(stores / "new.db"), "--json"], env=env, cwd=ROOT,
                              capture_output=True, text=True)
        if done.returncode not in (0, 1, 3):
            raise SystemExit(f"compare failed ({done.returncode}):\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout)
    configs = result["configs"]
    return {
        "rounds": rounds, "reference": str(reference), "axes": result["axes"],
        "verdicts": result["counts"],
        "median_ratio_new_over_reference": round(statistics.median(c["ratio"] for c in configs), 3),
        "configs": [{"config": c["label"], "ratio": round(c["ratio"], 3),
                     "ci": [round(c["ci_low"], 3), round(c["ci_high"], 3)], "verdict": c["verdict"]}
                    for c in configs],
        "notes": result["notes"],
        "load_average": os.getloadavg()[0],
    }


def step_time_agreement(stores: dict[str, list[Path]]) -> dict:
    """Whether the two checkouts measured the same step times: over every pair of runs of one
    round and one cache state, the configs (joined on ``workload_key``) whose 95% confidence
    intervals of the median step time (``step_time_ci_low_s``/``_high_s``) overlap, and the
    median ratio of the new checkout's ``step_time_s`` over the reference's."""
    from paradnn.store import load

    pairs = overlap = 0
    ratios = []
    for kind in ("cold", "warm"):
        for new, ref in zip(stores[f"new_{kind}"], stores[f"reference_{kind}"]):
            a, b = load(new), load(ref)
            joined = a.merge(b, on="workload_key", suffixes=("_new", "_ref"))
            for _, r in joined.iterrows():
                pairs += 1
                lo = max(r["step_time_ci_low_s_new"], r["step_time_ci_low_s_ref"])
                hi = min(r["step_time_ci_high_s_new"], r["step_time_ci_high_s_ref"])
                overlap += bool(lo <= hi)
                ratios.append(r["step_time_s_new"] / r["step_time_s_ref"])
    return {"config_pairs": pairs, "confidence_intervals_overlap": overlap,
            "median_step_time_new_over_reference": round(statistics.median(ratios), 3) if ratios else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", default="sweeps/smoke.yaml", help="sweep file (relative to "
                        "each checkout, so both run their own copy of it)")
    parser.add_argument("--reference", default="../paradnn-base",
                        help="checkout to compare with, e.g. `git worktree add ../paradnn-base "
                        "b5637c9` for the main before the throughput work (default: %(default)s)")
    parser.add_argument("--no-reference", action="store_true", help="measure this checkout only")
    parser.add_argument("--plain", action="store_true", help="one more side: the hand-written JAX "
                        "script of benchmarks/plain_sweep.py (compile and run the configs, nothing "
                        "else), cold and warm: the floor of a sweeper")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--agreement", action="store_true", help="six mid-size configs measured "
                        "by both checkouts, --rounds runs each, compared with paradnn compare")
    parser.add_argument("--keep", type=Path, default=None, help="with --agreement: a folder that "
                        "keeps the two stores")
    parser.add_argument("--grid40", action="store_true", help="the 40-config FC+CNN check "
                        "(module notes) instead of the comparison")
    args = parser.parse_args()
    if args.grid40:
        print(json.dumps(grid40(), indent=1))
        return
    if args.agreement:
        print(json.dumps(agreement(Path(args.reference), args.rounds, args.keep), indent=1))
        return
    checkouts = {"new": ROOT} if args.no_reference else {"new": ROOT, "reference": Path(args.reference)}
    sides = [*checkouts, "plain"] if args.plain else list(checkouts)
    walls: dict[str, list[float]] = {f"{s}_{k}": [] for s in sides for k in ("cold", "warm")}
    stores: dict[str, list[Path]] = {k: [] for k in walls}  # the hand-written script's: never written
    with tempfile.TemporaryDirectory() as tmp:
        probes = {side: Path(tmp) / f"{side}-probe" for side in checkouts}
        quiet_probes = {side: probe_cache(checkout, probes[side]) for side, checkout in checkouts.items()}
        # Each side as one call: (JAX cache folder, store) -> wall time (s).
        runners: dict[str, Callable[[Path, Path], float]] = {
            side: (lambda cache, store, c=checkout, p=probes[side]: run_sweep(c, args.sweep, store, cache, p))
            for side, checkout in checkouts.items()}
        runners["plain"] = lambda cache, store: run_plain(args.sweep, cache)
        for r in range(args.rounds):
            for side in (sides if r % 2 == 0 else sides[::-1]):
                cache = Path(tmp) / f"{side}-{r}-xla"
                for kind in ("cold", "warm"):
                    store = Path(tmp) / f"{side}-{r}-{kind}.db"
                    walls[f"{side}_{kind}"].append(runners[side](cache, store))
                    stores[f"{side}_{kind}"].append(store)
                    print(f"round {r + 1} {side} {kind}: {walls[f'{side}_{kind}'][-1]:.2f} s",
                          file=sys.stderr)
        median = {k: statistics.median(v) for k, v in walls.items()}

        def median_store(kind: str) -> Path:
            values = walls[f"new_{kind}"]
            return stores[f"new_{kind}"][values.index(sorted(values)[len(values) // 2])]

        result = {
            "sweep_file": args.sweep,
            "quiet_probe_on_record": quiet_probes,
            "rounds": args.rounds,
            "reference": None if args.no_reference else str(args.reference),
            "wall_s": {k: [round(x, 2) for x in v] for k, v in walls.items()},
            "median_wall_s": {k: round(v, 2) for k, v in median.items()},
            "cold_over_warm": round(median["new_cold"] / median["new_warm"], 2),
            "phases_cold_s": phases(median_store("cold")),
            "phases_warm_s": phases(median_store("warm")),
            "load_average": os.getloadavg()[0],
        }
        if not args.no_reference:
            result["step_times_vs_reference"] = step_time_agreement(stores)
            result["reference_cold_over_cold"] = round(median["reference_cold"] / median["new_cold"], 2)
            result["reference_warm_over_warm"] = round(median["reference_warm"] / median["new_warm"], 2)
            result["per_round_reference_cold_over_cold"] = [
                round(a / b, 2) for a, b in zip(walls["reference_cold"], walls["new_cold"])]
        if args.plain:
            # paradnn's cost over the hand-written script, and (against the reference) the most
            # a sweeper that only compiles and runs these programs could gain over it.
            for kind in ("cold", "warm"):
                result[f"{kind}_over_plain_{kind}"] = round(median[f"new_{kind}"] / median[f"plain_{kind}"], 2)
                if not args.no_reference:
                    result[f"reference_{kind}_over_plain_{kind}"] = round(
                        median[f"reference_{kind}"] / median[f"plain_{kind}"], 2)
        result["per_round_cold_over_warm"] = [round(a / b, 2) for a, b in zip(walls["new_cold"], walls["new_warm"])]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
