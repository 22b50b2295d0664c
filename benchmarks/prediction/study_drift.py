"""How much of a config's wall step time on this shared host is the neighbours' load: every ok
run of the stores, its wall step time and its process CPU time per step relative to the fastest
run of the same config (over all the stores given), by 10-minute window (docs/prediction.md).
Also, for two stores of two platforms, the measured speedup of each config against the ratio
of the probed peaks (the cross-platform assumption).

PYTHONPATH=$PWD python benchmarks/prediction/study_drift.py benchmarks/prediction/fc_1cpu.db \
    benchmarks/prediction/fc_1cpu_budget.db [--speedup benchmarks/prediction/fc_2cpu.db]
"""
import argparse

import pandas as pd

from paradnn.analysis import prediction as P
from paradnn.store import load

parser = argparse.ArgumentParser()
parser.add_argument("store", nargs="+")
parser.add_argument("--speedup", default=None, help="a store of another platform")
args = parser.parse_args()

frames = []
for path in args.store:
    df = load(path)
    df = df[df["status"] == "ok"].copy()
    df["store"] = path.rsplit("/", 1)[-1]
    frames.append(df)
df = pd.concat(frames, ignore_index=True)
df["t"] = pd.to_datetime(df["time_utc"], format="ISO8601")
df["cpu_step_s"] = df["process_cpu_s"] / (df["timed_calls"] * df["steps_per_call_used"])
df["wall_vs_fastest"] = df["step_time_s"] / df.groupby("workload_key")["step_time_s"].transform("min")
df["cpu_vs_fastest"] = df["cpu_step_s"] / df.groupby("workload_key")["cpu_step_s"].transform("min")
df["wall_over_cpu"] = df["step_time_s"] / df["cpu_step_s"]
table = df.groupby([pd.Grouper(key="t", freq="10min"), "store"]).agg(
    runs=("step_time_s", "size"), wall_vs_fastest=("wall_vs_fastest", "median"),
    cpu_vs_fastest=("cpu_vs_fastest", "median"), wall_over_cpu=("wall_over_cpu", "median"))
pd.set_option("display.width", 200)
print("medians per 10-minute window (UTC) of: wall step time / the config's fastest run, CPU "
      "time per step / the config's least, wall step time / CPU time per step")
print(table.to_string(float_format=lambda v: f"{v:.2f}"))
common = df.groupby("workload_key")["store"].nunique()
if len(args.store) > 1 and (common > 1).any():
    keys = common[common > 1].index
    per = df[df["workload_key"].isin(keys)].groupby(["workload_key", "store"])["step_time_s"].median().unstack()
    a, b = per.columns[0], per.columns[1]
    r = per[b] / per[a]
    print(f"\n{len(r)} configs in both {a} and {b}: median step time ratio {b}/{a} "
          f"{r.median():.2f} (p10 {r.quantile(0.1):.2f}, p90 {r.quantile(0.9):.2f})")
if args.speedup:
    one = P.config_table(P.measured(df, include_unstable=True)[0]).set_index("workload_key")
    other_rows = load(args.speedup)
    two = P.config_table(P.measured(other_rows, include_unstable=True)[0]).set_index("workload_key")
    j = one[["step_time_s", "model_flops_per_step"]].join(two[["step_time_s"]], rsuffix="_other",
                                                          how="inner")
    s = j["step_time_s"] / j["step_time_s_other"]
    quarter = pd.qcut(j["model_flops_per_step"], 4, labels=["smallest", "second", "third", "largest"])
    ok_other = other_rows[other_rows["status"] == "ok"]
    peak = {c: (df[c].median(), ok_other[c].median()) for c in ("peak_flops", "peak_bytes_per_sec")}
    print(f"\n{len(j)} configs measured on both platforms: measured speedup of {args.speedup} "
          f"(median step time ratio) median {s.median():.2f}, p10 {s.quantile(0.1):.2f}, p90 "
          f"{s.quantile(0.9):.2f}; ratio of the probed peaks (medians of the ok rows): FLOP/s "
          f"{peak['peak_flops'][1] / peak['peak_flops'][0]:.2f} ({peak['peak_flops'][1]:.3g} / "
          f"{peak['peak_flops'][0]:.3g}), bandwidth "
          f"{peak['peak_bytes_per_sec'][1] / peak['peak_bytes_per_sec'][0]:.2f} "
          f"({peak['peak_bytes_per_sec'][1]:.3g} / {peak['peak_bytes_per_sec'][0]:.3g} B/s)")
    print("measured speedup by quarter of the configs by analytic FLOPs per step (median): "
          + ", ".join(f"{q} {v:.2f}" for q, v in s.groupby(quarter, observed=True).median().items()))
