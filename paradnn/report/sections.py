"""Which analyses a store supports, each section built from analysis and plot calls.

:func:`plan` runs every section builder on a results DataFrame: a builder returns its
section(s) (figures drawn only when the page is rendered, captions, the tables behind them) or
raises :class:`~paradnn.report.parts.Missing` with the data it needs; the recipes
(:mod:`paradnn.report.recipes`) then say how to get that data. Runs that missed their precision
target (``stable`` False) are marked in every figure and left out of regressions and speedup
summaries; runs with physics warnings are marked.
"""

from __future__ import annotations

import math
from typing import Callable

import pandas as pd

from paradnn import analysis as A
from paradnn import families
from paradnn import plots as P
from paradnn.analysis.columns import (
    PLATFORM_KEY, SPEC_FIELDS, bounded_mask, denominators, drop_unstable, fmt, headline_utilization,
    hyperparameters, label, ok_rows, platform_label, software_name,
)
from paradnn.analysis.framework import framework_of, frameworks, with_framework
from paradnn.analysis.sensitivity import MIN_ROWS
from paradnn.errors import ParadnnError
from paradnn.record import TRUSTED_SOURCES
from paradnn.report import compare, prediction, speedups
from paradnn.report.parts import Item, Missing, Section, Unsupported
from paradnn.report.recipes import recipe
from paradnn.report.rows import (
    GENERATED, first_metric, has_all, marks, one_setting, platforms_and_frameworks, plural,
    settings_counts,
)

# The heat-map width axis of each parameterized family, from the family registry.
_WIDTH = families.RegistryView(lambda f: f.width)


def heatmap_title(family: str) -> str:
    return f"{families.display_name(family)} heat maps (ParaDnn Fig 2a-c, Fig 7)"


def sensitivity_title(family: str) -> str:
    return f"{families.display_name(family)} sensitivity (ParaDnn Fig 2d-f)"


#: Section id -> title, for the analyses that are not one per family.
TITLES: dict[str, str] = {
    "params_range": "Model sizes (ParaDnn Fig 1)",
    "roofline": "Roofline, model level (ParaDnn Fig 3a, 3c)",
    "oplevel": "Roofline, operation level (ParaDnn Fig 3b, 3d)",
    **speedups.TITLES,
    "utilization": "FLOPS utilization per family and platform (ParaDnn Fig 11 bottom)",
    "saturation": "Batch-size saturation (as in TBD, Zhu et al. 2018)",
    "memory": "Memory breakdown by model and batch (TBD, Zhu et al. 2018, Fig 8)",
    "energy": "Power and energy per example by model and batch",
    "host_utilization": "Host CPU and device utilization by model and batch (TBD, Zhu et al. 2018)",
    "ledger": "Where the time goes: the time ledger of each config",
    compare.SECTION_ID: compare.SECTION_TITLE,
    prediction.SECTION_ID: prediction.SECTION_TITLE,
}

#: The operation-level section's title when the device's peaks are unknown: no roof is drawn.
OPLEVEL_NO_ROOF_TITLE = "Operations: arithmetic intensity and FLOP/s, no roof (ParaDnn Fig 3b, 3d)"
#: Operations below this share of the step time are left out of the operation-level figure.
OP_MIN_SHARE = 0.01

_PLATFORM_WORDS = dict.fromkeys(("backend", *PLATFORM_KEY), "platform")


def _panel_words(columns: list[str]) -> str:
    """``platform, jax version, dtype``: what the panels of a heat map are split by."""
    def word(c: str) -> str:
        if c in _PLATFORM_WORDS:
            return _PLATFORM_WORDS[c]
        if c == "xla_flags":
            return "XLA flags"
        if c.endswith("_version"):  # jaxlib follows jax: "jax version"
            return f"{software_name(c)} version"
        return c

    return ", ".join(dict.fromkeys(word(c) for c in columns))


def _marks_text(rows: pd.DataFrame, unstable_how: str, flagged_how: str) -> str:
    n_u, n_f = marks(rows)
    parts = []
    if n_u:
        parts.append(f"{plural(n_u, 'unstable run')} (timing missed its precision target) {unstable_how}")
    if n_f:
        parts.append(f"{plural(n_f, 'run')} with a physics warning {flagged_how} (see Warnings)")
    return ("; ".join(parts) + ". ") if parts else ""


