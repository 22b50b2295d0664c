"""The warnings of a store's runs (the codes of ``paradnn.record.WARNINGS``) by kind: physics
(utilization above 1, a point above its roof, an analytic/XLA FLOP mismatch, analytic counts
made by an older rule than others read with them: not to be published), provenance (a nominal
denominator, a contended host) and precision (unstable timing), one row per run and code, with
their meaning and likely cause. The report lists them before its figures; the figures mark the
physics ones."""

from __future__ import annotations

import pandas as pd

from paradnn.analysis.columns import (
    ok_rows, platform_label, warning_kind, warning_lists, warning_meaning, workload_label,
)

# The values a warning is about, shown beside it where the store has them.
WARNING_VALUES = ("model_flops_utilization", "flops_utilization", "model_ceiling_utilization",
                  "flops_per_sec", "arithmetic_intensity", "peak_flops", "peak_source", "ceiling_flops",
                  "model_flops_per_step", "paradnn_revision")


def warnings_table(df: pd.DataFrame, kind: str | None = "physics") -> pd.DataFrame:
    """One row per (run, warning code of ``kind``: physics by default, None for every kind) of
    ``df``: the code, its kind, the workload, platform, its meaning and likely cause
    (``paradnn.record.WARNINGS``) and the values it is about. Empty where no run has one."""
    ok = ok_rows(df) if len(df) else df
    codes = warning_lists(ok, kind)
    # Columns a store has but never filled (a ceiling in rows written before ceilings) say nothing.
    values = [c for c in WARNING_VALUES if c in ok.columns and ok[c].notna().any()]
    out = []
    # Only the runs with a code: looking up every run of a big store (0.5 ms each) was most of
    # this table's time, and most runs have none.
    for i, cs in codes[codes.map(len) > 0].items():
        r = ok.loc[i]
        for code in cs:
            rec = {"code": code, "kind": warning_kind(code), "workload": workload_label(r),
                   "batch": r.get("batch"), "platform": platform_label(r)}
            for c in values:
                rec[c] = r.get(c)
            rec["likely cause"] = warning_meaning(code)
            out.append(rec)
    cols = ["code", "kind", "workload", "batch", "platform", *values, "likely cause"]
    return pd.DataFrame(out, columns=cols)

