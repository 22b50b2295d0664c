"""A self-contained HTML report of a results store: every analysis the data supports.

>>> import paradnn
>>> from paradnn.report import write_report
>>> write_report(paradnn.load("results.db"), "report/")   # doctest: +SKIP
PosixPath('report/index.html')

:func:`plan` decides which analyses a DataFrame supports and builds them (figures, captions,
tables); :func:`write_report` renders the plan as one HTML file with the figures embedded as
base64 PNG, so it can be mailed or archived without its folder. Analyses the data cannot
support are listed with the data they need.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from paradnn import analysis as A
from paradnn import plots as P
from paradnn.analysis._common import (
    PLATFORM_KEY, SOFTWARE_KEY, SPEC_FIELDS, fmt, hyperparameters, label, ok_rows, platform_label,
    present, unit,
)
from paradnn.analysis.sensitivity import MIN_ROWS
from paradnn.errors import ParadnnError

GENERATED = ("fc", "cnn", "rnn")
# The width hyperparameter of each family: the paper's heat maps put it against batch.
_WIDTH = {"fc": "nodes", "cnn": "filters", "rnn": "embed"}
MAX_TABLE_ROWS = 60


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
    id: str
    title: str
    needs: str


def _table_units(df: pd.DataFrame) -> pd.DataFrame:
    """Column headers with their units: ``examples_per_sec [examples/s]``."""
    names = {}
    for c in df.columns:
        u = unit(str(c))
        names[c] = f"{c} [{u}]" if u and u not in ("count",) else str(c)
    return df.rename(columns=names)


def _setting(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Rows of the most common platform, software, dtype and optimizer (one setting), so an
    analysis over hyperparameters does not mix platforms."""
    chosen = {}
    for c in (*PLATFORM_KEY, *SOFTWARE_KEY, "dtype", "optimizer", "devices"):
        if c in rows.columns and rows[c].dropna().nunique() > 1:
            v = rows[c].value_counts().index[0]
            chosen[c] = v
            rows = rows[rows[c] == v]
    return rows, chosen