def _utilization_note(rows: pd.DataFrame, headline: str) -> str:
    """How the XLA-executed utilization compares with the headline (useful FLOPs) one."""
    if headline != "model_flops_utilization" or "flops_utilization" not in rows.columns:
        return ("Utilization from XLA's executed FLOPs (this store has no analytic "
                "model_flops_utilization). " if headline == "flops_utilization" else "")
    ok = ok_rows(rows)
    ratio = (pd.to_numeric(ok["flops_utilization"], errors="coerce")
             / pd.to_numeric(ok["model_flops_utilization"], errors="coerce")).dropna()
    over = denominators(ok)
    denominator = f"Denominator: {over}. " if over else ""
    if ratio.empty:
        return denominator
    return (f"Headline: model FLOPS utilization (useful, analytic FLOPs, the MFU convention); "
            f"XLA's executed-FLOPs utilization (flops_utilization) is {ratio.median():.2f}x it "
            f"(median over {len(ratio)} runs, range {ratio.min():.2f}x-{ratio.max():.2f}x). " + denominator)


# -- the analyses: each returns Section(s) or raises Missing(needs, hint) ---------------------

def params_section(df: pd.DataFrame) -> list[Section]:
    if first_metric(df, "params") is None:
        raise Missing("ok runs with the params metric", {"smoke": True})
    pr = A.params_range(df)
    return [Section("params_range", TITLES["params_range"], [Item(
        "Trainable parameters of every measured model: generated families as ranges "
        "(bar from the smallest to the largest, tick at the median)"
        + (", real models as points" if (pr["kind"] == "real").any() else "") + ". "
        "Source: params metric of the ok runs (counted from parameter shapes).",
        lambda: P.params_range(pr), pr)])]


def heatmap_section(df: pd.DataFrame, family: str) -> list[Section]:
    rows = df[df["family"] == family] if "family" in df.columns else df.iloc[0:0]
    measured = rows[rows["status"].isin(("ok", "oom"))] if "status" in rows.columns else rows
    hp = hyperparameters(measured, family)
    head = headline_utilization(ok_rows(measured))
    metrics = [m for m in (head, "examples_per_sec") if m and first_metric(measured, m)]
    if len(hp) < 2 or not metrics:
        raise Missing(f"{families.display_name(family)} runs (ok or oom) varying two hyperparameters "
                      f"(has {hp or 'none'}) with a utilization or examples_per_sec",
                      {"grid": family})
    x = "batch" if "batch" in hp else hp[0]
    width = _WIDTH.get(family)
    others = sorted((h for h in hp if h != x), key=lambda h: -measured[h].nunique())
    y = width if width in hp and width != x else others[0]
    section = Section(f"heatmap:{family}", heatmap_title(family))
    for m in metrics:
        hm = A.heatmap(measured, x, y, m, panels=True)
        fixed = ", ".join(f"{k}={fmt(v)}" for k, v in hm.attrs["fixed"].items())
        split = hm.attrs["panel_columns"]
        n_u = int(hm["unstable"].sum())
        # Above 1 is impossible only against a bound (a vendor peak, a quiet probe); against a
        # nominal peak it is a provenance note (boost clocks), which marks nothing red.
        bounded = _trusted_peaks(measured)
        over = pd.to_numeric(hm[m], errors="coerce") > 1 + 1e-9 if m.endswith("utilization") and bounded \
            else pd.Series(False, index=hm.index)
        n_w, n_o = int((hm["warnings"] != "").sum()), int(over.sum())
        n_f = int(((hm["warnings"] != "") | over).sum())
        notes = []
        if n_u:
            notes.append(f"{plural(n_u, 'cross-hatched cell')} rest on unstable runs only (timing "
                         "missed its precision target; they do not set the colour scale)")
        if n_f:
            why = ([f"{n_w} with a physics warning (see Warnings)"] if n_w else []) + (
                [f"{n_o} with a utilization above 1, which is impossible: the peak used is too "
                 "low or the FLOPs are overcounted"] if n_o else [])
            notes.append(f"{plural(n_f, 'cell')} framed red and marked !: {'; '.join(why)}")
        section.items.append(Item(
            f"{label(m)} of {families.display_name(family)} models over {x} and {y} (log2 axes), "
            + (f"one panel per {_panel_words(split)}" if split else "one map")
            + f"; other settings fixed: {fixed or 'none'}. One shared log colour scale; cell "
            "labels in one format (k = thousand, M = million). White cells marked OOM ran out "
            "of device memory; light grey cells were not measured. "
            + (("; ".join(notes) + ". ") if notes else "")
            + (_utilization_note(measured, m) if m.endswith("utilization") else "")
            + "Source: median of the ok runs per cell (stable runs where there are any).",
            lambda hm=hm: P.heatmap(hm), hm))
    return [section]


