"""Adaptive (``--budget``) against random choices of the configs to measure, on a store that
holds the whole grid measured (docs/prediction.md).

PYTHONPATH=$PWD python benchmarks/prediction/study_budget.py benchmarks/prediction/fc_1cpu.db [--fractions 0.1,0.2,0.3]
    [--correction gp] [--seeds 5] [--target wall|cpu]

For each fraction f of the grid's measured configs: the adaptive choice (the same code as
``paradnn sweep --budget``: paradnn.analysis.prediction.space_filling and next_configs, one
config per round, "measuring" a config = reading its stored measurement) and ``--seeds`` random
choices of the same size are each fitted and scored on every config not chosen: median and p90
absolute percentage error of examples/s and the coverage of the 90% intervals. Also the
measurement noise floor where configs were measured more than once: the median |t_i / t_j - 1|
over pairs of stable repeats of one config.
"""
import argparse
import itertools
import sys
import time

import numpy as np
import pandas as pd

from paradnn.store import load
from study_common import cpu_time_target
from paradnn.analysis import prediction as P

parser = argparse.ArgumentParser()
parser.add_argument("store", nargs="+")
parser.add_argument("--fractions", default="0.1,0.15,0.2,0.3")
parser.add_argument("--correction", default=P.DEFAULT_CORRECTION)
parser.add_argument("--seeds", type=int, default=5)
parser.add_argument("--include-unstable", action="store_true")
parser.add_argument("--target", choices=("wall", "cpu"), default="wall",
                    help="cpu: CPU time per step instead of the wall step time (a diagnostic, "
                    "benchmarks/prediction/study_common.py)")
args = parser.parse_args()

rows = P.sized(load(args.store))
if args.target == "cpu":
    rows = cpu_time_target(rows)
meas, left_out = P.measured(rows, args.include_unstable)
table = P.config_table(meas).reset_index(drop=True)
print(f"{', '.join(args.store)}: {len(table)} measured configs ({left_out} unstable rows left "
      f"out), correction {args.correction}")

# Noise floor: pairs of stable repeats of one config.
pairs = []
for _, g in meas.groupby("workload_key"):
    t = pd.to_numeric(g["step_time_s"]).to_numpy(float)
    pairs += [abs(a / b - 1) for a, b in itertools.permutations(t, 2)]
if pairs:
    print(f"noise floor: median |t_i / t_j - 1| over {len(pairs)} ordered pairs of repeats = "
          f"{np.median(pairs):.3f}, p90 {np.quantile(pairs, 0.9):.3f}")


def scores(chosen: list[str]) -> dict:
    mask = ~table["workload_key"].isin(chosen).to_numpy()
    pred = P.held_out(table, mask, args.correction, P.DEFAULT_LEVEL)
    base = P.held_out(table, mask, "none", P.DEFAULT_LEVEL)
    e, b = P.errors(pred), P.errors(base)
    return {"median_ape": e["median_ape"], "p90_ape": e["p90_ape"], "coverage": e["coverage"],
            "roofline_median_ape": b["median_ape"], "roofline_coverage": b["coverage"]}


def adaptive(budget: int) -> list[str]:
    chosen = P.space_filling(table, P.start_size(budget))[:budget]
    while len(chosen) < budget:
        fit = P.fit_all(table[table["workload_key"].isin(chosen)], args.correction)
        left = table[~table["workload_key"].isin(chosen)]
        picks, _ = P.next_configs(fit, left, 1)
        chosen += picks
    return chosen


out = []
for f in map(float, args.fractions.split(",")):
    budget = max(P.MIN_CONFIGS, int(round(f * len(table))))
    t0 = time.time()
    out.append({"fraction": f, "budget": budget, "choice": "adaptive", **scores(adaptive(budget))})
    for seed in range(args.seeds):
        pick = np.random.default_rng(seed).choice(len(table), budget, replace=False)
        out.append({"fraction": f, "budget": budget, "choice": f"random seed {seed}",
                    **scores(list(table["workload_key"].iloc[pick]))})
    print(f"fraction {f}: {time.time() - t0:.0f} s", file=sys.stderr)
result = pd.DataFrame(out)
pd.set_option("display.width", 200)
print(result.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
rand = result[result["choice"] != "adaptive"].groupby("fraction")[
    ["median_ape", "p90_ape", "coverage", "roofline_median_ape"]].agg(["mean", "min", "max"])
print("\nrandom choices, mean (min, max) over seeds:")
print(rand.to_string(float_format=lambda v: f"{v:.3f}"))
