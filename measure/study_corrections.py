"""Which learned correction? Held-out scores of every correction on a store (docs/prediction.md).

PYTHONPATH=$PWD python measure/study_corrections.py measure/fc_2cpu.db [--include-unstable]
"""
import sys
import time

import pandas as pd

from paradnn import predictor
from paradnn.store import load
from paradnn.analysis import prediction as P

pd.set_option("display.width", 200)
store, unstable = sys.argv[1], "--include-unstable" in sys.argv
rows = predictor.sized(load(store))
for name in [c for c in P.CORRECTIONS if c != "none"]:
    t0 = time.time()
    table = P.score(rows, name, include_unstable=unstable, baseline=name == "ridge")
    print(f"\n{name} ({time.time() - t0:.0f} s)")
    print(table.drop(columns="group").to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    sys.stdout.flush()