def _platforms(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    if not present(rows, PLATFORM_KEY):
        return [("", rows)]
    labels = rows.apply(platform_label, axis=1)
    return [(p, rows[labels == p]) for p in sorted(labels.unique())]


def _metric(rows: pd.DataFrame, *names: str) -> str | None:
    for n in names:
        if n in rows.columns and pd.to_numeric(ok_rows(rows)[n], errors="coerce").notna().any():
            return n
    return None


# -- the analyses: each returns Section(s) or raises _Missing(needs) -----------------------

class _Missing(Exception):
    pass


def _params(df: pd.DataFrame) -> list[Section]:
    if _metric(df, "params") is None:
        raise _Missing("ok runs with the params metric")
    pr = A.params_range(df)
    return [Section("params_range", "Model sizes (ParaDnn Fig 1)", [Item(
        "Trainable parameters of every measured model: generated families as ranges "
        "(bar from the smallest to the largest, tick at the median), real models as points. "
        "Source: params metric of the ok runs (counted from parameter shapes).",
        lambda: P.params_range(pr), pr)])]


def _heatmaps(df: pd.DataFrame, family: str) -> list[Section]:
    rows = df[df["family"] == family] if "family" in df.columns else df.iloc[0:0]
    measured = rows[rows["status"].isin(("ok", "oom"))] if "status" in rows.columns else rows
    hp = hyperparameters(measured, family)
    metrics = [m for m in ("flops_utilization", "examples_per_sec") if _metric(measured, m)]
    if len(hp) < 2 or not metrics:
        raise _Missing(f"{family.upper()} runs (ok or oom) varying two hyperparameters "
                       f"(has {hp or 'none'}) with flops_utilization or examples_per_sec")
    x = "batch" if "batch" in hp else hp[0]
    width = _WIDTH.get(family)
    others = sorted((h for h in hp if h != x), key=lambda h: -measured[h].nunique())
    y = width if width in hp and width != x else others[0]
    section = Section(f"heatmap:{family}", f"{family.upper()} heat maps (ParaDnn Fig 2a-c, Fig 7)")
    for plat, prow in _platforms(measured):
        for m in metrics:
            hm = A.heatmap(prow, x, y, m)
            fixed = ", ".join(f"{k}={fmt(v)}" for k, v in hm.attrs["fixed"].items())
            section.items.append(Item(
                f"{label(m)} of {family.upper()} models over {x} and {y} "
                f"(log2 axes){' on ' + plat if plat else ''}; other settings fixed: {fixed or 'none'}. "
                f"White cells marked OOM ran out of device memory; grey cells were not measured. "
                f"Source: median of the ok runs per cell.",
                lambda hm=hm: P.heatmap(hm), hm))
    return [section]


def _sensitivities(df: pd.DataFrame, family: str) -> list[Section]:
    rows = ok_rows(df[df["family"] == family]) if "family" in df.columns else df.iloc[0:0]
    rows, chosen = _setting(rows)
    target = _metric(rows, "flops_utilization", "examples_per_sec")
    feats = hyperparameters(rows, family)
    if target is None or not feats or len(rows) < max(MIN_ROWS, len(feats) + 2):
        raise _Missing(f"at least {max(MIN_ROWS, len(feats) + 2)} ok {family.upper()} runs on one "
                       f"platform varying at least one hyperparameter (has {len(rows)} ok runs, "
                       f"varying {feats or 'none'})")
    s = A.sensitivity(rows, target, feats, log2=True)
    setting = ", ".join(f"{k}={fmt(v)}" for k, v in chosen.items())
    return [Section(f"sensitivity:{family}", f"{family.upper()} sensitivity (ParaDnn Fig 2d-f)", [Item(
        f"Standardized linear-regression weights of {target} on log2 of the {family.upper()} "
        f"hyperparameters ({s.attrs['n']} ok runs{', ' + setting if setting else ''}); R^2 = "
        f"{s.attrs['r2']:.2f}; error bars: 95% bootstrap interval ({s.attrs['bootstrap']} resamples). "
        "A positive weight means the metric grows with the hyperparameter.",
        lambda: P.sensitivity(s), s)])]


def _roofline(df: pd.DataFrame) -> list[Section]:
    need = ("flops_per_sec", "arithmetic_intensity", "peak_flops", "peak_bytes_per_sec")
    rows = ok_rows(df)
    if not all(c in rows.columns for c in need) or rows[list(need)].apply(
            pd.to_numeric, errors="coerce").dropna().empty:
        raise _Missing("ok runs with flops_per_sec, arithmetic_intensity and the device peaks "
                       "(peak_flops, peak_bytes_per_sec)")
    rf = A.roofline(rows.dropna(subset=list(need)))
    section = Section("roofline", "Roofline, model level (ParaDnn Fig 3a, 3c)")
    for plat, prow in _platforms(rf):
        sources = sorted(set(prow["peak_source"].dropna())) if "peak_source" in prow else []
        counts = prow["bound"].value_counts().to_dict()
        table = prow[[c for c in ("family", "model", *SPEC_FIELDS[:-1], "batch", "dtype",
                                  "arithmetic_intensity", "flops_per_sec", "roof_flops_per_sec",
                                  "bound", "roof_fraction") if c in prow.columns]]
        table = table.loc[:, table.notna().any()]
        section.items.append(Item(
            f"Achieved FLOP/s against arithmetic intensity{' on ' + plat if plat else ''}; the roof "
            f"uses the {' and '.join(sources) or 'given'} peak "
            f"({'vendor spec sheet' if sources == ['spec'] else 'measured by paradnn probe' if sources == ['measured'] else 'see legend'}). "
            f"{counts.get('memory', 0)} runs memory-bound, {counts.get('compute', 0)} compute-bound; "
            "colour: batch; stars: real models. roof_fraction = achieved / roof at that intensity.",
            lambda prow=prow, plat=plat: P.roofline(prow, title=f"roofline{' - ' + plat if plat else ''}"),
            table))
    return [section]


def _speedups(df: pd.DataFrame) -> tuple[list[Section], list[Unsupported]]:
    comps = A.comparisons(df)
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
            sp = A.speedup_of(c)
            gm = A.geometric_mean(sp["speedup"])
            table = sp[[col for col in ("label", "params", "batch", "examples_per_sec_a",
                                        "examples_per_sec_b", "speedup") if col in sp.columns]]
            section.items.append(Item(
                f"Speedup of {c.a} over {c.b}: ratio of examples/s on the same workload "
                f"({len(sp)} workloads, geometric mean {gm:.2f}x, {(sp['speedup'] > 1).mean():.0%} "
                f"faster on {c.a}); colour: batch; stars: real models.",
                lambda sp=sp: P.speedup(sp), table.sort_values("speedup")))
            fr = A.family_ranges(sp, "speedup")
            section.items.append(Item(
                f"Speedup of {c.a} over {c.b} per family (range and median) and per real model "
                "(ParaDnn Fig 11 top).", lambda fr=fr: P.family_ranges(fr, log=True), fr))
            gen = sp[sp.get("kind", pd.Series("generated", index=sp.index)) != "real"]
            for fam in GENERATED:
                frows = gen[gen["family"] == fam] if "family" in gen.columns else gen.iloc[0:0]
                feats = hyperparameters(frows, fam)
                if feats and len(frows) >= max(MIN_ROWS, len(feats) + 2):
                    s = A.sensitivity(frows, "speedup", feats, log2=True)
                    section.items.append(Item(
                        f"Sensitivity of the {fam.upper()} speedup of {c.a} over {c.b} to its "
                        f"hyperparameters (standardized weights on log2 values, {s.attrs['n']} "
                        f"workloads, R^2 = {s.attrs['r2']:.2f}; ParaDnn Fig 8a, 9a, 10a, 10d).",
                        lambda s=s: P.sensitivity(s), s))
        sections.append(section)
    return sections, missing


def _utilization(df: pd.DataFrame) -> list[Section]:
    rows = ok_rows(df)
    if _metric(rows, "flops_utilization") is None:
        raise _Missing("ok runs with the flops_utilization metric")
    rows = rows.assign(platform=rows.apply(platform_label, axis=1))
    ur = A.family_ranges(rows, "flops_utilization", by="platform")
    return [Section("utilization", "FLOPS utilization per family and platform (ParaDnn Fig 11 bottom)", [Item(
        "FLOPS utilization (achieved FLOP/s over the device's peak for the dtype) per family and "
        "platform: ranges over all generated models, points for real models.",
        lambda: P.utilization_comparison(ur), ur)])]


def _saturation(df: pd.DataFrame) -> list[Section]:
    if _metric(df, "examples_per_sec") is None or "batch" not in df.columns:
        raise _Missing("ok runs with examples_per_sec")
    curves = A.saturation(df)
    if curves.empty:
        raise _Missing("a model (same spec, dtype, platform, software) measured at two or more "
                       "batch sizes")
    summary = A.saturation_summary(curves)
    return [Section("saturation", "Batch-size saturation (TBD study)", [Item(
        f"Throughput relative to each model's best against batch; the diamond marks the smallest "
        f"batch reaching {curves.attrs['threshold']:.0%} of the best throughput "
        f"({len(summary)} models).", lambda: P.saturation(curves), summary)])]


def _oplevel(ops: pd.DataFrame | None) -> list[Section]:
    if ops is None or ops.empty:
        raise _Missing("a per-operation profile of one configuration (`paradnn profile ...`, "
                       "paradnn.profile.capture); a store holds whole-step records only")
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


def plan(df: pd.DataFrame, ops: pd.DataFrame | None = None) -> tuple[list[Section], list[Unsupported]]:
    """Every analysis ``df`` (and an optional per-operation profile ``ops``) supports, built,
    and every one it does not, with what it needs."""
    if not isinstance(df, pd.DataFrame):
        raise ParadnnError(f"report: expected a pandas DataFrame (paradnn.load), got {type(df).__name__}")
    if "family" in df.columns:
        # Rows of the system experiments (family "op", "collective") are not model runs.
        from paradnn.specs import SPEC_TYPES

        df = df[df["family"].isin(SPEC_TYPES)]
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
        ("saturation", "Batch-size saturation (TBD study)", lambda: _saturation(df)),
    ]
    for sid, title, build in steps:
        try:
            sections += build()
        except _Missing as exc:
            missing.append(Unsupported(sid, title, str(exc)))
    sp, sp_missing = _speedups(df)
    # Speedups read best after the single-platform analyses, before utilization.
    at = next((i for i, s in enumerate(sections) if s.id == "utilization"), len(sections))
    sections[at:at] = sp
    missing += sp_missing
    return sections, missing


