"""The report's first table: every run of the store with the answer to "how fast?" (examples/s,
median step time with its 95% confidence interval, utilization, status), above the warnings and
the figures."""

from __future__ import annotations

import re

import pandas as pd

from paradnn import gpuclocks, ledger
from paradnn.analysis.columns import (
    headline_utilization, label_columns, platform_label, unstable_mask, warning_lists,
    workload_label,
)
from paradnn.analysis.framework import framework_of, frameworks
from paradnn.record import LEDGER_PARTS
from paradnn.report.cells import TABLE_DIGITS as DIGITS
from paradnn.report.cells import table_column
from paradnn.units import compact, precise_duration

THROUGHPUT = "throughput [examples/s]"
STEP_TIME = "step time: median (95% CI)"


def _number(row: pd.Series, column: str) -> float | None:
    value = pd.to_numeric(row.get(column), errors="coerce")
    return None if pd.isna(value) else float(value)


#: The How-fast table's column naming each run's largest loss (where the store has ledgers).
LARGEST_LOSS = "largest loss (time ledger, share of the step)"


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per record of ``df``, in reading order (:func:`reading_order`): ``workload`` (its
    short name), ``batch``, ``platform``, ``framework`` (where the store has several),
    :data:`THROUGHPUT` and :data:`STEP_TIME` (median, with the 95% CI) as text with
    :data:`DIGITS` significant digits, trailing zeros kept (47.9k beside 8.19k, 96.0 µs beside
    69.4 µs), the utilization (the headline one, :func:`~paradnn.analysis.columns.headline_utilization`,
    in %, with the source of the peak it divides by: spec, measured or nominal), ``status``
    (``ok``, ``ok, unstable`` where the timing missed its precision target, or the failure),
    ``warnings`` (physics codes: impossible values), :data:`LARGEST_LOSS` where some run has a
    time ledger (its largest part besides useful work, with its share), and ``notes`` (provenance codes, e.g.
    ``contended (1.00 cores)``). Values are text, units in the headers."""
    if not len(df):
        return pd.DataFrame(columns=["workload", "batch", "platform", THROUGHPUT, STEP_TIME,
                                     utilization_header(None), "status", "warnings", "notes"])
    util = headline_utilization(df)
    shaky = unstable_mask(df)
    codes = warning_lists(df, "physics")
    notes = warning_lists(df, "provenance")
    several = len(frameworks(df)) > 1
    # The time ledger's column only where some run has a ledger (docs/ledger.md).
    ledgers = "ledger_largest_loss" in df.columns and df["ledger_largest_loss"].notna().any()
    fws = framework_of(df) if several else None
    out = []
    # Records of the columns read, not iterrows over every column of a store row (a Series of
    # ~160 values per run: 3 s at 10,000 runs).
    cols = [c for c in df.columns if c in {
        *label_columns(df), "step_time_s", "step_time_ci_low_s", "step_time_ci_high_s",
        "examples_per_sec", "status", "peak_source", "host_other_busy_cores", *gpuclocks.METRICS,
        *([util] if util else [])}]
    for i, r in zip(df.index, df[cols].to_dict("records")):
        step, lo, hi = (_number(r, c) for c in ("step_time_s", "step_time_ci_low_s", "step_time_ci_high_s"))
        ci = (f" ({precise_duration(lo, DIGITS, zeros=True)} to {precise_duration(hi, DIGITS, zeros=True)})"
              if lo is not None and hi is not None else "")
        eps = _number(r, "examples_per_sec")
        u = _number(r, util) if util else None
        status = str(r.get("status"))
        if status == "ok" and shaky.loc[i]:
            status = "ok, unstable"
        rec = {"workload": workload_label(r), "batch": _number(r, "batch"),
               "platform": platform_label(r)}
        if several:
            rec["framework"] = fws.loc[i]
        rec.update({
            THROUGHPUT: compact(eps, DIGITS, zeros=True) if eps is not None else "",
            STEP_TIME: precise_duration(step, DIGITS, zeros=True) + ci if step is not None else "",
            utilization_header(util): (f"{u:.1%}" + (f" ({r.get('peak_source')})" if isinstance(r.get("peak_source"), str)
                                                     else "")) if u is not None else "",
        })
        if ledgers:
            loss = r.get("ledger_largest_loss")
            share = ledger.shares(r).get(loss) if isinstance(loss, str) else None
            rec[LARGEST_LOSS] = (f"{LEDGER_PARTS[loss][0]} {share:.0%}" if loss in LEDGER_PARTS and share is not None
                                 else "")
        rec.update({
            "status": status,
            "warnings": ", ".join(codes.loc[i]),
            "notes": ", ".join(_note(code, r) for code in notes.loc[i]),
        })
        out.append(rec)
    families = df["family"].astype(str).tolist() if "family" in df.columns else [""] * len(out)
    table = pd.DataFrame([out[i] for i in reading_order(families, out)])
    table["batch"] = table_column(list(table["batch"]))  # whole, as every table writes a count
    table.attrs["utilization"] = util
    return table


def natural_key(text: str) -> tuple:
    """A sort key of ``text`` whose digit runs compare as numbers (``nodes=64`` before
    ``nodes=128``); keys of any two texts compare (text and numbers alternate in each)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def reading_order(families: list[str], rows: list[dict]) -> list[int]:
    """Positions of the table's ``rows`` (dicts of its columns) grouped by family (``families``,
    one per row), then by workload with its sizes as numbers, batch, platform and framework: a
    sweep's grid reads in its axes' order whatever order its runs were measured or retried in."""
    def key(i: int) -> tuple:
        row = rows[i]
        batch = row["batch"] if row["batch"] is not None else -1.0
        return (families[i], natural_key(row["workload"]), batch, natural_key(row["platform"]),
                str(row.get("framework", "")))
    return sorted(range(len(rows)), key=key)


def _note(code: str, row: pd.Series) -> str:
    """A provenance code with the figure it is about, e.g. ``contended (1.00 cores)``."""
    other = _number(row, "host_other_busy_cores")
    if code == "contended" and other is not None:
        return f"contended ({other:.2f} cores)"
    if code == "clocks_limited":
        return f"clocks_limited ({gpuclocks.clocks_text(row)})"
    return code


def utilization_header(util: str | None) -> str:
    """The header of the utilization column: which utilization (its column name), in %."""
    return f"{util} [%]" if util else "utilization [%]"
