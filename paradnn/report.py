"""A self-contained HTML report of a results store: every analysis the data supports.

>>> import paradnn
>>> from paradnn.report import write_report
>>> write_report(paradnn.load("results.db"), "report/")   # doctest: +SKIP
PosixPath('report/index.html')

:func:`plan` decides which analyses a DataFrame supports and builds them (figures, captions,
tables); :func:`write_report` renders the plan as one HTML file with the figures embedded as
base64 PNG, so it can be mailed or archived without its folder. Analyses the data cannot
support are listed with the data they need, the command or sweep file that supplies it and
its estimated time on the store's platform. Runs that missed their precision target
(``stable`` False) are marked in every figure and left out of regressions and speedup
summaries; runs with physics warnings are marked and listed in a Warnings section.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from paradnn import analysis as A
from paradnn import families
from paradnn import plots as P
from paradnn import plots_extra as PX
from paradnn.analysis._common import (
    FAMILY_FIELDS, PLATFORM_KEY, SOFTWARE_KEY, SPEC_FIELDS, drop_unstable, fmt, headline_utilization,
    hyperparameters, label, ok_rows, platform_label, present, unit, unstable_mask, warning_lists,
    warning_meaning, workload_label,
)
from paradnn.analysis.cost import duration, estimate_seconds
from paradnn.analysis.framework import DEFAULT_FRAMEWORK, framework_of, frameworks, with_framework
from paradnn.analysis.sensitivity import MIN_ROWS
from paradnn.errors import ParadnnError

# The parameterized families, their heat-map width axis and the small grid the report suggests
# when a family has too few runs (3 x 4 = 12 configs, above the 8 ok runs a regression needs),
# all read from the family registry (paradnn.families) at use time. A suggested grid's fixed
# values are replaced by the store's own where it has runs of the family, so new runs join old.
GENERATED = families.FieldsView(lambda: tuple(families.generated()))
_WIDTH = families.RegistryView(lambda f: f.width)
MAX_TABLE_ROWS = 60
MAX_WARNING_ROWS = 40
SUGGESTED_GRIDS = families.RegistryView(lambda f: f.suggested_grid)
SMOKE_SWEEP = "sweeps/smoke.yaml"  # five tiny configs, seconds on a CPU


@dataclass
class Item:
    caption: str
    # A Figure, or a function making it: figures are drawn only when the page is rendered, so
    # deciding what a store supports (plan, supported) stays cheap.
    figure: object | None = None
    table: pd.DataFrame | None = None

    def make_figure(self):
        return self.figure() if callable(self.figure) else self.figure


@dataclass
class Section:
    id: str  # stable name, e.g. "heatmap:fc"
    title: str
    items: list[Item] = field(default_factory=list)


@dataclass
class Unsupported:
    """An analysis the store cannot support: what it needs, and how to get it."""

    id: str
    title: str
    needs: str
    command: str = ""  # the exact command(s) to run, shell syntax
    sweep_file: str = ""  # a sweep file to write first (YAML), named in ``command``; or ""
    change: str = ""  # a change to an existing sweep file, in words, when that is the way
    configs: int = 0  # configurations the command measures
    seconds: float = float("nan")  # estimated time of the command on the store's platform
    basis: str = ""  # what the estimate rests on

    @property
    def estimate(self) -> str:
        if not self.configs:
            return ""
        n = f"{self.configs} config" + ("s" if self.configs != 1 else "")
        return f"about {duration(self.seconds)} for {n} ({self.basis})"


# Fractions that are not of a peak (analysis._common.unit reads every *utilization column as
# a fraction of the device's peak FLOP/s, and a unit of 1 as a count).
_FRACTIONS = {"host_cpu_utilization": "fraction of the host's cores",
              "device_busy_fraction": "fraction of the timed window"}


def _table_units(df: pd.DataFrame) -> pd.DataFrame:
    """Column headers with their units: ``examples_per_sec [examples/s]``."""
    names = {}
    for c in df.columns:
        u = _FRACTIONS.get(str(c)) or unit(str(c))
        names[c] = f"{c} [{u}]" if u and u not in ("count",) else str(c)
    return df.rename(columns=names)


_SETTING_COLUMNS = (*PLATFORM_KEY, *SOFTWARE_KEY, "framework", "dtype", "optimizer", "devices")


def _setting(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Rows of the most common platform, software, dtype and optimizer (one setting), so an
    analysis over hyperparameters does not mix platforms."""
    chosen = {}
    for c in _SETTING_COLUMNS:
        if c in rows.columns and rows[c].dropna().nunique() > 1:
            v = rows[c].value_counts().index[0]
            chosen[c] = v
            rows = rows[rows[c] == v]
    return rows, chosen


def _settings_counts(rows: pd.DataFrame) -> str:
    """``float32 on cpu: 6, bfloat16 on cpu: 6``: runs per setting (dtype and platform)."""
    if rows.empty:
        return "none"
    cols = [c for c in _SETTING_COLUMNS if c in rows.columns and rows[c].notna().any()]
    if not cols:
        return str(len(rows))
    parts = []
    for _, g in rows.groupby(cols, dropna=False, sort=True):
        r = g.iloc[0]
        where = platform_label(r) if present(g, PLATFORM_KEY) else ""
        parts.append(f"{r.get('dtype', '?')}{' on ' + where if where else ''}: {len(g)}")
    return ", ".join(parts)