def _trusted_peaks(rows: pd.DataFrame) -> bool:
    """Whether every ok row's utilization divides by a bound no run can pass (``peak_source``
    spec or measured: ``paradnn.record.TRUSTED_SOURCES``); rows without the column (older
    stores) count as bounded, as they were judged."""
    ok = ok_rows(rows)
    if "peak_source" not in ok.columns or not len(ok):
        return True
    sources = ok["peak_source"].dropna()
    return bool(sources.isin(TRUSTED_SOURCES).all())


def sensitivity_section(df: pd.DataFrame, family: str) -> list[Section]:
    all_ok = ok_rows(df[df["family"] == family]) if "family" in df.columns else df.iloc[0:0]
    steady, n_unstable = drop_unstable(all_ok)
    rows, chosen = one_setting(steady)
    target = headline_utilization(rows) or first_metric(rows, "examples_per_sec")
    feats = hyperparameters(rows, family)
    need = max(MIN_ROWS, len(feats) + 2)
    if target is None or not feats or len(rows) < need:
        left = f"; {n_unstable} unstable runs left out" if n_unstable else ""
        # Would the unstable runs, measured again, be enough? Then that is the recipe.
        again, _ = one_setting(all_ok)
        remeasure = bool(n_unstable) and len(again) >= max(MIN_ROWS, len(hyperparameters(again, family)) + 2)
        raise Missing(
            f"at least {need} stable ok {families.display_name(family)} runs of one dtype on one platform varying "
            f"at least one hyperparameter (has {settings_counts(steady)}{left}; varying "
            f"{feats or 'none'})", {"grid": family, "unstable": n_unstable, "remeasure": remeasure})
    s = A.sensitivity(rows, target, feats, log2=True)
    setting = ", ".join(f"{k}={fmt(v)}" for k, v in chosen.items())
    left = s.attrs.get("unstable_excluded", 0) + n_unstable
    return [Section(f"sensitivity:{family}", sensitivity_title(family), [Item(
        f"Standardized linear-regression weights of {target} on log2 of the {families.display_name(family)} "
        f"hyperparameters ({s.attrs['n']} stable ok runs{', ' + setting if setting else ''}"
        + (f"; {left} unstable runs left out" if left else "") + f"); R^2 = "
        f"{s.attrs['r2']:.2f}; error bars: 95% bootstrap interval over runs ({s.attrs['bootstrap']} "
        "resamples). A positive weight means the metric grows with the hyperparameter.",
        lambda: P.sensitivity(s), s)])]


