"""``paradnn.compare``: did a change make anything slower, and where? (docs/compare.md)

Two stores (or two selections of one store) are compared config by config with the statistics
of :mod:`paradnn.analysis.compare`; one store that holds several revisions of the same sweep is
searched for change points per config (:func:`history`). The module itself is callable, so

>>> import paradnn
>>> r = paradnn.compare("base.db", "new.db")                      # doctest: +SKIP
>>> r.counts(), r.where.sentence, r.exit_code()                    # doctest: +SKIP
>>> r = paradnn.compare("results.db", base_where={"dtype": "float32"},
...                     new_where={"dtype": "bfloat16"})           # doctest: +SKIP
>>> h = paradnn.compare.history("nightly.db")                      # doctest: +SKIP

Renderers for people and CI jobs: :func:`text`, :func:`markdown`, :func:`to_json` (and their
``history_*`` counterparts).
"""

from __future__ import annotations

import math
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, Union

import numpy as np
import pandas as pd

from paradnn.analysis.columns import fmt
from paradnn.analysis.compare import (
    AXES, DEFAULT_ALPHA, DEFAULT_THRESHOLD, LEVEL, VERDICTS, CompareResult, axis_columns,
    benjamini_hochberg, change_points, compare_frames, config_columns, config_keys, config_label,
    parse_axes, side_of,
    verdict,
)
from paradnn.errors import ParadnnError
from paradnn.store import load

__all__ = ["compare", "history", "select", "History", "text", "markdown", "to_json",
           "history_text", "history_markdown", "history_json", "AXES", "VERDICTS"]

Source = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]], pd.DataFrame]
Where = Union[Mapping[str, Any], Sequence[str], None]

#: The axes a history follows by default: what changes between nightly runs of one sweep.
HISTORY_AXES = ("revision", "software")


def _parse_where(where: Where, what: str) -> dict[str, str]:
    if where is None:
        return {}
    if isinstance(where, Mapping):
        return {str(k): str(v) for k, v in where.items()}
    out = {}
    for item in ([where] if isinstance(where, str) else where):
        col, sep, value = str(item).partition("=")
        if not sep or not col.strip():
            raise ParadnnError(f"{what}: {item!r}; allowed: COLUMN=VALUE, e.g. dtype=bfloat16")
        out[col.strip()] = value.strip()
    return out


def select(df: pd.DataFrame, where: Where, what: str = "where") -> pd.DataFrame:
    """The rows of ``df`` whose columns equal the values of ``where`` (``{"dtype":
    "bfloat16"}`` or ``["dtype=bfloat16", "batch=64"]``; a number matches numerically, so
    ``batch=64`` matches 64.0). Raises ParadnnError for a column the frame lacks."""
    rows = df
    for col, value in _parse_where(where, what).items():
        if col not in rows.columns:
            raise ParadnnError(f"{what}: column {col!r} is not in the store; allowed: one of "
                               f"{', '.join(sorted(map(str, df.columns))[:40])}, ...")
        cells = rows[col]
        try:
            number = float(value)
        except ValueError:
            number = None
        match = cells.astype(str) == value
        if number is not None:
            match |= pd.to_numeric(cells, errors="coerce") == number
        rows = rows[match]
    return rows


def _frame(source: Source, what: str) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        return source
    if source is None:
        raise ParadnnError(f"compare: {what} is missing; allowed: a store path or a DataFrame")
    return load(source)


def _describe(source: Source, where: Where) -> str:
    if isinstance(source, pd.DataFrame):
        name = f"{len(source)} records"
    elif isinstance(source, (str, os.PathLike)):
        name = str(source)
    else:
        name = " + ".join(map(str, source))
    w = _parse_where(where, "where")
    return name + (" where " + ", ".join(f"{k}={v}" for k, v in w.items()) if w else "")


