"""The report's compare section: what changed between the two newest versions of a store (the
paradnn revision and software versions its records carry), where, and the change points of its
whole history (:mod:`paradnn.analysis.compare`, :mod:`paradnn.compare`).

>>> import paradnn
>>> from paradnn.report.compare import compare_section
>>> sections = compare_section(paradnn.load("nightly.db"))   # doctest: +SKIP
"""

from __future__ import annotations

import pandas as pd

from paradnn.analysis.compare import (
    DEFAULT_ALPHA, DEFAULT_THRESHOLD, CompareResult, compare_frames, differing_axes,
)
from paradnn.compare import HISTORY_AXES, History, history, versions_of
from paradnn.errors import ParadnnError
from paradnn.plots.compare import compare_heatmap
from paradnn.report.cells import TABLE_DIGITS
from paradnn.report.parts import Item, Missing, Section
from paradnn.units import precise_duration

__all__ = ["SECTION_ID", "SECTION_TITLE", "compare_section", "latest_change"]

SECTION_ID = "compare"
SECTION_TITLE = "Change since the previous version (paradnn compare)"
#: What a store needs for the section, and how to get it (the report's "unsupported" entry).
NEEDS = ("records of the same configs at two versions (paradnn revisions or software versions) "
         "in one store")
#: How to get it, for the recipe: a sweep into the same store skips configs it already has,
#: whatever the revision, so the new version's records go to a new store that is then merged.
HOW = ("measure the sweep again after the change, into a new store, and merge: `paradnn sweep "
       "FILE --store new.db` then `paradnn merge results.db new.db -o history.db`")


def _measured(df: pd.DataFrame) -> pd.DataFrame:
    if "status" not in df.columns or "step_time_s" not in df.columns:
        return df.iloc[0:0]
    return df[(df["status"] == "ok") & (pd.to_numeric(df["step_time_s"], errors="coerce") > 0)]


def latest_change(df: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD,
                  alpha: float = DEFAULT_ALPHA) -> CompareResult | None:
    """The newest version of ``df`` (records of ``paradnn.load``) compared against the one
    before it (versions: :func:`paradnn.compare.versions_of`), along the axes in which they
    differ; None when the rows hold fewer than two versions or no config of both."""
    rows = _measured(df)
    if rows.empty:
        return None
    try:
        v = versions_of(rows, HISTORY_AXES)
    except ParadnnError:
        return None
    if len(v.labels) < 2:
        return None
    index = pd.Series(v.index, index=rows.index)
    base, new = rows[index == len(v.labels) - 2], rows[index == len(v.labels) - 1]
    try:
        result = compare_frames(base, new, axes=list(differing_axes(base, new)) or None,
                                threshold=threshold, alpha=alpha)
    except ParadnnError:
        return None  # other axes differ too, or no common config: nothing to say here
    result.source = (v.labels[-2], v.labels[-1])
    return result


def _table(result: CompareResult) -> pd.DataFrame:
    t = result.table
    t = t[t["verdict"] != "unchanged"] if (t["verdict"] != "unchanged").any() else t
    return pd.DataFrame({
        "config": t["label"], "verdict": t["verdict"], "roofline class": t["bound"],
        "ratio (x, NEW/BASE step time)": t["ratio"].round(3),
        "95% CI low (x)": t["ci_low"].round(3), "95% CI high (x)": t["ci_high"].round(3),
        "q (BH)": t["q"], "noise (relative)": t["noise"].round(3),
        # Text in the unit that reads best (25.1 s, 20.4 µs), never 2.506e+04 ms, with the
        # tables' precision (3 significant digits, trailing zeros kept: 860 µs beside 1.20 ms).
        "BASE step time": t["base_s"].map(lambda s: precise_duration(s, TABLE_DIGITS, zeros=True)),
        "NEW step time": t["new_s"].map(lambda s: precise_duration(s, TABLE_DIGITS, zeros=True)),
    }).reset_index(drop=True)


def _history_table(h: History) -> pd.DataFrame:
    s = h.steps
    return pd.DataFrame({
        "at version": s["version"], "after": s["previous"], "config": s["label"],
        "verdict": s["verdict"], "ratio (x, after/before)": s["ratio"].round(3),
        "95% CI low (x)": s["ci_low"].round(3), "95% CI high (x)": s["ci_high"].round(3),
        "q (BH)": s["q"],
    })


def compare_section(df: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD,
                    alpha: float = DEFAULT_ALPHA) -> list[Section]:
    """The compare section of a report on ``df``: the headline and localisation sentence with
    the heat map (newest version over the previous one), the table of configs that did not stay
    unchanged, and, with three or more versions, the change points of the history. Raises
    :class:`~paradnn.report.parts.Missing` (with :data:`NEEDS`) when ``df`` holds fewer than
    two versions of common configs."""
    result = latest_change(df, threshold, alpha)
    if result is None:
        raise Missing(NEEDS, {"compare": True})
    c = result.counts()
    caption = (f"{result.source[1]} against {result.source[0]} ({result.axis_text}): "
               f"{c['regression']} regression(s) beyond {threshold:g}x, {c['improvement']} "
               f"improvement(s), {c['inconclusive']} inconclusive, {c['unchanged']} unchanged, "
               f"of {len(result.table)} configs. {result.where.sentence} Colour: NEW/BASE step "
               "time (x), red slower; hatched: not significant (Benjamini-Hochberg q >= "
               f"{alpha:g}). Method: docs/compare.md.")
    items = [Item(caption, lambda: compare_heatmap(result), None),
             Item("Configs that changed or could not be told apart from noise (all configs "
                  "when none did).", None, _table(result))]
    h = history(_measured(df), threshold=threshold, alpha=alpha)
    if len(h.versions) >= 3:
        items.append(Item(f"Change points over {len(h.versions)} versions ({h.configs} configs "
                          f"measured at two or more): {len(h.steps)} found.", None,
                          _history_table(h) if len(h.steps) else None))
    return [Section(SECTION_ID, SECTION_TITLE, items)]