def roofline_section(df: pd.DataFrame) -> list[Section]:
    need = ("flops_per_sec", "arithmetic_intensity", "peak_flops", "peak_bytes_per_sec")
    rows = ok_rows(df)
    if not all(c in rows.columns for c in need) or rows[list(need)].apply(
            pd.to_numeric, errors="coerce").dropna().empty:
        raise Missing("ok runs with flops_per_sec, arithmetic_intensity and the device peaks "
                      "(peak_flops, peak_bytes_per_sec)", {"smoke": True, "probe": True})
    rf = A.roofline(rows.dropna(subset=list(need)))
    section = Section("roofline", TITLES["roofline"])
    for plat, prow in platforms_and_frameworks(rf):
        sources = sorted(set(prow["peak_source"].dropna())) if "peak_source" in prow else []
        methods = sorted(set(prow["peak_method"].dropna())) if "peak_method" in prow else []
        counts = prow["bound"].value_counts().to_dict()
        has_real = bool((prow.get("kind", pd.Series(dtype=object)) == "real").any())
        table = prow[[c for c in ("family", "model", *SPEC_FIELDS[:-1], "batch", "dtype",
                                  "arithmetic_intensity", "flops_per_sec", "roof_flops_per_sec",
                                  "bound", "roof_fraction", "stable", "warnings") if c in prow.columns]]
        table = table.loc[:, table.notna().any()]
        beyond = pd.to_numeric(prow["roof_fraction"], errors="coerce") > 1 + 1e-9
        above = int((beyond & bounded_mask(prow)).sum())
        above_soft = int((beyond & ~bounded_mask(prow)).sum())
        section.items.append(Item(
            f"Achieved FLOP/s (XLA-counted) against arithmetic intensity{' on ' + plat if plat else ''}; "
            f"one roof per dtype, labelled with its dtype and peak source "
            f"({'vendor spec sheet' if sources == ['spec'] else 'measured by paradnn probe' if sources == ['measured'] else 'see legend'}"
            + (f"; method: {'; '.join(methods)}" if methods else "") + "). "
            f"{counts.get('memory', 0)} runs memory-bound, {counts.get('compute', 0)} compute-bound. "
            "Marker shape: family; colour: dtype"
            + ("; stars: real models" if has_real else "") + ". "
            + _marks_text(prow, "drawn hollow", "ringed red")
            + (f"{plural(above, 'run')} above its roof (roof_fraction > 1, ringed red): impossible, "
               "so the peak used is too low or the FLOPs are overcounted; do not publish these. "
               if above else "")
            + (f"{plural(above_soft, 'run')} above a roof that is not a bound (a nominal peak, or a "
               "bandwidth probed under load: not ringed, see the provenance notes). "
               if above_soft else "")
            + (f"Roof from {denominators(prow)}. " if denominators(prow) else "")
            + "roof_fraction = achieved / roof at that intensity.",
            lambda prow=prow, plat=plat: P.roofline(prow, title=f"roofline{' - ' + plat if plat else ''}"),
            table))
    return [section]


# -- per family and platform, per model and batch --------------------------------------------

def utilization_section(df: pd.DataFrame) -> list[Section]:
    rows = ok_rows(df)
    value = headline_utilization(rows)
    if value is None:
        raise Missing("ok runs with model_flops_utilization or flops_utilization", {"smoke": True})
    where = rows.apply(platform_label, axis=1) if len(rows) else pd.Series(dtype=object)
    if len(frameworks(rows)) > 1:  # one range per platform and framework, never mixed
        where = where + ", " + framework_of(rows).astype(str)
    rows = rows.assign(platform=where)
    # Unstable runs are drawn, marked (a range, not a regression: their medians are still
    # measurements, only less precise than the target), never dropped from the figure.
    ur = A.family_ranges(rows, value, by="platform", include_unstable=True)
    shaky = int(ur["n_unstable"].sum()) if len(ur) else 0
    return [Section("utilization", TITLES["utilization"], [Item(
        f"{label(value)} (achieved FLOP/s over the device's peak for the dtype) per family and "
        "platform: ranges over the generated models"
        + (", points for real models" if (ur["kind"] == "real").any() else "") + ". "
        + (f"{shaky} of {int(ur['n'].sum())} runs are unstable (timing missed its precision "
           "target): their ranges are hatched and labelled, real models hollow. " if shaky else "")
        + _utilization_note(rows, value), lambda: P.utilization_comparison(ur), ur)])]


def saturation_section(df: pd.DataFrame) -> list[Section]:
    if first_metric(df, "examples_per_sec") is None or "batch" not in df.columns:
        raise Missing("ok runs with examples_per_sec", {"smoke": True})
    curves = A.saturation(df)
    if curves.empty:
        raise Missing("a model (same spec, dtype, platform, software) measured at two or more "
                      "batch sizes", {"batches": True})
    summary = A.saturation_summary(curves)
    n_u = int(curves["unstable"].sum())
    return [Section("saturation", TITLES["saturation"], [Item(
        f"Throughput relative to each model's best against batch; the diamond marks the smallest "
        f"batch reaching {curves.attrs['threshold']:.0%} of the best throughput "
        f"({len(summary)} models; each with its own marker and line style, drawn slightly "
        "offset along the batch axis so that coinciding curves stay visible)"
        + (f"; {n_u} hollow points rest on unstable runs only" if n_u else "") + ". The "
        "saturation batch follows the TBD benchmark suite (Training Benchmark for DNNs, "
        "Zhu et al. 2018).", lambda: P.saturation(curves), summary)])]