def compare(base: Source, new: Source | None = None, *, base_where: Where = None,
            new_where: Where = None, axis: str | Sequence[str] | None = None,
            threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA,
            level: float = LEVEL) -> CompareResult:
    """Compare NEW against BASE config by config (:func:`paradnn.analysis.compare.compare_frames`).

    ``base``/``new``: store paths (one or several) or DataFrames of ``paradnn.load``; ``new``
    None compares two selections of ``base`` (then ``new_where`` is required). ``base_where``
    and ``new_where`` select rows (:func:`select`). ``axis``: the axis or axes compared (names of
    :data:`AXES`, a comma-separated string or a sequence); None finds the one that differs.
    ``threshold`` (x) is the smallest slowdown called a regression, ``alpha`` the false-discovery
    rate. The result's ``source`` attribute names both sides.
    """
    if new is None and not new_where:
        raise ParadnnError("compare: NEW is missing; allowed: a second store, or new_where= "
                           "(--new-where COL=VALUE) to compare two selections of one store")
    df_base = _frame(base, "BASE")
    df_new = df_base if new is None else _frame(new, "NEW")
    a = select(df_base, base_where, "base_where")
    b = select(df_new, new_where, "new_where")
    for side, rows, where in (("BASE", a, base_where), ("NEW", b, new_where)):
        if rows.empty:
            raise ParadnnError(f"compare: {side} has no rows"
                               + (f" where {', '.join(f'{k}={v}' for k, v in _parse_where(where, side).items())}"
                                  if where else "")
                               + "; allowed: a store with records (and a selection that matches some)")
    result = compare_frames(a, b, axes=axis, threshold=threshold, alpha=alpha, level=level)
    result.source = (_describe(base, base_where), _describe(base if new is None else new, new_where))
    return result


# -- history --------------------------------------------------------------------------------------

@dataclass
class History:
    """Change points of a store's history. ``versions``: one row per version (oldest first:
    ``version`` label, ``revision``, ``first_utc``, ``configs`` and ``runs`` measured);
    ``steps``: one row per change point (``version`` and ``previous`` labels, ``index`` of the
    version, the config's join columns and ``label``, ``ratio`` (x, step time after / before)
    with ``ci_low``/``ci_high``, ``p`` (Bonferroni within the config), ``q``
    (Benjamini-Hochberg over every step found), ``noise``, ``verdict``); ``configs``: configs
    with at least two versions; ``notes``."""

    versions: pd.DataFrame
    steps: pd.DataFrame
    configs: int
    axes: tuple[str, ...]
    threshold: float
    alpha: float
    notes: list[str] = field(default_factory=list)
    source: str = ""

    def exit_code(self, allow_inconclusive: bool = False) -> int:
        """1 when the newest version has a regression step; 3 when it has an inconclusive one
        (unless ``allow_inconclusive``); else 0."""
        if self.steps.empty or self.versions.empty:
            return 0
        newest = self.steps[self.steps["index"] == len(self.versions) - 1]
        if (newest["verdict"] == "regression").any():
            return 1
        return 3 if not allow_inconclusive and (newest["verdict"] == "inconclusive").any() else 0


def _short(revision: Any) -> str:
    text = str(revision)
    if text.startswith("git:"):
        commit, _, dirty = text[4:].partition("+")
        return commit[:10] + ("+" + dirty if dirty else "")
    return text


def _measured(df: pd.DataFrame, what: str) -> pd.DataFrame:
    rows = df[(df["status"] == "ok") & (pd.to_numeric(df["step_time_s"], errors="coerce") > 0)] \
        if "status" in df.columns and "step_time_s" in df.columns else df.iloc[0:0]
    if rows.empty:
        raise ParadnnError(f"{what}: no ok rows with a step time; allowed: a store with measured "
                           "records")
    return rows