def supported(df: pd.DataFrame, ops: pd.DataFrame | None = None) -> list[str]:
    """The ids of the analyses ``df`` supports (``heatmap:fc``, ``roofline``, ...)."""
    return [s.id for s in plan(df, ops)[0]]


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _html_table(df: pd.DataFrame) -> str:
    shown = df.head(MAX_TABLE_ROWS)
    text = _table_units(shown).to_html(index=False, float_format=lambda v: f"{v:.4g}",
                                       na_rep="", border=0, classes="data")
    if len(df) > len(shown):
        text += f"<p class=note>first {len(shown)} of {len(df)} rows</p>"
    return text


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
figure{margin:1em 0} img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.92em;color:#333;margin:.3em 0}
table.data{border-collapse:collapse;font-size:.8em} table.data td,table.data th{padding:2px 6px;
border-bottom:1px solid #ddd;text-align:right} .note{font-size:.85em;color:#666}
details{margin:.4em 0 1.4em} summary{cursor:pointer;color:#036}
ul.missing li{margin:.3em 0}
"""


def render_html(df: pd.DataFrame, sections: list[Section], missing: list[Unsupported],
                title: str = "paradnn report", generated_utc: str | None = None) -> str:
    """The report page as a string (see :func:`write_report`)."""
    esc = html.escape
    counts = df["status"].value_counts().to_dict() if "status" in df.columns else {"rows": len(df)}
    rows = ok_rows(df)
    plats = sorted(rows.apply(platform_label, axis=1).unique()) if len(rows) and present(rows, PLATFORM_KEY) else []
    soft = sorted({f"jax {v}" for v in rows.get("jax_version", pd.Series(dtype=object)).dropna().unique()})
    peaks = sorted(set(rows.get("peak_source", pd.Series(dtype=object)).dropna()))
    out = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{esc(title)}</title>",
           f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1>",
           f"<p>{len(df)} records: " + ", ".join(f"{v} {esc(str(k))}" for k, v in counts.items())
           + f". Platforms: {esc(', '.join(plats) or 'none')}. Software: {esc(', '.join(soft) or 'unknown')}. "
           f"Peaks used for utilization and rooflines: {esc(', '.join(peaks) or 'none')} "
           "(spec = vendor spec sheet, measured = paradnn probe). Every number comes from the "
           "store's records; units are in the axis labels and table headers.</p>"]
    if generated_utc:
        out.append(f"<p class=note>generated {esc(generated_utc)} UTC by paradnn</p>")
    out.append("<h2>Contents</h2><ul>" + "".join(
        f'<li><a href="#{esc(s.id)}">{esc(s.title)}</a></li>' for s in sections) + "</ul>")
    for s in sections:
        out.append(f'<section id="{esc(s.id)}" data-analysis="{esc(s.id)}"><h2>{esc(s.title)}</h2>')
        for item in s.items:
            out.append("<figure>")
            fig = item.make_figure()
            if fig is not None:
                out.append(f'<img alt="{esc(item.caption[:120])}" src="data:image/png;base64,{_png(fig)}">')
            out.append(f"<figcaption>{esc(item.caption)}</figcaption></figure>")
            if item.table is not None:
                out.append(f"<details><summary>table behind this figure ({len(item.table)} rows)</summary>"
                           f"{_html_table(item.table)}</details>")
        out.append("</section>")
    out.append('<section id="unsupported"><h2>Analyses this store cannot support</h2>')
    if missing:
        out.append('<ul class="missing">' + "".join(
            f'<li data-analysis="{esc(m.id)}"><b>{esc(m.title)}</b>: needs {esc(m.needs)}.</li>'
            for m in missing) + "</ul>")
    else:
        out.append("<p>None: every analysis is above.</p>")
    out.append("</section></body></html>")
    return "\n".join(out)


def write_report(df: pd.DataFrame, out_dir: str | Path, ops: pd.DataFrame | None = None,
                 title: str = "paradnn report") -> Path:
    """Write ``out_dir/index.html``: every analysis ``df`` supports (figures as embedded PNG,
    captions, the tables behind them) and the list of those it cannot support with the data
    they need. ``ops`` (from :func:`paradnn.profile.capture`) adds the operation-level roofline.
    Returns the path of the page."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ParadnnError(f"report: output {out_dir} exists and is not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    sections, missing = plan(df, ops)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    page = render_html(df, sections, missing, title=title, generated_utc=stamp)
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
