"""Which learned correction? Held-out scores of every correction on a store (docs/prediction.md).

PYTHONPATH=$PWD python benchmarks/prediction/study_corrections.py benchmarks/prediction/fc_1cpu.db [--include-unstable] [--target-cpu]
"""
import sys
import time

import pandas as pd

from paradnn.store import load
from study_common import cpu_time_target
from paradnn.analysis import prediction as P

pd.set_option("display.width", 200)
store, unstable = sys.argv[1], "--include-unstable" in sys.argv
rows = P.sized(load(store))
if "--target-cpu" in sys.argv:  # CPU time per step, a diagnostic (benchmarks/prediction/study_common.py)
    rows = cpu_time_target(rows)
for name in [c for c in P.CORRECTIONS if c != "none"]:
    t0 = time.time()
    table = P.score(rows, name, include_unstable=unstable, baseline=name == "ridge")
    print(f"\n{name} ({time.time() - t0:.0f} s)")
    print(table.drop(columns="group").to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    sys.stdout.flush()