@dataclass(frozen=True)
class Versions:
    """The versions of a set of rows, oldest first: ``columns`` that make a version, one
    ``labels`` entry per version (short revision and the software values that change),
    ``revisions``, ``first_utc`` (ISO time of its first record) and, per row, ``index`` (its
    version's position)."""

    columns: list[str]
    labels: list[str]
    revisions: list[Any]
    first_utc: list[str | None]
    index: list[int]


def versions_of(rows: pd.DataFrame, axes: Sequence[str] = HISTORY_AXES) -> Versions:
    """Split ``rows`` into versions: one per combination of the values of the ``axes``
    columns (:data:`paradnn.analysis.compare.AXES`), ordered by the time of its first record."""
    cols_of = axis_columns([c for c in rows.columns if rows[c].notna().any()])
    vcols = [c for a in axes for c in cols_of[a]]
    if not vcols:
        raise ParadnnError(f"compare --history: the rows have no {', '.join(axes)} columns; "
                           "allowed: records that carry paradnn_revision or software versions")
    vkeys = config_keys(rows, vcols)
    times = pd.to_datetime(rows["time_utc"], utc=True, format="ISO8601", errors="coerce") \
        if "time_utc" in rows.columns else pd.Series(pd.NaT, index=rows.index)
    first: dict[tuple, Any] = {}
    for k, t in zip(vkeys, times):
        if k not in first or (pd.notna(t) and (pd.isna(first[k]) or t < first[k])):
            first[k] = t
    order = sorted(first, key=lambda k: (pd.isna(first[k]),
                                         first[k] if pd.notna(first[k]) else 0, str(k)))
    position = {k: i for i, k in enumerate(order)}
    varying = [c for j, c in enumerate(vcols) if len({k[j] for k in order}) > 1]

    def label(k: tuple) -> str:
        parts = []
        for c in varying:
            v = k[vcols.index(c)]
            if c == "paradnn_revision":
                parts.insert(0, _short(v))
            elif v is not None and c != "paradnn_version":
                parts.append(f"{c.replace('_version', '')} {fmt(v)}")
        return ", ".join(parts) or "the only version"

    rev = vcols.index("paradnn_revision") if "paradnn_revision" in vcols else None
    return Versions(vcols, [label(k) for k in order],
                    [k[rev] if rev is not None else None for k in order],
                    [first[k].isoformat() if pd.notna(first[k]) else None for k in order],
                    [position[k] for k in vkeys])


