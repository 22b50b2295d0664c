"""Score the predictions an adaptive sweep stored (status predicted) against another store's
measurements of the same configs on the same platform (docs/prediction.md).

PYTHONPATH=$PWD python benchmarks/prediction/score_live.py benchmarks/prediction/fc_1cpu_budget.db benchmarks/prediction/fc_1cpu.db
"""
import sys

from paradnn.analysis import prediction as P
from paradnn.store import load

budget, truth = load(sys.argv[1]), load(sys.argv[2])
pred = P.predicted_rows(budget)
measured_here = P.measured(budget, include_unstable=True)[0]
meas, left_out = P.measured(truth)
table = P.config_table(meas)[["workload_key", "step_time_s", "repeats"]]
joined = pred.drop(columns=["step_time_s"]).merge(table, on="workload_key")
e = P.errors(joined)
print(f"{sys.argv[1]}: {measured_here['workload_key'].nunique()} configs measured "
      f"({int(P.measured(budget)[0]['workload_key'].nunique())} with a stable run), "
      f"{len(pred)} predicted; scored against {sys.argv[2]} ({len(table)} configs with stable "
      f"runs, {left_out} unstable rows left out): {e['configs']} predicted configs have a "
      f"measurement there")
print(f"median |error| of examples/s {100 * e['median_ape']:.1f}%, p90 {100 * e['p90_ape']:.1f}%, "
      f"coverage of the 90% intervals {100 * e['coverage']:.1f}%, median relative width "
      f"{e['median_relative_width']:.2f}")
print(pred["prediction_model"].iloc[0])
