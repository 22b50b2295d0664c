"""Held-out scores of the default model and the pure roofline on a store, for wall step time
(what `paradnn predict --score` prints) or CPU time per step (--target cpu, a diagnostic:
benchmarks/prediction/study_common.py).

PYTHONPATH=$PWD python benchmarks/prediction/study_score.py benchmarks/prediction/fc_1cpu.db [--target cpu] [--correction gp]
"""
import argparse
import time

import pandas as pd

from paradnn.analysis import prediction as P
from paradnn.store import load
from study_common import cpu_time_target

parser = argparse.ArgumentParser()
parser.add_argument("store")
parser.add_argument("--target", choices=("wall", "cpu"), default="wall")
parser.add_argument("--correction", default=P.DEFAULT_CORRECTION)
args = parser.parse_args()
rows = P.sized(load(args.store))
if args.target == "cpu":
    rows = cpu_time_target(rows)
meas, left_out = P.measured(rows)
t0 = time.time()
table = P.score(rows, args.correction)
pd.set_option("display.width", 200)
print(f"{args.store}, target {args.target}: {meas['workload_key'].nunique()} configs "
      f"({len(meas)} rows; {left_out} unstable rows left out), {time.time() - t0:.0f} s")
print(table.drop(columns="group").to_string(index=False, float_format=lambda v: f"{v:.3f}"))