def _platforms(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    if not present(rows, PLATFORM_KEY):
        return [("", rows)]
    labels = rows.apply(platform_label, axis=1)
    return [(p, rows[labels == p]) for p in sorted(labels.unique())]


def _platforms_and_frameworks(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """:func:`_platforms`, each split by framework when ``rows`` hold several (``CPU,
    tensorflow``): a figure of one platform never mixes frameworks."""
    if len(frameworks(rows)) < 2:
        return _platforms(rows)
    out = []
    for plat, prow in _platforms(rows):
        fw = framework_of(prow)
        for name in frameworks(prow):
            out.append((f"{plat}, {name}" if plat else name, prow[fw == name]))
    return out


def _metric(rows: pd.DataFrame, *names: str) -> str | None:
    for n in names:
        if n in rows.columns and pd.to_numeric(ok_rows(rows)[n], errors="coerce").notna().any():
            return n
    return None


def _n(count: int, noun: str) -> str:
    """``1 run``, ``4 runs``."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


_PANEL_NAMES = {"backend": "platform", "device_platform": "platform", "device_kind": "platform",
                "device_count": "platform",
                "jax_version": "jax version", "jaxlib_version": "jax version",
                "tf_version": "tf version", "xla_flags": "XLA flags"}


def _panel_words(columns: list[str]) -> str:
    return ", ".join(dict.fromkeys(_PANEL_NAMES.get(c, c) for c in columns))


def _marks(rows: pd.DataFrame) -> tuple[int, int]:
    """(unstable ok runs, ok runs with a physics warning) among ``rows``."""
    ok = ok_rows(rows)
    return int(unstable_mask(ok).sum()), int(warning_lists(ok).map(bool).sum())


def _marks_text(rows: pd.DataFrame, unstable_how: str, flagged_how: str) -> str:
    n_u, n_f = _marks(rows)
    parts = []
    if n_u:
        parts.append(f"{_n(n_u, 'unstable run')} (timing missed its precision target) {unstable_how}")
    if n_f:
        parts.append(f"{_n(n_f, 'run')} with a physics warning {flagged_how} (see Warnings)")
    return ("; ".join(parts) + ". ") if parts else ""


def _utilization_note(rows: pd.DataFrame, headline: str) -> str:
    """How the XLA-executed utilization compares with the headline (useful FLOPs) one."""
    if headline != "model_flops_utilization" or "flops_utilization" not in rows.columns:
        return ("Utilization from XLA's executed FLOPs (this store has no analytic "
                "model_flops_utilization). " if headline == "flops_utilization" else "")
    ok = ok_rows(rows)
    ratio = (pd.to_numeric(ok["flops_utilization"], errors="coerce")
             / pd.to_numeric(ok["model_flops_utilization"], errors="coerce")).dropna()
    if ratio.empty:
        return ""
    return (f"Headline: model FLOPS utilization (useful, analytic FLOPs, the MFU convention); "
            f"XLA's executed-FLOPs utilization (flops_utilization) is {ratio.median():.2f}x it "
            f"(median over {len(ratio)} runs, range {ratio.min():.2f}x-{ratio.max():.2f}x). ")


# -- the analyses: each returns Section(s) or raises _Missing(needs, how) -------------------

class _Missing(Exception):
    def __init__(self, needs: str, how: dict | None = None):
        super().__init__(needs)
        self.how = how or {}


def _params(df: pd.DataFrame) -> list[Section]:
    if _metric(df, "params") is None:
        raise _Missing("ok runs with the params metric", {"smoke": True})
    pr = A.params_range(df)
    return [Section("params_range", "Model sizes (ParaDnn Fig 1)", [Item(
        "Trainable parameters of every measured model: generated families as ranges "
        "(bar from the smallest to the largest, tick at the median)"
        + (", real models as points" if (pr["kind"] == "real").any() else "") + ". "
        "Source: params metric of the ok runs (counted from parameter shapes).",
        lambda: P.params_range(pr), pr)])]


def _heatmaps(df: pd.DataFrame, family: str) -> list[Section]:
    rows = df[df["family"] == family] if "family" in df.columns else df.iloc[0:0]
    measured = rows[rows["status"].isin(("ok", "oom"))] if "status" in rows.columns else rows
    hp = hyperparameters(measured, family)
    head = headline_utilization(ok_rows(measured))
    metrics = [m for m in (head, "examples_per_sec") if m and _metric(measured, m)]
    if len(hp) < 2 or not metrics:
        raise _Missing(f"{family.upper()} runs (ok or oom) varying two hyperparameters "
                       f"(has {hp or 'none'}) with a utilization or examples_per_sec",
                       {"grid": family})
    x = "batch" if "batch" in hp else hp[0]
    width = _WIDTH.get(family)
    others = sorted((h for h in hp if h != x), key=lambda h: -measured[h].nunique())
    y = width if width in hp and width != x else others[0]
    section = Section(f"heatmap:{family}", f"{family.upper()} heat maps (ParaDnn Fig 2a-c, Fig 7)")
    for m in metrics:
        hm = A.heatmap(measured, x, y, m, panels=True)
        fixed = ", ".join(f"{k}={fmt(v)}" for k, v in hm.attrs["fixed"].items())
        split = hm.attrs["panel_columns"]
        n_u = int(hm["unstable"].sum())
        over = pd.to_numeric(hm[m], errors="coerce") > 1 + 1e-9 if m.endswith("utilization") \
            else pd.Series(False, index=hm.index)
        n_w, n_o = int((hm["warnings"] != "").sum()), int(over.sum())
        n_f = int(((hm["warnings"] != "") | over).sum())
        marks = []
        if n_u:
            marks.append(f"{_n(n_u, 'cross-hatched cell')} rest on unstable runs only (timing "
                         "missed its precision target; they do not set the colour scale)")
        if n_f:
            why = ([f"{n_w} with a physics warning (see Warnings)"] if n_w else []) + (
                [f"{n_o} with a utilization above 1, which is impossible: the peak used is too "
                 "low or the FLOPs are overcounted"] if n_o else [])
            marks.append(f"{_n(n_f, 'cell')} framed red and marked !: {'; '.join(why)}")
        section.items.append(Item(
            f"{label(m)} of {family.upper()} models over {x} and {y} (log2 axes), "
            + (f"one panel per {_panel_words(split)}" if split else "one map")
            + f"; other settings fixed: {fixed or 'none'}. One shared log colour scale; cell "
            "labels in one format (k = thousand, M = million). White cells marked OOM ran out "
            "of device memory; light grey cells were not measured. "
            + (("; ".join(marks) + ". ") if marks else "")
            + (_utilization_note(measured, m) if m.endswith("utilization") else "")
            + "Source: median of the ok runs per cell (stable runs where there are any).",
            lambda hm=hm: P.heatmap(hm), hm))
    return [section]


def _sensitivities(df: pd.DataFrame, family: str) -> list[Section]:
    all_ok = ok_rows(df[df["family"] == family]) if "family" in df.columns else df.iloc[0:0]
    steady, n_unstable = drop_unstable(all_ok)
    rows, chosen = _setting(steady)
    target = headline_utilization(rows) or _metric(rows, "examples_per_sec")
    feats = hyperparameters(rows, family)
    need = max(MIN_ROWS, len(feats) + 2)
    if target is None or not feats or len(rows) < need:
        left = f"; {n_unstable} unstable runs left out" if n_unstable else ""
        raise _Missing(
            f"at least {need} stable ok {family.upper()} runs of one dtype on one platform varying "
            f"at least one hyperparameter (has {_settings_counts(steady)}{left}; varying "
            f"{feats or 'none'})", {"grid": family, "unstable": n_unstable})
    s = A.sensitivity(rows, target, feats, log2=True)
    setting = ", ".join(f"{k}={fmt(v)}" for k, v in chosen.items())
    left = s.attrs.get("unstable_excluded", 0) + n_unstable
    return [Section(f"sensitivity:{family}", f"{family.upper()} sensitivity (ParaDnn Fig 2d-f)", [Item(
        f"Standardized linear-regression weights of {target} on log2 of the {family.upper()} "
        f"hyperparameters ({s.attrs['n']} stable ok runs{', ' + setting if setting else ''}"
        + (f"; {left} unstable runs left out" if left else "") + f"); R^2 = "
        f"{s.attrs['r2']:.2f}; error bars: 95% bootstrap interval over runs ({s.attrs['bootstrap']} "
        "resamples). A positive weight means the metric grows with the hyperparameter.",
        lambda: P.sensitivity(s), s)])]


def _roofline(df: pd.DataFrame) -> list[Section]:
    need = ("flops_per_sec", "arithmetic_intensity", "peak_flops", "peak_bytes_per_sec")
    rows = ok_rows(df)
    if not all(c in rows.columns for c in need) or rows[list(need)].apply(
            pd.to_numeric, errors="coerce").dropna().empty:
        raise _Missing("ok runs with flops_per_sec, arithmetic_intensity and the device peaks "
                       "(peak_flops, peak_bytes_per_sec)", {"smoke": True, "probe": True})
    rf = A.roofline(rows.dropna(subset=list(need)))
    section = Section("roofline", "Roofline, model level (ParaDnn Fig 3a, 3c)")
    for plat, prow in _platforms_and_frameworks(rf):
        sources = sorted(set(prow["peak_source"].dropna())) if "peak_source" in prow else []
        methods = sorted(set(prow["peak_method"].dropna())) if "peak_method" in prow else []
        counts = prow["bound"].value_counts().to_dict()
        has_real = bool((prow.get("kind", pd.Series(dtype=object)) == "real").any())
        table = prow[[c for c in ("family", "model", *SPEC_FIELDS[:-1], "batch", "dtype",
                                  "arithmetic_intensity", "flops_per_sec", "roof_flops_per_sec",
                                  "bound", "roof_fraction", "stable", "warnings") if c in prow.columns]]
        table = table.loc[:, table.notna().any()]
        section.items.append(Item(
            f"Achieved FLOP/s (XLA-counted) against arithmetic intensity{' on ' + plat if plat else ''}; "
            f"one roof per dtype, labelled with its dtype and peak source "
            f"({'vendor spec sheet' if sources == ['spec'] else 'measured by paradnn probe' if sources == ['measured'] else 'see legend'}"
            + (f"; method: {'; '.join(methods)}" if methods else "") + "). "
            f"{counts.get('memory', 0)} runs memory-bound, {counts.get('compute', 0)} compute-bound. "
            "Marker shape: family; colour: dtype"
            + ("; stars: real models" if has_real else "") + ". "
            + _marks_text(prow, "drawn hollow", "ringed red")
            + (f"{_n(above, 'run')} above its roof (roof_fraction > 1, ringed red): impossible, "
               "so the peak used is too low or the FLOPs are overcounted; do not publish these. "
               if (above := int((pd.to_numeric(prow['roof_fraction'], errors='coerce') > 1 + 1e-9).sum()))
               else "")
            + "roof_fraction = achieved / roof at that intensity.",
            lambda prow=prow, plat=plat: P.roofline(prow, title=f"roofline{' - ' + plat if plat else ''}"),
            table))
    return [section]


def _ci_text(summary: dict) -> str:
    if summary["n"] < 2 or summary["ci_low"] != summary["ci_low"]:
        return f"geometric mean {summary['geomean']:.2f}x (no interval: fewer than 2 workloads)"
    return (f"geometric mean {summary['geomean']:.2f}x, {summary['ci']:.0%} CI "
            f"{summary['ci_low']:.2f}x-{summary['ci_high']:.2f}x (bootstrap over workloads)")


def _speedups(df: pd.DataFrame) -> tuple[list[Section], list[Unsupported]]:
    comps = A.comparisons(df, kinds=("platform", "dtype", "software"))
    sections, missing = [], []
    needs = {
        "platform": "ok runs of the same workloads on two platforms (e.g. two stores merged)",
        "dtype": "ok runs of the same workloads in float32 and in a reduced precision on one platform",
        "software": "ok runs of the same workloads under two software versions (jax/tf) on one platform",
    }
    for kind, title in (("platform", "Speedup between platforms (ParaDnn Fig 8-11)"),
                        ("dtype", "Speedup from reduced precision (ParaDnn Fig 12)"),
                        ("software", "Speedup between software versions (ParaDnn Fig 12)")):
        mine = [c for c in comps if c.kind == kind]
        if not mine:
            missing.append(Unsupported(f"speedup:{kind}", title, needs[kind]))
            continue
        section = Section(f"speedup:{kind}", title)
        for c in mine:
            sp = A.speedup_of(c)  # the summary: stable runs only
            shown = A.speedup_of(c, include_unstable=True)  # the figure: every point, marked
            if sp.empty:
                section.items.append(Item(
                    f"Speedup of {c.a} over {c.b}: every common workload rests on unstable runs "
                    f"({sp.attrs['unstable_excluded']} runs left out), so no claim is made.",
                    lambda shown=shown: P.speedup(shown), shown))
                continue
            summ = A.speedup_summary(sp)
            left = summ["unstable_excluded"]
            has_real = bool((sp.get("kind", pd.Series(dtype=object)) == "real").any())
            table = sp[[col for col in ("label", "params", "batch", "examples_per_sec_a",
                                        "examples_per_sec_b", "speedup") if col in sp.columns]]
            section.items.append(Item(
                f"Speedup of {c.a} over {c.b}: ratio of examples/s on the same workload "
                f"({summ['n']} workloads, {_ci_text(summ)}, {summ['faster']:.0%} faster on {c.a})"
                + (f"; {left} unstable runs left out of this summary and drawn hollow" if left else "")
                + ". Marker shape: family; colour: batch"
                + ("; stars: real models" if has_real else "") + ".",
                lambda shown=shown: P.speedup(shown), table.sort_values("speedup")))
            fr = A.family_ranges(sp, "speedup")
            section.items.append(Item(
                f"Speedup of {c.a} over {c.b} per family (range and median)"
                + (" and per real model" if has_real else "") + " (ParaDnn Fig 11 top)"
                + (f"; {left} unstable runs left out" if left else "") + ".",
                lambda fr=fr: P.family_ranges(fr, log=True), fr))
            gen = sp[sp.get("kind", pd.Series("generated", index=sp.index)) != "real"]
            for fam in GENERATED:
                frows = gen[gen["family"] == fam] if "family" in gen.columns else gen.iloc[0:0]
                feats = hyperparameters(frows, fam)
                if feats and len(frows) >= max(MIN_ROWS, len(feats) + 2):
                    s = A.sensitivity(frows, "speedup", feats, log2=True)
                    section.items.append(Item(
                        f"Sensitivity of the {fam.upper()} speedup of {c.a} over {c.b} to its "
                        f"hyperparameters (standardized weights on log2 values, {s.attrs['n']} "
                        f"workloads of stable runs, R^2 = {s.attrs['r2']:.2f}, error bars: 95% "
                        "bootstrap interval; ParaDnn Fig 8a, 9a, 10a, 10d).",
                        lambda s=s: P.sensitivity(s), s))
        sections.append(section)
    return sections, missing


def _utilization(df: pd.DataFrame) -> list[Section]:
    rows = ok_rows(df)
    value = headline_utilization(rows)
    if value is None:
        raise _Missing("ok runs with model_flops_utilization or flops_utilization", {"smoke": True})
    where = rows.apply(platform_label, axis=1) if len(rows) else pd.Series(dtype=object)
    if len(frameworks(rows)) > 1:  # one range per platform and framework, never mixed
        where = where + ", " + framework_of(rows).astype(str)
    rows = rows.assign(platform=where)
    ur = A.family_ranges(rows, value, by="platform")
    left = ur.attrs.get("unstable_excluded", 0)
    if ur.empty:  # every run missed its precision target: nothing trustworthy to draw
        raise _Missing(f"stable ok runs with {value} ({left} unstable runs left out; measure them "
                       "again with `paradnn sweep FILE --remeasure-unstable`)", {"smoke": True})
    return [Section("utilization", "FLOPS utilization per family and platform (ParaDnn Fig 11 bottom)", [Item(
        f"{label(value)} (achieved FLOP/s over the device's peak for the dtype) per family and "
        "platform: ranges over the generated models"
        + (", points for real models" if (ur["kind"] == "real").any() else "") + ". "
        + (f"{left} unstable runs left out. " if left else "")
        + _utilization_note(rows, value), lambda: P.utilization_comparison(ur), ur)])]


def _saturation(df: pd.DataFrame) -> list[Section]:
    if _metric(df, "examples_per_sec") is None or "batch" not in df.columns:
        raise _Missing("ok runs with examples_per_sec", {"smoke": True})
    curves = A.saturation(df)
    if curves.empty:
        raise _Missing("a model (same spec, dtype, platform, software) measured at two or more "
                       "batch sizes", {"batches": True})
    summary = A.saturation_summary(curves)
    n_u = int(curves["unstable"].sum())
    return [Section("saturation", _SATURATION_TITLE, [Item(
        f"Throughput relative to each model's best against batch; the diamond marks the smallest "
        f"batch reaching {curves.attrs['threshold']:.0%} of the best throughput "
        f"({len(summary)} models; each with its own marker and line style, drawn slightly "
        "offset along the batch axis so that coinciding curves stay visible)"
        + (f"; {n_u} hollow points rest on unstable runs only" if n_u else "") + ". The "
        "saturation batch follows the TBD benchmark suite (Training Benchmark for DNNs, "
        "Zhu et al. 2018).", lambda: P.saturation(curves), summary)])]


_SATURATION_TITLE = "Batch-size saturation (as in the TBD benchmark suite)"
FRAMEWORKS_TITLE = "Frameworks: speedup of one framework over another (ParaDnn Fig 12 style, TBD)"
MEMORY_TITLE = "Memory breakdown by model and batch (TBD Fig 8)"
ENERGY_TITLE = "Power and energy per example by model and batch"
HOST_TITLE = "Host CPU and device utilization by model and batch (TBD)"


def _frameworks(df: pd.DataFrame) -> list[Section]:
    ok = ok_rows(df)
    names = frameworks(ok) if len(ok) else []
    if len(names) < 2:
        raise _Missing(f"ok runs of the same workloads under two frameworks on one platform "
                       f"(has {', '.join(names) or 'no ok runs'})", {"framework": True})
    comps = A.comparisons(df, kinds=("framework",))
    if not comps:
        raise _Missing(f"ok runs of the same workloads under two frameworks on one platform "
                       f"(has {', '.join(names)}, but no workload measured under two of them "
                       "on one platform)", {"framework": True})
    section = Section("frameworks", FRAMEWORKS_TITLE)
    for c in comps:
        sp = A.speedup_of(c)  # the summary: stable runs only
        shown = A.speedup_of(c, include_unstable=True)  # the figure: every point, marked
        if sp.empty:
            section.items.append(Item(
                f"Speedup of {c.a} over {c.b}: every common workload rests on unstable runs "
                f"({sp.attrs['unstable_excluded']} runs left out), so no claim is made.",
                lambda shown=shown: P.speedup_by_config(shown), shown))
            continue
        summ = A.speedup_summary(sp)
        left = summ["unstable_excluded"]
        table = sp[[col for col in ("label", "batch", "params", "examples_per_sec_a",
                                    "examples_per_sec_b", "speedup") if col in sp.columns]]
        section.items.append(Item(
            f"Speedup of {c.a} over {c.b}: examples/s under the first framework over examples/s "
            f"under the second, per configuration (same model, batch, dtype, optimizer and "
            f"devices on the same device; medians of repeats), grouped by family. "
            f"{summ['n']} configurations, {_ci_text(summ)} (grey line and band), "
            f"{summ['faster']:.0%} faster under {c.a.split(' on ')[0]}; dashed line: 1x"
            + (f"; {left} unstable runs left out of this summary and drawn hollow" if left else "")
            + ". Source: examples_per_sec of the ok runs; each framework's time is its own "
            "compiled training step under the same timing protocol.",
            lambda shown=shown, summ=summ: P.speedup_by_config(shown, summ),
            table.sort_values("speedup")))
    return [section]


def _has(rows: pd.DataFrame, *metrics: str) -> bool:
    """Whether some row has every one of ``metrics`` (numeric, not null)."""
    if rows.empty or not all(m in rows.columns for m in metrics):
        return False
    return bool(rows[list(metrics)].apply(pd.to_numeric, errors="coerce").notna().all(axis=1).any())


def _memory(df: pd.DataFrame) -> list[Section]:
    ok = ok_rows(df)
    if not _has(ok, "memory_weights_bytes", "memory_activations_bytes"):
        raise _Missing("ok runs with the memory breakdown metrics (memory_weights_bytes, "
                       "memory_gradients_bytes, memory_optimizer_bytes, memory_activations_bytes, "
                       "memory_workspace_bytes); runs recorded before the breakdown existed lack "
                       "them, every run of this paradnn version records them", {"smoke": True})
    rows = ok.dropna(subset=["memory_weights_bytes", "memory_activations_bytes"])
    table = rows.assign(model=PX.model_names(rows))[
        [c for c in ("model", "batch", *PX.MEMORY_PARTS, "memory_peak_bytes") if c in rows.columns
         or c == "model"]].sort_values(["model", "batch"])
    share = (pd.to_numeric(rows["memory_activations_bytes"], errors="coerce")
             / rows[list(PX.MEMORY_PARTS)].apply(pd.to_numeric, errors="coerce").sum(axis=1)).dropna()
    return [Section("memory", MEMORY_TITLE, [Item(
        "Memory per device of one training step in five parts, one bar per model and batch "
        "(GiB; mean over repeats): weights (parameters and model state), weight gradients, "
        "optimizer state, feature maps (activations kept for the backward pass) and workspace "
        "(the rest of the compiled total); the percentage above a bar is the feature maps' share. "
        f"Feature maps are {share.median():.0%} of the total in the median run "
        f"(range {share.min():.0%}-{share.max():.0%}, {_n(len(share), 'run')}). Source: "
        "memory_* metrics (weights and optimizer state from shapes, feature maps from the "
        "residuals JAX's autodiff saves, the total from XLA's memory analysis of the compiled "
        "step).", lambda: PX.memory_breakdown(rows), table)])]


def _energy(df: pd.DataFrame) -> list[Section]:
    ok = ok_rows(df)
    measured = ok[(ok["energy_source"] != "unavailable")] if "energy_source" in ok.columns else ok.iloc[0:0]
    if not _has(measured, "power_w", "energy_per_example_j"):
        notes = sorted({str(n) for n in ok.get("energy_note", pd.Series(dtype=object)).dropna()})
        raise _Missing(
            "ok runs with a measured energy (energy_source nvml or nvml-power on an NVIDIA GPU, "
            "rapl on a CPU host with readable RAPL counters)"
            + (f"; the runs here say: {'; '.join(notes[:3])}" if notes else
               "; these runs predate the energy metrics"), {"energy": True})
    rows = measured.dropna(subset=["power_w"])
    sources = ", ".join(sorted(rows["energy_source"].astype(str).unique()))
    left = len(ok) - len(rows)
    table = rows.assign(model=PX.model_names(rows))[
        [c for c in ("model", "batch", "power_w", "energy_per_example_j", "energy_per_step_j",
                     "examples_per_joule", "energy_source", "meter_window_s")
         if c in rows.columns or c == "model"]].sort_values(["model", "batch"])
    return [Section("energy", ENERGY_TITLE, [Item(
        "Average power (W) and energy per example (J/example) over the timed window against the "
        f"batch, one line per model (median over repeats). Source: energy counters ({sources}) "
        "read around the timed window: energy / wall time, energy / examples"
        + (f"; {_n(left, 'ok run')} without a measured energy left out" if left else "") + ".",
        lambda: PX.energy(ok), table)])]


def _host_utilization(df: pd.DataFrame) -> list[Section]:
    ok = ok_rows(df)
    have = [m for m in PX.UTILIZATION_METRICS if _has(ok, m)]
    if not have:
        raise _Missing("ok runs with host_cpu_utilization (from /proc/stat, Linux hosts) or "
                       "device_busy_fraction (from a profiler trace on a GPU/TPU); these runs "
                       "predate them or ran where neither was readable", {"smoke": True})
    rows = ok[ok[have].apply(pd.to_numeric, errors="coerce").notna().any(axis=1)]
    table = rows.assign(model=PX.model_names(rows))[
        [c for c in ("model", "batch", *PX.UTILIZATION_METRICS, "host_cpu_utilization_per_core",
                     "meter_window_s") if c in rows.columns or c == "model"]].sort_values(["model", "batch"])
    missing = [m for m in PX.UTILIZATION_METRICS if m not in have]
    notes = sorted({str(n) for n in ok.get("device_busy_note", pd.Series(dtype=object)).dropna()})
    why = (f" No run has {missing[0]}" + (f" ({'; '.join(notes[:2])})" if notes and
                                          missing[0] == "device_busy_fraction" else "") + "."
           if missing else "")
    return [Section("host_utilization", HOST_TITLE, [Item(
        "Over the timed window, against the batch, one line per model (median over repeats): "
        "host CPU utilization (fraction of all the host's cores busy, from /proc/stat) and "
        "device busy fraction (union of kernel times over the window, from a profiler trace)."
        + why, lambda: PX.utilization(ok), table)])]


def _oplevel(ops: pd.DataFrame | None) -> list[Section]:
    if ops is None or ops.empty:
        raise _Missing("a per-operation profile of one configuration (`paradnn profile ...`, "
                       "paradnn.profile.capture); a store holds whole-step records only",
                       {"profile": True})
    pf, pb = ops.attrs.get("peak_flops"), ops.attrs.get("peak_bytes_per_sec")
    items = []
    note = ops.attrs.get("note", "")
    br = A.op_breakdown(ops)
    items.append(Item(f"Share of step time per operation category. {note}", lambda: P.op_breakdown(br), br))
    if pf and pb:
        orf = A.op_roofline(ops, pf, pb)
        items.append(Item(
            f"Operations above 1% of the step time with FLOPs, on the roof of the device "
            f"({ops.attrs.get('peak_source', 'given')} peak). {note}", lambda: P.op_roofline(orf),
            A.top_ops(orf)))
    else:
        items.append(Item(f"Top operations by time (no device peaks given, so no roof). {note}",
                          None, A.top_ops(ops)))
    return [Section("oplevel", "Roofline, operation level (ParaDnn Fig 3b, 3d)", items)]


# -- how to supply a missing analysis --------------------------------------------------------

def _yaml_value(v: Any) -> str:
    return "[" + ", ".join(_yaml_value(x) for x in v) + "]" if isinstance(v, (list, tuple)) else fmt(v)


def _sweep_yaml(description: str, family: str, fixed: dict, axes: dict, dtypes: list[str],
                settings: dict | None = None) -> str:
    def mapping(d: dict) -> str:
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in d.items()) + "}"

    return (f"description: {description}\nfamily: {family}\nfixed: {mapping(fixed)}\n"
            f"axes: {mapping(axes)}\ndtypes: {_yaml_value(dtypes)}\n"
            + (f"settings: {mapping(settings)}\n" if settings else ""))


MAX_REPLAY_PARTS = 24  # beyond this a listed sweep file is no help to a reader


def _replay_yaml(rows: pd.DataFrame, dtype: str, settings: dict,
                 framework: str | None = None) -> tuple[str, int] | None:
    """A sweep file that measures the generated workloads of ``rows`` again in ``dtype`` (and
    under ``framework`` when given): one part per model with its batches. ``(yaml, configs)``,
    or None when there are too many models to list (or none)."""
    parts = []
    gen = rows[rows["family"].isin(GENERATED)] if "family" in rows.columns else rows.iloc[0:0]
    for family, g in gen.groupby("family", sort=True):
        fields = [f for f in FAMILY_FIELDS[family] if f in g.columns and g[f].notna().any()]
        for key, gg in g.groupby(fields, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            fixed = dict(zip(fields, key))
            if framework is not None:
                fixed["framework"] = framework
            parts.append((family, fixed, sorted(gg["batch"].dropna().unique())))
    if not parts or len(parts) > MAX_REPLAY_PARTS:
        return None

    def mapping(d: dict) -> str:
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in d.items()) + "}"

    lines = [f"description: the store's workloads again, in {dtype}"
             + (f" under {framework}" if framework else ""), "parts:"]
    for family, fixed, batches in parts:
        lines += [f"  - family: {family}", f"    fixed: {mapping(fixed)}",
                  f"    axes: {{batch: {_yaml_value(batches)}}}", f"    dtypes: [{dtype}]"]
    if settings:
        lines.append(f"settings: {mapping(settings)}")
    return "\n".join(lines) + "\n", sum(len(b) for _, _, b in parts)


def _store_settings(ok: pd.DataFrame) -> dict:
    """The measurement settings of the store's most common protocol, as a sweep file states
    them: new runs then time like the old ones (and the estimate, made from the old ones,
    holds)."""
    from paradnn.measure import SETTINGS_FIELDS  # the keys a sweep file's settings accept

    keys = [k for k in SETTINGS_FIELDS if k in ok.columns and ok[k].notna().any()]
    if not keys or ok.empty:
        return {}
    sig = ok[keys].map(str).agg("|".join, axis=1)
    row = ok[sig == sig.value_counts().index[0]].iloc[0]
    return {k: row[k] for k in keys if pd.notna(row[k])}


def _common_dtype(rows: pd.DataFrame) -> str:
    if "dtype" in rows.columns and rows["dtype"].notna().any():
        return str(rows["dtype"].value_counts().index[0])
    return "float32"


def _family_flags(row: pd.Series) -> str:
    family = row.get("family")
    fields = FAMILY_FIELDS.get(family, ())
    flags = " ".join(f"--{f} {fmt(row[f])}" for f in fields if f in row and pd.notna(row[f]))
    return f"{family} {flags} --batch {fmt(row['batch'])} --dtype {row.get('dtype', 'float32')}"


def _how(df: pd.DataFrame, m: Unsupported, how: dict, store: str) -> Unsupported:
    """Fill in the command, the sweep file (or change) and the time estimate of ``m``."""
    ok = ok_rows(df) if len(df) else df
    if how.get("grid"):
        family = how["grid"]
        base_fixed, axes = SUGGESTED_GRIDS[family]
        fam_rows = ok[ok["family"] == family] if "family" in ok.columns else ok.iloc[0:0]
        dtype = _common_dtype(fam_rows)
        fixed = dict(base_fixed)
        for k in fixed:  # join the store's own runs of the family where it has some
            if k in fam_rows.columns and fam_rows[k].notna().any():
                fixed[k] = fam_rows[k].value_counts().index[0]
        name = f"{family}-grid.yaml"  # one file supplies the heat map and the sensitivity
        m.sweep_file = _sweep_yaml(f"{family.upper()} grid for the report's heat map and "
                                   "sensitivity", family, fixed, axes, [dtype], _store_settings(ok))
        m.command = f"paradnn sweep {name} --store {store}"
        m.configs = len(axes[next(iter(axes))]) * len(axes[list(axes)[1]])
        m.seconds, m.basis = estimate_seconds(df, m.configs, {"family": family, "dtype": dtype})
        if how.get("unstable"):
            m.change = (f"or re-measure the {how['unstable']} unstable runs of the sweep that made "
                        "them: add --remeasure-unstable to its paradnn sweep command")
        return m
    if how.get("smoke"):
        m.command = f"paradnn sweep {SMOKE_SWEEP} --store {store}"
        if how.get("probe"):
            m.command = "paradnn probe --refresh && " + m.command
        m.configs = 5
        m.seconds, m.basis = estimate_seconds(df, m.configs, {})
        return m
    if how.get("batches") and len(ok):
        key = [c for c in ("family", *SPEC_FIELDS, "dtype") if c in ok.columns]
        sig = ok[key].map(str).agg("|".join, axis=1)
        r = ok[sig == sig.value_counts().index[0]].iloc[0]  # the most measured workload
        family = r.get("family")
        b = int(r["batch"])
        batches = sorted({max(1, b // 2), b, 2 * b, 4 * b})
        fields = [f for f in FAMILY_FIELDS.get(family, ()) if f in r and pd.notna(r[f])]
        m.sweep_file = _sweep_yaml(f"{workload_label(r)} at four batch sizes", family,
                                   {f: r[f] for f in fields}, {"batch": batches},
                                   [str(r.get("dtype", "float32"))], _store_settings(ok))
        m.command = f"paradnn sweep saturation.yaml --store {store}"
        m.configs = len(batches) - 1  # the measured batch is already in the store
        m.seconds, m.basis = estimate_seconds(df, m.configs, {"family": family})
        return m
    if how.get("framework") and len(ok) and "family" in ok.columns:
        return _how_framework(df, ok, m, store)
    if how.get("energy"):
        m.command = f"paradnn sweep {SMOKE_SWEEP} --store {store}"
        m.change = ("run it on an NVIDIA GPU host (NVML's energy counter; pip install "
                    "nvidia-ml-py) or on a CPU host whose RAPL counters are readable "
                    "(/sys/class/powercap/intel-rapl:*/energy_uj, often root-only: make them "
                    "readable with sudo chmod a+r); no counter, no energy number")
        m.configs = 5
        m.seconds, m.basis = estimate_seconds(df, m.configs, {})
        return m
    if how.get("profile") and len(ok) and "family" in ok.columns:
        gen = ok[ok["family"].isin(GENERATED)]
        if len(gen):
            r = gen.iloc[0]
            m.command = (f"paradnn profile -o ops/ {_family_flags(r)} && "
                         f"paradnn report {store} -o report/ --ops ops/ops.csv")
            m.configs = 1
            m.seconds, m.basis = estimate_seconds(df, 1, {"family": r["family"]})
        return m
    # Speedups: the same workloads again in another dtype, platform or software version.
    kind = m.id.split(":", 1)[1] if m.id.startswith("speedup:") else ""
    if kind and len(ok) and "family" in ok.columns:
        dtype = _common_dtype(ok)
        base = ok[ok["dtype"] == dtype] if "dtype" in ok.columns else ok
        if present(base, PLATFORM_KEY):  # the store's most common platform
            labels = base.apply(platform_label, axis=1)
            base = base[labels == labels.value_counts().index[0]]
        other = ("bfloat16" if dtype == "float32" else "float32") if kind == "dtype" else dtype
        replay = _replay_yaml(base, other, _store_settings(ok))
        if replay is not None:
            text, n = replay
            m.sweep_file, m.configs = text, n
            m.seconds, m.basis = estimate_seconds(df, n, {"dtype": dtype})
        else:  # too many workloads to list: say how to change the sweep file that made them
            n = int(base["workload_key"].nunique()) if "workload_key" in base.columns else len(base)
            m.configs = n
            m.seconds, m.basis = estimate_seconds(df, n, {"dtype": dtype})
        name = f"speedup-{kind}.yaml" if replay is not None else "YOUR_SWEEP.yaml"
        if kind == "dtype":
            if replay is None:
                m.change = (f"in the sweep file that measured these runs, set dtypes: [{dtype}, "
                            f"{other}] and run it again (the {dtype} configs in the store are skipped)")
            m.command = f"paradnn sweep {name} --store {store}"
        elif kind == "platform":
            m.change = f"run {'it' if replay is not None else 'the sweep file that measured these runs'} on a second machine"
            m.command = (f"paradnn sweep {name} --store other.db   # on the other machine\n"
                         f"paradnn merge {store} other.db -o both.db && paradnn report both.db -o report/")
            m.basis += "; time here, the other machine's is unknown"
        else:
            m.change = ("install another jax version in a second virtual environment and run "
                        f"{'it' if replay is not None else 'the sweep file that measured these runs'} from there")
            m.command = f"paradnn sweep {name} --store {store}   # from the other environment"
        return m
    if not len(ok):
        m.command = f"paradnn sweep {SMOKE_SWEEP} --store {store}"
        m.configs = 5
        m.seconds, m.basis = estimate_seconds(df, m.configs, {})
    return m


def _how_framework(df: pd.DataFrame, ok: pd.DataFrame, m: Unsupported, store: str) -> Unsupported:
    """The store's workloads (most common framework, dtype and platform) again under a second
    framework: TensorFlow beside JAX, else the other framework the store names."""
    fw = framework_of(ok)
    base_fw = str(fw.value_counts().index[0])
    others = [f for f in frameworks(ok) if f != base_fw]
    other = others[0] if others else ("tensorflow" if base_fw != "tensorflow" else DEFAULT_FRAMEWORK)
    base = ok[fw == base_fw]
    dtype = _common_dtype(base)
    base = base[base["dtype"] == dtype] if "dtype" in base.columns else base
    if present(base, PLATFORM_KEY):  # the store's most common platform
        labels = base.apply(platform_label, axis=1)
        base = base[labels == labels.value_counts().index[0]]
    replay = _replay_yaml(base, dtype, _store_settings(ok), framework=other)
    install = "" if other == DEFAULT_FRAMEWORK else f" (needs {other}: pip install 'paradnn[{'tf' if other == 'tensorflow' else other}]')"
    if replay is not None:
        m.sweep_file, m.configs = replay
        m.command = f"paradnn sweep speedup-framework.yaml --store {store}"
        m.change = f"run it where {other} is installed{install}; the {base_fw} runs stay in the store"
    else:
        m.configs = int(base["workload_key"].nunique()) if "workload_key" in base.columns else len(base)
        m.command = f"paradnn sweep YOUR_SWEEP.yaml --store {store}"
        m.change = (f"in the sweep file that measured these runs, add framework: [{base_fw}, {other}] "
                    f"under axes and run it again{install} (the {base_fw} configs in the store are "
                    "skipped)")
    m.seconds, m.basis = estimate_seconds(df, m.configs, {"dtype": dtype})
    m.basis += f"; from the {base_fw} runs, {other}'s time may differ"
    return m


# -- warnings --------------------------------------------------------------------------------

def warnings_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, physics warning code) of ``df``: the workload, platform, the code, its
    meaning and likely cause (``paradnn.record.WARNINGS``) and the values it is about. Empty
    for stores without the ``warnings`` column."""
    ok = ok_rows(df) if len(df) else df
    codes = warning_lists(ok)
    out = []
    for i, cs in codes.items():
        r = ok.loc[i]
        for code in cs:
            rec = {"code": code, "workload": workload_label(r), "batch": r.get("batch"),
                   "platform": platform_label(r)}
            for c in ("model_flops_utilization", "flops_utilization", "flops_per_sec",
                      "arithmetic_intensity", "peak_flops", "peak_source"):
                if c in ok.columns:
                    rec[c] = r.get(c)
            rec["likely cause"] = warning_meaning(code)
            out.append(rec)
    cols = ["code", "workload", "batch", "platform"] + [
        c for c in ("model_flops_utilization", "flops_utilization", "flops_per_sec",
                    "arithmetic_intensity", "peak_flops", "peak_source") if c in ok.columns] + ["likely cause"]
    return pd.DataFrame(out, columns=cols)


def plan(df: pd.DataFrame, ops: pd.DataFrame | None = None,
         store: str = "results.db") -> tuple[list[Section], list[Unsupported]]:
    """Every analysis ``df`` (and an optional per-operation profile ``ops``) supports, built,
    and every one it does not, with what it needs, the command that supplies it (``store``
    names the store in those commands) and its estimated time."""
    if not isinstance(df, pd.DataFrame):
        raise ParadnnError(f"report: expected a pandas DataFrame (paradnn.load), got {type(df).__name__}")
    if "family" in df.columns:
        # Rows of the system experiments (family "op", "collective") are not model runs.
        df = df[df["family"].isin(families.names())]
    # Rows of older stores carry no framework: JAX ran them (see analysis.framework).
    df = with_framework(df)
    sections: list[Section] = []
    missing: list[Unsupported] = []
    steps: list[tuple[str, str, Callable[[], list[Section]]]] = [
        ("params_range", "Model sizes (ParaDnn Fig 1)", lambda: _params(df))]
    for fam in GENERATED:
        steps.append((f"heatmap:{fam}", f"{fam.upper()} heat maps (ParaDnn Fig 2a-c, Fig 7)",
                      lambda fam=fam: _heatmaps(df, fam)))
        steps.append((f"sensitivity:{fam}", f"{fam.upper()} sensitivity (ParaDnn Fig 2d-f)",
                      lambda fam=fam: _sensitivities(df, fam)))
    steps += [
        ("roofline", "Roofline, model level (ParaDnn Fig 3a, 3c)", lambda: _roofline(df)),
        ("oplevel", "Roofline, operation level (ParaDnn Fig 3b, 3d)", lambda: _oplevel(ops)),
        ("utilization", "FLOPS utilization per family and platform (ParaDnn Fig 11 bottom)",
         lambda: _utilization(df)),
        ("saturation", _SATURATION_TITLE, lambda: _saturation(df)),
        ("memory", MEMORY_TITLE, lambda: _memory(df)),
        ("energy", ENERGY_TITLE, lambda: _energy(df)),
        ("host_utilization", HOST_TITLE, lambda: _host_utilization(df)),
    ]
    for sid, title, build in steps:
        try:
            sections += build()
        except _Missing as exc:
            missing.append(_how(df, Unsupported(sid, title, str(exc)), exc.how, store))
    sp, sp_missing = _speedups(df)
    try:
        sp += _frameworks(df)
    except _Missing as exc:
        missing.append(_how(df, Unsupported("frameworks", FRAMEWORKS_TITLE, str(exc)), exc.how, store))
    # Speedups read best after the single-platform analyses, before utilization.
    at = next((i for i, s in enumerate(sections) if s.id == "utilization"), len(sections))
    sections[at:at] = sp
    missing += [_how(df, m, {}, store) for m in sp_missing]
    return sections, missing


def supported(df: pd.DataFrame, ops: pd.DataFrame | None = None) -> list[str]:
    """The ids of the analyses ``df`` supports (``heatmap:fc``, ``roofline``, ...)."""
    return [s.id for s in plan(df, ops)[0]]


def _png(fig) -> tuple[str, int]:
    """The figure as base64 PNG at 2x resolution, and its width in CSS pixels (1x)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=P.DPI_2X)
    return base64.b64encode(buf.getvalue()).decode("ascii"), round(fig.get_figwidth() * P.DPI_1X)


def _html_table(df: pd.DataFrame) -> str:
    shown = df.head(MAX_TABLE_ROWS)
    text = _table_units(shown).to_html(index=False, float_format=lambda v: f"{v:.4g}",
                                       na_rep="", border=0, classes="data")
    if len(df) > len(shown):
        text += f"<p class=note>first {len(shown)} of {len(df)} rows</p>"
    return f'<div class="scroll">{text}</div>'


# Page width: the figures' 1x width (plots.PAGE_WIDTH_IN at DPI_1X = 1100 px) plus padding.
_CSS = """
body{font-family:system-ui,sans-serif;max-width:1140px;margin:2em auto;padding:0 20px;color:#222;
line-height:1.45}
h1{font-size:1.6em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
figure{margin:1em 0} img{max-width:100%;height:auto;outline:1px solid #e4e4e4;display:block}
figcaption{font-size:.95em;color:#333;margin:.4em 0}
.scroll{max-width:100%;overflow-x:auto}
table.data{border-collapse:collapse;font-size:.85em} table.data td,table.data th{padding:2px 6px;
border-bottom:1px solid #ddd;text-align:right} .note{font-size:.9em;color:#555}
details{margin:.4em 0 1.4em} summary{cursor:pointer;color:#036}
ul.missing li{margin:.8em 0} pre{background:#f5f5f5;padding:.5em .8em;white-space:pre-wrap;
overflow-wrap:anywhere;font-size:.9em;margin:.3em 0}
.warn{color:#a00}
"""


def _warnings_html(df: pd.DataFrame) -> str:
    esc = html.escape
    wt = warnings_table(df)
    if wt.empty:
        if "warnings" in df.columns:
            return ('<section id="warnings"><h2>Warnings</h2><p>No run carries a physics '
                    "warning (utilization above 1, point above its roof, analytic/XLA FLOP "
                    "mismatch).</p></section>")
        return ""
    out = ['<section id="warnings"><h2 class=warn>Warnings</h2>',
           f"<p>{len(wt)} physics warnings on {_marks(df)[1]} runs. These runs "
           "are marked in the figures (red ring on rooflines, red frame and ! on heat maps), "
           "not hidden; their numbers should not be published before the cause is fixed.</p><ul>"]
    for code, g in wt.groupby("code", sort=True):
        out.append(f"<li><b>{esc(code)}</b> ({_n(len(g), 'run')}): {esc(warning_meaning(code))}</li>")
    out.append("</ul>")
    shown = wt.head(MAX_WARNING_ROWS).drop(columns=["likely cause"])  # said once per code above
    out.append(_html_table(shown))
    if len(wt) > len(shown):
        out.append(f"<p class=note>first {len(shown)} of {len(wt)} warnings</p>")
    out.append("</section>")
    return "\n".join(out)


def render_html(df: pd.DataFrame, sections: list[Section], missing: list[Unsupported],
                title: str = "paradnn report", generated_utc: str | None = None) -> str:
    """The report page as a string (see :func:`write_report`)."""
    esc = html.escape
    counts = df["status"].value_counts().to_dict() if "status" in df.columns else {"rows": len(df)}
    rows = ok_rows(df)
    plats = sorted(rows.apply(platform_label, axis=1).unique()) if len(rows) and present(rows, PLATFORM_KEY) else []
    soft = sorted({f"jax {v}" for v in rows.get("jax_version", pd.Series(dtype=object)).dropna().unique()})
    fws = frameworks(rows) if len(rows) else []
    peaks = sorted(set(rows.get("peak_source", pd.Series(dtype=object)).dropna()))
    methods = sorted(set(rows.get("peak_method", pd.Series(dtype=object)).dropna()))
    n_unstable = int(unstable_mask(rows).sum())
    known = int(rows["stable"].notna().sum()) if "stable" in rows.columns else 0
    out = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
           f'<meta name=viewport content="width=device-width, initial-scale=1"><title>{esc(title)}</title>',
           f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1>",
           f"<p>{len(df)} records: " + ", ".join(f"{v} {esc(str(k))}" for k, v in counts.items())
           + f". Platforms: {esc(', '.join(plats) or 'none')}. Frameworks: {esc(', '.join(fws) or 'none')}. "
           f"Software: {esc(', '.join(soft) or 'unknown')}. "
           f"Peaks used for utilization and rooflines: {esc(', '.join(peaks) or 'none')} "
           "(spec = vendor spec sheet, measured = paradnn probe)"
           + (f"; method: {esc('; '.join(methods))}" if methods else "") + ". "
           + (f"Timing precision: {n_unstable} of {known} ok runs are unstable (their timing missed "
              "its precision target): hollow markers and cross-hatched cells in the figures, left "
              "out of regressions and speedup summaries. " if known else
              "Timing precision: unknown (these records predate the stability flag). ")
           + "Every number comes from the store's records; units are in the axis labels and table "
           "headers.</p>"]
    if generated_utc:
        out.append(f"<p class=note>generated {esc(generated_utc)} UTC by paradnn</p>")
    warn = _warnings_html(df)
    out.append("<h2>Contents</h2><ul>"
               + ('<li><a href="#warnings">Warnings</a></li>' if warn else "")
               + "".join(f'<li><a href="#{esc(s.id)}">{esc(s.title)}</a></li>' for s in sections)
               + '<li><a href="#unsupported">Analyses this store cannot support</a></li></ul>')
    if warn:
        out.append(warn)
    for s in sections:
        out.append(f'<section id="{esc(s.id)}" data-analysis="{esc(s.id)}"><h2>{esc(s.title)}</h2>')
        for item in s.items:
            out.append("<figure>")
            fig = item.make_figure()
            if fig is not None:
                data, width = _png(fig)
                out.append(f'<img width="{width}" alt="{esc(item.caption[:120])}" '
                           f'src="data:image/png;base64,{data}">')
            out.append(f"<figcaption>{esc(item.caption)}</figcaption></figure>")
            if item.table is not None:
                out.append(f"<details><summary>table behind this figure ({len(item.table)} rows)</summary>"
                           f"{_html_table(item.table)}</details>")
        out.append("</section>")
    out.append('<section id="unsupported"><h2>Analyses this store cannot support</h2>')
    if missing:
        items, shown = [], set()
        for m in missing:
            text = [f'<li data-analysis="{esc(m.id)}"><b>{esc(m.title)}</b>: needs {esc(m.needs)}.']
            name = esc(m.command.split()[2]) if m.sweep_file else ""
            if m.sweep_file and m.sweep_file in shown:
                text.append(f"<br>The sweep file <code>{name}</code> above supplies this too:")
            elif m.sweep_file:
                shown.add(m.sweep_file)
                text.append(f"<br>Write this sweep file (<code>{name}</code>):"
                            f"<pre>{esc(m.sweep_file)}</pre>")
            if m.change:
                text.append(f"<br>{esc(m.change[0].upper() + m.change[1:])}:")
            if m.command:
                text.append(f'<pre class="command">{esc(m.command)}</pre>')
            if m.estimate:
                text.append(f'<span class="estimate">Estimated time on this platform: '
                            f"{esc(m.estimate)}.</span>")
            items.append("".join(text) + "</li>")
        out.append('<ul class="missing">' + "".join(items) + "</ul>")
    else:
        out.append("<p>None: every analysis is above.</p>")
    out.append("</section></body></html>")
    return "\n".join(out)


def write_report(df: pd.DataFrame, out_dir: str | Path, ops: pd.DataFrame | None = None,
                 title: str = "paradnn report", store: str | Sequence[str] = "results.db") -> Path:
    """Write ``out_dir/index.html``: every analysis ``df`` supports (figures as embedded PNG,
    captions, the tables behind them), the physics warnings, and the analyses it cannot
    support with the data they need, the command that supplies it (naming ``store``, the
    first one if several) and its estimated time. ``ops`` (from
    :func:`paradnn.profile.capture`) adds the operation-level roofline. Returns the path of
    the page."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ParadnnError(f"report: output {out_dir} exists and is not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    first = store if isinstance(store, str) else (list(store) or ["results.db"])[0]
    sections, missing = plan(df, ops, store=str(first))
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    page = render_html(df, sections, missing, title=title, generated_utc=stamp)
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