def history(source: Source, *, where: Where = None, axes: str | Sequence[str] = HISTORY_AXES,
            threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA,
            level: float = LEVEL) -> History:
    """Change points per config over the versions of ``source`` (a store or DataFrame holding
    several revisions of the same sweep; ``where`` selects rows as :func:`select`).

    A *version* is one combination of the values of the ``axes`` columns (by default the paradnn
    revision and the software versions); versions are ordered by the time of their first
    record. A config is the same computation with the same settings on the same platform
    (every configuration column but the axes'). Each config measured at two or more versions is
    segmented by :func:`paradnn.analysis.compare.change_points`; every step found is corrected
    with Benjamini-Hochberg over all configs and judged by the verdict rule of
    :func:`paradnn.analysis.compare.verdict` (``threshold``, ``alpha``).
    """
    chosen = parse_axes(axes) or HISTORY_AXES
    rows = _measured(select(_frame(source, "the store"), where, "where"), "compare --history")
    v = versions_of(rows, chosen)
    ccols = [c for c in config_columns([c for c in rows.columns if rows[c].notna().any()])
             if c not in v.columns]
    ckeys = config_keys(rows, ccols)
    index, order = v.index, v.labels
    by_config: dict[tuple, dict[int, list[int]]] = {}
    for pos, (ck, vi) in enumerate(zip(ckeys, index)):
        by_config.setdefault(ck, {}).setdefault(vi, []).append(pos)
    versions = pd.DataFrame({
        "version": order, "revision": v.revisions, "first_utc": v.first_utc,
        "configs": [sum(1 for per in by_config.values() if i in per) for i in range(len(order))],
        "runs": [index.count(i) for i in range(len(order))],
    })
    notes: list[str] = []
    if len(order) < 2:
        notes.append(f"the rows hold one version of {', '.join(chosen)}: no history to segment")
    steps: list[dict[str, Any]] = []
    multi = 0
    shown = [c for c in ccols if len({k[ccols.index(c)] for k in by_config}) > 1]
    for ck, per in by_config.items():
        if len(per) < 2:
            continue
        multi += 1
        idx = sorted(per)
        sides = [side_of(rows.iloc[per[i]]) for i in idx]
        sample = rows.iloc[per[idx[0]][0]]
        for st in change_points(sides, alpha=alpha, level=level):
            row = {c: sample[c] for c in shown}
            row.update(label=config_label(sample, shown), index=idx[st.index],
                       version=versions["version"][idx[st.index]],
                       previous=versions["version"][idx[st.index - 1]],
                       ratio=st.ratio, ci_low=st.ci_low, ci_high=st.ci_high, p=st.p,
                       noise=st.noise, method=st.method)
            steps.append(row)
    table = pd.DataFrame(steps)
    if len(table):
        table["q"] = benjamini_hochberg(table["p"])
        table["verdict"] = [verdict(r.ratio, r.ci_low, r.ci_high, r.q, r.noise, threshold, alpha)
                            for r in table.itertuples()]
        table = table[table["q"] < alpha].sort_values(["index", "ratio"], ascending=[True, False],
                                                      kind="mergesort").reset_index(drop=True)
    else:
        table = pd.DataFrame(columns=["label", "index", "version", "previous", "ratio", "ci_low",
                                      "ci_high", "p", "noise", "method", "q", "verdict"])
    if multi == 0 and len(order) >= 2:
        notes.append("no config was measured at two versions: the versions hold different "
                     "configs (a different sweep or settings)")
    return History(versions, table, multi, chosen, threshold, alpha, notes,
                   _describe(source, where) if not isinstance(source, pd.DataFrame) else "")


# -- rendering ------------------------------------------------------------------------------------

def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}" if np.isfinite(seconds) else "n/a"


def _marked(row: Any) -> str:
    """A config's label, marked where its two sides ran float32 matmuls at different measured
    precisions (the notes say which)."""
    return row.label + (" [matmul precision differs]" if getattr(row, "precision_differs", False) else "")


def _x(ratio: float) -> str:
    return f"{ratio:.3f}" if np.isfinite(ratio) else "n/a"


def _headline(result: CompareResult) -> str:
    c = result.counts()
    t = result.threshold
    if c["regression"]:
        head = f"{c['regression']} regression(s) beyond {t:g}x"
    elif c["inconclusive"]:
        # Never "no regression" where one of the threshold's size could not have been seen.
        head = (f"inconclusive: {c['inconclusive']} of {len(result.table)} configs could not be decided "
                f"(a {t:g}x regression there would not have been detected: too few timed calls or too "
                "much noise), no regression in the others")
        extra = [f"{c[v]} {v}" for v in ("improvement", "unchanged") if c[v]]
        return head + (f" ({', '.join(extra)})" if extra else "")
    else:
        head = f"no significant regression beyond {t:g}x"
    extra = [f"{c[v]} {v}" for v in ("improvement", "inconclusive", "unchanged") if c[v]]
    return head + f" in {len(result.table)} configs" + (f" ({', '.join(extra)})" if extra else "")


def _ordered(table: pd.DataFrame) -> pd.DataFrame:
    rank = {v: i for i, v in enumerate(VERDICTS)}
    return table.assign(_r=table["verdict"].map(rank)).sort_values(
        ["_r", "ratio"], ascending=[True, False], kind="mergesort").drop(columns="_r")