def _per_model_table(rows: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """The table behind a per-model figure: a readable model name, then ``columns``."""
    return rows.assign(model=P.model_names(rows))[
        [c for c in ("model", *columns) if c in rows.columns or c == "model"]
    ].sort_values(["model", "batch"])


def memory_section(df: pd.DataFrame) -> list[Section]:
    ok = ok_rows(df)
    if not has_all(ok, "memory_weights_bytes", "memory_activations_bytes"):
        raise Missing("ok runs with the memory breakdown metrics (memory_weights_bytes, "
                      "memory_gradients_bytes, memory_optimizer_bytes, memory_activations_bytes, "
                      "memory_workspace_bytes); runs recorded before the breakdown existed lack "
                      "them, every run of this paradnn version records them", {"smoke": True})
    rows = ok.dropna(subset=["memory_weights_bytes", "memory_activations_bytes"])
    table = _per_model_table(rows, ("batch", *P.MEMORY_PARTS, "memory_peak_bytes"))
    share = (pd.to_numeric(rows["memory_activations_bytes"], errors="coerce")
             / rows[list(P.MEMORY_PARTS)].apply(pd.to_numeric, errors="coerce").sum(axis=1)).dropna()
    return [Section("memory", TITLES["memory"], [Item(
        "Memory per device of one training step in five parts, one bar per model and batch "
        f"({P.memory_unit(rows)[0]}, the axis's unit; mean over repeats): weights (parameters and model state), weight gradients, "
        "optimizer state, feature maps (activations kept for the backward pass) and workspace "
        "(the rest of the compiled total); the percentage above a bar is the feature maps' share. "
        f"Feature maps are {share.median():.0%} of the total in the median run "
        f"(range {share.min():.0%}-{share.max():.0%}, {plural(len(share), 'run')}). Source: "
        "memory_* metrics (weights and optimizer state from shapes, feature maps from the "
        "residuals JAX's autodiff saves, the total from XLA's memory analysis of the compiled "
        "step).", lambda: P.memory_breakdown(rows), table)])]


def energy_section(df: pd.DataFrame) -> list[Section]:
    ok = ok_rows(df)
    measured = ok[(ok["energy_source"] != "unavailable")] if "energy_source" in ok.columns else ok.iloc[0:0]
    if not has_all(measured, "power_w", "energy_per_example_j"):
        notes = sorted({str(n) for n in ok.get("energy_note", pd.Series(dtype=object)).dropna()})
        raise Missing(
            "ok runs with a measured energy (energy_source nvml or nvml-power on an NVIDIA GPU, "
            "rapl on a CPU host with readable RAPL counters)"
            + (f"; the runs here say: {'; '.join(notes[:3])}" if notes else
               "; these runs predate the energy metrics"), {"energy": True})
    rows = measured.dropna(subset=["power_w"])
    sources = ", ".join(sorted(rows["energy_source"].astype(str).unique()))
    left = len(ok) - len(rows)
    table = _per_model_table(rows, ("batch", "power_w", "energy_per_example_j", "energy_per_step_j",
                                    "examples_per_joule", "energy_source", "meter_window_s"))
    return [Section("energy", TITLES["energy"], [Item(
        "Average power (W) and energy per example (J/example) over the timed window against the "
        f"batch, one line per model (median over repeats). Source: energy counters ({sources}) "
        "read around the timed window: energy / wall time, energy / examples"
        + (f"; {plural(left, 'ok run')} without a measured energy left out" if left else "") + ".",
        lambda: P.energy(ok), table)])]


def host_utilization_section(df: pd.DataFrame) -> list[Section]:
    ok = ok_rows(df)
    have = [m for m in P.UTILIZATION_METRICS if has_all(ok, m)]
    if not have:
        raise Missing("ok runs with host_cpu_utilization (from /proc/stat, Linux hosts) or "
                      "device_busy_fraction (from a profiler trace on a GPU/TPU); these runs "
                      "predate them or ran where neither was readable", {"smoke": True})
    # Every ok run is in the table, those without a value too: the caption says why they have none.
    table = _per_model_table(ok, ("batch", *P.UTILIZATION_METRICS, "host_cpu_utilization_per_core",
                                  "meter_window_s"))
    missing = [m for m in P.UTILIZATION_METRICS if m not in have]
    notes = sorted({str(n) for n in ok.get("device_busy_note", pd.Series(dtype=object)).dropna()})
    why = (f" No run has {missing[0]}" + (f" ({'; '.join(notes[:2])})" if notes and
                                          missing[0] == "device_busy_fraction" else "") + "."
           if missing else "")
    left = [f"{m}: {text}" for m in have if (text := P.utilization_left_out(ok, m))]
    return [Section("host_utilization", TITLES["host_utilization"], [Item(
        "Over the timed window, against the batch, one line per model (median over repeats; "
        "each model with its own marker, translucent and shifted a few points sideways so that "
        "equal values stay visible): host CPU utilization (fraction of all the host's cores "
        "busy, from /proc/stat) and device busy fraction (union of kernel times over the "
        "window, from a profiler trace)." + why
        + (f" Not drawn, for want of a value ({'; '.join(left)}); they are in the table." if left else ""),
        lambda: P.utilization(ok), table)])]


def ledger_section(df: pd.DataFrame) -> list[Section]:
    """Where each config's step time goes (docs/ledger.md): the stacked bars of every run with a
    ledger, then per family the share maps over its batch and width and, with enough runs, the
    sensitivity of each part to the hyperparameters."""
    try:
        frame = A.ledger_frame(df)
    except ParadnnError:
        raise Missing("ok runs with a time ledger (measured with the ledger setting: `paradnn run "
                      "--ledger`, a sweep's settings: {ledger: true}, or `paradnn ledger STORE`, "
                      "which profiles stored configs again)", {"ledger": True}) from None
    sources = sorted({str(s).split(";")[0] for s in frame["ledger_source"].dropna()})
    items = [Item(
        "Each run's measured step time split into parts that add up to it (docs/ledger.md): "
        "useful work at the peak (analytic FLOPs / peak), extra work at the peak (executed "
        "beyond them), memory-bound time and kernels below their roof (per operation, from its "
        "profiled time against its roofline bound), communication, time outside operations; "
        "where operations overlapped, the overlap is drawn left of 0; runs whose timing missed "
        "its precision target are named in grey italics with 'unstable'. Source: the run's own "
        f"profile after its timed calls ({', '.join(sources)}), the peak of each run "
        "(peak_source), the measured step time.",
        lambda: P.ledger_bars(frame), frame[[c for c in ("family", "batch", "step_time_s",
                                                         "ledger_largest_part", "ledger_largest_loss",
                                                         "ledger_note") if c in frame.columns]])]
    for fam in GENERATED:
        rows = frame[frame["family"] == fam] if "family" in frame.columns else frame.iloc[0:0]
        hp = hyperparameters(rows, fam)
        if len(hp) < 2:
            continue
        x = "batch" if "batch" in hp else hp[0]
        width = _WIDTH.get(fam)
        y = width if width in hp and width != x else next(h for h in hp if h != x)
        rest = [h for h in hp if h not in (x, y)]
        fixed = {h: rows[h].mode().iloc[0] for h in rest}
        sel = rows
        for h, v in fixed.items():
            sel = sel[sel[h] == v]
        name = families.display_name(fam)
        items.append(Item(
            f"{name} runs over {x} and {y}: the largest part of each cell (what limits that "
            "config), then each part's median share of the step time"
            + (f"; fixed: {', '.join(f'{k}={fmt(v)}' for k, v in fixed.items())}" if fixed else "") + ".",
            lambda sel=sel, x=x, y=y: P.ledger_maps(sel, x, y), None))
        if len(rows) >= MIN_ROWS:
            try:
                sens = A.part_sensitivity(rows, hp)
            except ParadnnError:
                continue
            items.append(Item(
                f"Sensitivity of each ledger part's share to the {name} hyperparameters (ParaDnn "
                "Fig 7's regression on log2 features, applied to causes instead of utilization).",
                lambda sens=sens: P.ledger_sensitivity(sens), sens))
    return [Section("ledger", TITLES["ledger"], items)]


def oplevel_section(ops: pd.DataFrame | None) -> list[Section]:
    if ops is None or ops.empty:
        raise Missing("a per-operation profile of one configuration (`paradnn profile ...`, "
                      "paradnn.experiments.profile.capture); a store holds whole-step records only",
                      {"profile": True})
    pf, pb = ops.attrs.get("peak_flops"), ops.attrs.get("peak_bytes_per_sec")
    items = []
    note = ops.attrs.get("note", "")
    br = A.op_breakdown(ops)
    items.append(Item(f"Share of step time per operation category. {note}", lambda: P.op_breakdown(br), br))
    if _positive(pf) and _positive(pb):
        orf = A.op_roofline(ops, pf, pb, min_time_fraction=OP_MIN_SHARE)
        items.append(Item(
            f"Operations above {OP_MIN_SHARE:.0%} of the step time with FLOPs, on the roof of the "
            f"device ({ops.attrs.get('peak_source', 'given')} peak). {note}", lambda: P.op_roofline(orf),
            A.top_ops(orf)))
        return [Section("oplevel", TITLES["oplevel"], items)]
    # No roof to draw: the operations' intensity and FLOP/s are still measured, and the figure
    # and the section are titled as what they are, saying why there is no roof.
    why = P.no_roof_reason(ops.attrs)
    points = ops[(ops["time_fraction"] >= OP_MIN_SHARE) & (ops["flops"] > 0)
                 & (ops["flops_per_sec"] > 0) & (ops["arithmetic_intensity"] > 0)].copy()
    points.attrs.update(ops.attrs, min_time_fraction=OP_MIN_SHARE)
    items.append(Item(
        f"Operations above {OP_MIN_SHARE:.0%} of the step time with FLOPs: arithmetic intensity "
        f"and achieved FLOP/s, with no roof: {why}, so the operations are not classified as "
        f"memory- or compute-bound. The table lists the top operations by time. {note}",
        (lambda: P.op_roofline(points)) if len(points) else None, A.top_ops(ops)))
    return [Section("oplevel", OPLEVEL_NO_ROOF_TITLE, items)]


def _positive(v: object) -> bool:
    """Whether ``v`` is a positive finite number (a peak that can make a roof)."""
    try:
        return math.isfinite(float(v)) and float(v) > 0  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


# -- the plan --------------------------------------------------------------------------------

def plan(df: pd.DataFrame, ops: pd.DataFrame | None = None,
         store: str = "results.db", folder: str = "") -> tuple[list[Section], list[Unsupported]]:
    """Every analysis ``df`` (and an optional per-operation profile ``ops``) supports, built,
    and every one it does not, with what it needs, the command that supplies it (``store``
    names the store in those commands, ``folder`` the folder its sweep file is written to) and
    its estimated time."""
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
        ("params_range", TITLES["params_range"], lambda: params_section(df))]
    for fam in GENERATED:
        steps.append((f"heatmap:{fam}", heatmap_title(fam), lambda fam=fam: heatmap_section(df, fam)))
        steps.append((f"sensitivity:{fam}", sensitivity_title(fam),
                      lambda fam=fam: sensitivity_section(df, fam)))
    steps += [(sid, TITLES[sid], build) for sid, build in (
        ("roofline", lambda: roofline_section(df)),
        ("oplevel", lambda: oplevel_section(ops)),
        ("ledger", lambda: ledger_section(df)),
        ("utilization", lambda: utilization_section(df)),
        ("saturation", lambda: saturation_section(df)),
        ("memory", lambda: memory_section(df)),
        ("energy", lambda: energy_section(df)),
        ("host_utilization", lambda: host_utilization_section(df)),
        (compare.SECTION_ID, lambda: compare.compare_section(df)),
        # After every analysis of measurements: predictions are never mixed into them.
        (prediction.SECTION_ID, lambda: prediction.prediction_section(df)),
    )]
    for sid, title, build in steps:
        try:
            sections += build()
        except Missing as exc:
            missing.append(recipe(df, Unsupported(sid, title, str(exc)), exc.hint, store, folder))
    sp, sp_missing = speedups.speedup_sections(df)
    try:
        sp += speedups.frameworks_section(df)
    except Missing as exc:
        missing.append(recipe(df, Unsupported("frameworks", TITLES["frameworks"], str(exc)),
                              exc.hint, store, folder))
    # Speedups read best after the single-platform analyses, before utilization.
    at = next((i for i, s in enumerate(sections) if s.id == "utilization"), len(sections))
    sections[at:at] = sp
    missing += [recipe(df, m, {}, store, folder) for m in sp_missing]
    return sections, missing


def supported(df: pd.DataFrame, ops: pd.DataFrame | None = None) -> list[str]:
    """The ids of the analyses ``df`` supports (``heatmap:fc``, ``roofline``, ...)."""
    return [s.id for s in plan(df, ops)[0]]