def _column_meanings(result: CompareResult) -> dict[str, str]:
    """What each column of the text and Markdown tables means, by a key of
    :data:`_TEXT_COLUMNS` / :data:`_MARKDOWN_COLUMNS`: the legend under a table is made from
    the columns it prints, so that it explains every one of them and nothing else."""
    t, a = result.threshold, result.alpha
    return {
        "verdict": (f"regression: ratio >= {t:g}, beyond the noise, and q < {a:g} or the whole "
                    f"interval beyond {t:g}; improvement: the same, faster (ratio <= {1 / t:.3g}); "
                    f"inconclusive: neither, but a change of {t:g}x cannot be ruled out; "
                    f"unchanged: the interval within {1 / t:.3g}-{t:g}"),
        "ratio": ("NEW/BASE step time (x; above 1 is slower), Hodges-Lehmann estimate on the "
                  "per-call step times"),
        "ci": (f"the ratio's {result.level:.0%} distribution-free interval (x; with repeats, "
               "widened to the t interval of the runs' medians)"),
        "q": ("p-value of a two-sided Mann-Whitney test of the calls (with repeats, also a t test "
              "of the runs: the larger p), Benjamini-Hochberg-adjusted over the configs compared"),
        "noise": "the config's own relative spread of step times (%)",
        "base": "BASE step time (ms, median of the runs)",
        "new": "NEW step time (ms, median of the runs)",
        "bound": ("roofline class: memory or compute (arithmetic intensity left or right of the "
                  "ridge of the records' own peaks), ? where a value is missing"),
        "config": ("the configuration (family, hyperparameters, batch); [matmul precision "
                   "differs] where its two sides ran float32 matmuls at different measured precisions"),
    }


#: The columns of the text table, in print order: (key of :func:`_column_meanings`, header,
#: width; a negative width left-aligns).
_TEXT_COLUMNS = (("verdict", "verdict", -12), ("ratio", "ratio", 6), ("ci", "{level:.0%} CI", 15),
                 ("q", "q", 7), ("noise", "noise", 6), ("base", "BASE ms", 8),
                 ("new", "NEW ms", 8), ("bound", "bound", -7), ("config", "config", 0))
#: The columns of the Markdown table, in print order: (key, header).
_MARKDOWN_COLUMNS = (("verdict", "verdict"), ("config", "config"), ("bound", "bound"),
                     ("ratio", "ratio (x)"), ("ci", "{level:.0%} CI (x)"), ("q", "q"),
                     ("noise", "noise"), ("base", "BASE (ms)"), ("new", "NEW (ms)"))


def _legend(result: CompareResult, columns: Sequence[tuple], bullet: str) -> list[str]:
    """One line per printed column, ``<bullet><header>: <meaning>``, in print order."""
    meaning = _column_meanings(result)
    return [f"{bullet}{c[1].format(level=result.level)}: {meaning[c[0]]}" for c in columns]


def text(result: CompareResult, rows: int | None = None) -> str:
    """The comparison for a terminal: headline, axis, localisation, one line per config
    (regressions first; at most ``rows``), notes."""
    src = result.source
    lines = [f"paradnn compare: {_headline(result)}",
             f"BASE {src[0]}", f"NEW  {src[1]}",
             f"axis: {result.axis_text}",
             f"where: {result.where.sentence}", ""]
    t = _ordered(result.table)
    if rows is not None:
        t = t.head(rows)
    lines.append(" ".join(f"{h.format(level=result.level):{'<' if w < 0 else '>'}{abs(w)}}"
                          for _, h, w in _TEXT_COLUMNS).rstrip())
    for r in t.itertuples():
        ci = f"{_x(r.ci_low)}-{_x(r.ci_high)}"
        lines.append(f"{r.verdict:<12} {_x(r.ratio):>6} {ci:>15} {r.q:>7.3g} "
                     f"{(r.noise * 100 if np.isfinite(r.noise) else float('nan')):>5.0f}% "
                     f"{_ms(r.base_s):>8} {_ms(r.new_s):>8} {str(r.bound or '?'):<7} {_marked(r)}")
    if rows is not None and len(result.table) > rows:
        lines.append(f"... {len(result.table) - rows} more (--json for all)")
    lines += ["", "columns:", *_legend(result, _TEXT_COLUMNS, "  ")]
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


#: Characters Markdown gives a meaning inside a line (emphasis, code, links, images, tables,
#: strike-through, escapes): backslash-escaped in text that comes from a store.
_MARKDOWN_SPECIAL = frozenset("\\`*_[]|~!")
#: HTML's special characters, written as entities: a Markdown renderer passes raw HTML through.
_HTML_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def md(value: Any) -> str:
    """``value`` as literal Markdown text on one line: HTML's special characters as entities
    (a ``<script>`` or ``onerror=`` in a store field stays text, as the HTML report escapes it)
    and Markdown's backslash-escaped (a ``|`` cannot end a table cell, a ``*`` starts no
    emphasis); line breaks become spaces (a newline would end a table row)."""
    text = " ".join(str(value).split())
    return "".join(_HTML_ENTITIES.get(ch) or ("\\" + ch if ch in _MARKDOWN_SPECIAL else ch)
                   for ch in text)


def markdown(result: CompareResult, rows: int = 30) -> str:
    """A Markdown summary a CI job can post: headline, axis, localisation, a table of the
    regressions, improvements and inconclusive configs (at most ``rows``), notes. Every text
    that comes from the stores (paths, values, labels, notes) is escaped (:func:`md`)."""
    src = result.source
    c = result.counts()
    icon = "FAIL" if c["regression"] else "OK"
    out = [f"### paradnn compare: {icon}: {_headline(result)}", "",
           f"- BASE: {md(src[0])}", f"- NEW: {md(src[1])}", f"- axis: {md(result.axis_text)}",
           f"- where: {md(result.where.sentence)}", ""]
    t = _ordered(result.table)
    shown = t[t["verdict"] != "unchanged"].head(rows)
    if len(shown):
        out += ["| " + " | ".join(h.format(level=result.level) for _, h in _MARKDOWN_COLUMNS) + " |",
                "|---|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in shown.itertuples():
            out.append(f"| {r.verdict} | {md(_marked(r))} | {md(r.bound or '?')} | {_x(r.ratio)} | "
                       f"{_x(r.ci_low)} - {_x(r.ci_high)} | {r.q:.3g} | "
                       f"{r.noise * 100:.0f}% | {_ms(r.base_s)} | {_ms(r.new_s)} |")
        if (t["verdict"] != "unchanged").sum() > rows:
            out.append(f"\n{int((t['verdict'] != 'unchanged').sum()) - rows} more not shown.")
        out.append("")
    out.append(f"{c['unchanged']} config(s) unchanged within {1 / result.threshold:.3g}x - "
               f"{result.threshold:g}x.")
    if len(shown):  # the legend of the table above, when there is one
        out += ["", "Columns:", *_legend(result, _MARKDOWN_COLUMNS, "- ")]
    if result.notes:
        out += [""] + [f"- note: {md(n)}" for n in result.notes]
    return "\n".join(out) + "\n"


def _native(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return float(v) if math.isfinite(float(v)) else None
    if isinstance(v, np.bool_):
        return bool(v)
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return v


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _native(v) for k, v in row.items()} for row in df.to_dict("records")]


def to_json(result: CompareResult, allow_inconclusive: bool = False) -> dict[str, Any]:
    """The comparison as plain JSON types: sources, axes and their values, join columns,
    threshold (x), alpha, counts per verdict, exit code, localisation (sentence and regions),
    one entry per config (ratios in x NEW/BASE step time, times in s), notes."""
    src = result.source
    return {
        "base": src[0], "new": src[1],
        "axes": list(result.join.axes), "values": {a: list(v) for a, v in result.join.values.items()},
        "on": result.join.on, "ignored": result.join.ignored,
        "threshold": result.threshold, "alpha": result.alpha, "level": result.level,
        "counts": result.counts(), "exit_code": result.exit_code(allow_inconclusive),
        "only_base": result.only_base, "only_new": result.only_new, "skipped_rows": result.skipped,
        "where": {"sentence": result.where.sentence, "regions": _records(result.where.regions)},
        "units": {"ratio": "x, NEW/BASE step time", "base_s": "s", "new_s": "s",
                  "noise": "1 (relative spread)"},
        "configs": _records(result.table),
        "notes": result.notes,
    }


def history_text(h: History) -> str:
    """The history for a terminal: the versions, then the change points by version."""
    lines = [f"paradnn compare --history: {len(h.steps)} change point(s) in {h.configs} configs "
             f"over {len(h.versions)} versions of {', '.join(h.axes)}"]
    lines.append(f"{'#':>3} {'first record (UTC)':<26} {'configs':>7} {'runs':>5}  version")
    for i, v in h.versions.iterrows():
        lines.append(f"{i:>3} {str(v['first_utc'])[:25]:<26} {v['configs']:>7} {v['runs']:>5}  {v['version']}")
    for i, v in h.versions.iterrows():
        at = h.steps[h.steps["index"] == i]
        if at.empty:
            continue
        lines.append(f"\nat {v['version']} (after {at['previous'].iloc[0]}):")
        for r in at.itertuples():
            lines.append(f"  {r.verdict:<12} {_x(r.ratio)}x ({_x(r.ci_low)}-{_x(r.ci_high)}), "
                         f"q {r.q:.3g}, noise {r.noise * 100:.0f}%, {r.method}  {r.label}")
    lines.append("\nratio: step time after / before the change point (x), from the runs of the "
                 "versions on each side: Hodges-Lehmann on their per-call times (method samples, "
                 "samples+runs), or their recorded medians and intervals where a version lacks "
                 "per-call times (method ci); q: Benjamini-Hochberg over every change point found")
    lines += [f"note: {n}" for n in h.notes]
    return "\n".join(lines)


def history_markdown(h: History) -> str:
    """The history as Markdown: versions and a table of change points (store texts escaped:
    :func:`md`)."""
    out = [f"### paradnn compare --history: {len(h.steps)} change point(s) in {h.configs} configs",
           "", "| # | version | first record (UTC) | configs |", "|---:|---|---|---:|"]
    out += [f"| {i} | {md(v['version'])} | {md(v['first_utc'])} | {v['configs']} |"
            for i, v in h.versions.iterrows()]
    if len(h.steps):
        out += ["", "| at version | config | verdict | ratio (x) | 95% CI (x) | q |",
                "|---|---|---|---:|---:|---:|"]
        out += [f"| {md(r.version)} | {md(r.label)} | {r.verdict} | {_x(r.ratio)} | {_x(r.ci_low)} - "
                f"{_x(r.ci_high)} | {r.q:.3g} |" for r in h.steps.itertuples()]
    out += [""] + [f"- note: {md(n)}" for n in h.notes]
    return "\n".join(out) + "\n"


def history_json(h: History, allow_inconclusive: bool = False) -> dict[str, Any]:
    """The history as plain JSON types."""
    return {"source": h.source, "axes": list(h.axes), "threshold": h.threshold, "alpha": h.alpha,
            "configs": h.configs, "versions": _records(h.versions), "steps": _records(h.steps),
            "exit_code": h.exit_code(allow_inconclusive), "notes": h.notes,
            "units": {"ratio": "x, step time after / before the change point"}}


class _CallableModule(types.ModuleType):
    """``paradnn.compare`` is this module and the function :func:`compare` at once: the
    package's lazy attribute and the submodule share the name, and importing the submodule
    rebinds the attribute to the module, so the module itself answers the call."""

    def __call__(self, *args: Any, **kwargs: Any) -> CompareResult:
        return compare(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
