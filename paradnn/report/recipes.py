"""How to supply an analysis a store cannot support: the command, the sweep file (or the change
to an existing one) and the estimated time of measuring what is missing.

A section builder that cannot run raises :class:`~paradnn.report.parts.Missing` with a hint (a
family's grid, the smoke sweep, more batches, another dtype, framework, platform or software
version, a profile); :func:`recipe` turns the hint into commands that run as printed. A
suggested grid's fixed values are replaced by the store's own where it has runs of the family,
so new runs join old. Times come from :func:`paradnn.analysis.estimate_seconds` on the store's
own records.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from paradnn import backends, families
from paradnn.analysis.columns import FAMILY_FIELDS, SPEC_FIELDS, fmt, ok_rows, unstable_mask, workload_label
from paradnn.analysis.cost import estimate_seconds
from paradnn.analysis.framework import DEFAULT_FRAMEWORK, framework_of, frameworks
from paradnn.measure import SETTINGS_FIELDS  # the keys a sweep file's settings accept
from paradnn.report.parts import Unsupported
from paradnn.report.rows import GENERATED, common_dtype, most_common_platform

# The small grid the report suggests when a family has too few runs (3 x 4 = 12 configs, above
# the 8 ok runs a regression needs), from the family registry.
SUGGESTED_GRIDS = families.RegistryView(lambda f: f.suggested_grid)
SMOKE_SWEEP = "sweeps/smoke.yaml"  # five tiny configs, seconds on a CPU
#: Configs the Prediction section's recipe measures adaptively: enough for a model with finite
#: 90% intervals (9 configs) and the held-out score (8), with room for the widest intervals.
PREDICTION_BUDGET = 20


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


def _replay_yaml(rows: pd.DataFrame, dtype: str | None, settings: dict,
                 framework: str | None = None, description: str | None = None) -> tuple[str, int] | None:
    """A sweep file that measures the generated workloads of ``rows`` again in ``dtype`` (None:
    each row's own dtype, framework and optimizer: the same configs) and under ``framework``
    when given: one part per model with its batches. ``(yaml, configs)``, or None when there
    are too many models to list (or none)."""
    parts = []
    gen = rows[rows["family"].isin(GENERATED)] if "family" in rows.columns else rows.iloc[0:0]
    own = [c for c in ("dtype", "framework", "optimizer", "devices") if dtype is None and c in gen.columns]
    for family, g in gen.groupby("family", sort=True):
        fields = [f for f in FAMILY_FIELDS[family] if f in g.columns and g[f].notna().any()]
        fields += [c for c in own if g[c].notna().any()]
        for key, gg in g.groupby(fields, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            fixed = dict(zip(fields, key))
            part_dtype = fixed.pop("dtype", dtype)
            if framework is not None:
                fixed["framework"] = framework
            parts.append((family, fixed, sorted(gg["batch"].dropna().unique()), part_dtype))
    if not parts or len(parts) > MAX_REPLAY_PARTS:
        return None

    def mapping(d: dict) -> str:
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in d.items()) + "}"

    title = description or f"the store's workloads again, in {dtype}"
    lines = [f"description: {title}" + (f" under {framework}" if framework else ""), "parts:"]
    for family, fixed, batches, part_dtype in parts:
        lines += [f"  - family: {family}", f"    fixed: {mapping(fixed)}",
                  f"    axes: {{batch: {_yaml_value(batches)}}}", f"    dtypes: [{part_dtype}]"]
    if settings:
        lines.append(f"settings: {mapping(settings)}")
    return "\n".join(lines) + "\n", sum(len(b) for _, _, b, _ in parts)


def _store_settings(ok: pd.DataFrame) -> dict:
    """The measurement settings of the store's most common protocol, as a sweep file states
    them: new runs then time like the old ones (and the estimate, made from the old ones,
    holds)."""
    keys = [k for k in SETTINGS_FIELDS if k in ok.columns and ok[k].notna().any()]
    if not keys or ok.empty:
        return {}
    sig = ok[keys].map(str).agg("|".join, axis=1)
    row = ok[sig == sig.value_counts().index[0]].iloc[0]
    return {k: row[k] for k in keys if pd.notna(row[k])}


def _family_flags(row: pd.Series) -> str:
    family = row.get("family")
    fields = FAMILY_FIELDS.get(family, ())
    flags = " ".join(f"--{f} {fmt(row[f])}" for f in fields if f in row and pd.notna(row[f]))
    return f"{family} {flags} --batch {fmt(row['batch'])} --dtype {row.get('dtype', 'float32')}"


#: The file name the report and ``paradnn status`` give the sweep of a store's unstable runs.
REMEASURE_FILE = "remeasure-unstable.yaml"


def remeasure_unstable(df: pd.DataFrame, store: str) -> dict[str, Any] | None:
    """How to measure a store's unstable ok runs (``stable`` False) again, or None if it has
    none: ``unstable`` (count), ``sweep_file`` (a sweep file listing exactly their configs with
    their own settings, so that the new runs get the same record keys; None where they are too
    many to list or are real models), ``command`` (``paradnn sweep FILE --store STORE
    --remeasure-unstable``), ``configs`` and ``change`` (what to do, in words)."""
    ok = ok_rows(df) if len(df) else df
    bad = ok[unstable_mask(ok)] if len(ok) else ok
    if not len(bad):
        return None
    # Only the most common platform's runs under its most common protocol are listed: a sweep
    # measures the platform it runs on, and a config's key includes its settings.
    same = most_common_platform(bad)
    settings = _store_settings(same)
    for k, v in settings.items():
        same = same[same[k].astype(str) == str(v)]
    replay = _replay_yaml(same, None, settings,
                          description=f"the {len(same)} unstable runs of {store} again, same configs and settings")
    out: dict[str, Any] = {"unstable": len(bad), "sweep_file": None, "configs": len(bad),
                           "command": f"paradnn sweep {REMEASURE_FILE} --store {store} --remeasure-unstable"}
    why = ("their timing missed its precision target (cv_target) within the time budget, usually "
           "because the host was busy: measure them again on a quieter host")
    if replay is not None:
        out["sweep_file"], out["configs"] = replay
        out["change"] = (f"{why}; this file lists their configs with their own settings, and "
                         "--remeasure-unstable measures configs that have only unstable runs again"
                         + (f" ({len(bad) - len(same)} unstable runs of other platforms, other settings or "
                            "real models are not listed: run the sweep files that made them with "
                            "--remeasure-unstable where they ran)"
                            if len(same) < len(bad) else ""))
    else:
        out["command"] = f"paradnn sweep YOUR_SWEEP.yaml --store {store} --remeasure-unstable"
        out["change"] = f"{why}: run the sweep file that measured them again with --remeasure-unstable"
    return out


def recipe(df: pd.DataFrame, m: Unsupported, hint: dict[str, Any], store: str) -> Unsupported:
    """``m`` with its recipe filled in: the command that supplies the data (naming ``store``),
    the sweep file to write or the change to make, and the estimated time on the store's
    platform. ``hint`` is the section builder's (:class:`~paradnn.report.parts.Missing`)."""
    ok = ok_rows(df) if len(df) else df
    if hint.get("remeasure"):  # enough runs, but unstable ones: measure those again
        again = remeasure_unstable(df, store)
        if again is not None:
            m.sweep_file, m.command, m.configs = again["sweep_file"], again["command"], again["configs"]
            m.change = again["change"]
            m.seconds, m.basis = estimate_seconds(df, m.configs, {})
            return m
    if hint.get("grid"):
        family = hint["grid"]
        base_fixed, axes = SUGGESTED_GRIDS[family]
        fam_rows = ok[ok["family"] == family] if "family" in ok.columns else ok.iloc[0:0]
        dtype = common_dtype(fam_rows)
        fixed = dict(base_fixed)
        for k in fixed:  # join the store's own runs of the family where it has some
            if k in fam_rows.columns and fam_rows[k].notna().any():
                fixed[k] = fam_rows[k].value_counts().index[0]
        name = f"{family}-grid.yaml"  # one file supplies the heat map and the sensitivity
        m.sweep_file = _sweep_yaml(f"{families.display_name(family)} grid for the report's heat map and "
                                   "sensitivity", family, fixed, axes, [dtype], _store_settings(ok))
        m.command = f"paradnn sweep {name} --store {store}"
        m.configs = len(axes[next(iter(axes))]) * len(axes[list(axes)[1]])
        m.seconds, m.basis = estimate_seconds(df, m.configs, {"family": family, "dtype": dtype})
        if hint.get("unstable"):
            m.change = (f"{hint['unstable']} unstable runs were left out (not enough to fill the gap "
                        f"if measured again: `paradnn status {store}` lists the command); this grid "
                        "adds the runs the analysis needs")
        return m
    if hint.get("smoke"):
        m.command = f"paradnn sweep {SMOKE_SWEEP} --store {store}"
        if hint.get("probe"):
            m.command = "paradnn probe --refresh && " + m.command
        m.configs = 5
        m.seconds, m.basis = estimate_seconds(df, m.configs, {})
        return m
    if hint.get("batches") and len(ok):
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
    if hint.get("framework") and len(ok) and "family" in ok.columns:
        return _framework_recipe(df, ok, m, store)
    if hint.get("energy"):
        m.command = f"paradnn sweep {SMOKE_SWEEP} --store {store}"
        m.change = ("run it on an NVIDIA GPU host (NVML's energy counter; pip install "
                    "nvidia-ml-py) or on a CPU host whose RAPL counters are readable "
                    "(/sys/class/powercap/intel-rapl:*/energy_uj, often root-only: make them "
                    "readable with sudo chmod a+r); no counter, no energy number")
        m.configs = 5
        m.seconds, m.basis = estimate_seconds(df, m.configs, {})
        return m
    if hint.get("compare"):
        # A sweep into the same store skips what it holds, whatever the revision: the new
        # version's records go to a store of their own, merged afterwards.
        m.change = ("after the change (a new paradnn revision or software version), run the sweep "
                    "that measured these runs again")
        m.command = (f"paradnn sweep YOUR_SWEEP.yaml --store new.db\n"
                     f"paradnn merge {store} new.db -o history.db && paradnn report history.db -o report/")
        m.configs = int(ok["workload_key"].nunique()) if "workload_key" in ok.columns else len(ok)
        m.seconds, m.basis = estimate_seconds(df, m.configs, {})
        return m
    if hint.get("prediction"):
        # `paradnn predict` measures nothing (it fits the store's measurements and stores a
        # predicted row per config of the file not measured yet); the adaptive sweep measures a
        # budget of configs chosen for the model, which is what the estimate is for.
        m.change = ("predict the configs of a sweep file that the store has not measured (no "
                    "measurement: a fit of seconds to minutes), or measure "
                    f"{PREDICTION_BUDGET} configs of it chosen for the model and predict the "
                    "rest (docs/prediction.md)")
        m.command = (f"paradnn predict YOUR_SWEEP.yaml --store {store}\n"
                     f"paradnn sweep YOUR_SWEEP.yaml --budget {PREDICTION_BUDGET} --store {store}")
        m.configs = PREDICTION_BUDGET
        m.seconds, m.basis = estimate_seconds(df, m.configs, {})
        return m
    if hint.get("profile") and len(ok) and "family" in ok.columns:
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
        dtype = common_dtype(ok)
        base = ok[ok["dtype"] == dtype] if "dtype" in ok.columns else ok
        base = most_common_platform(base)
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


def _framework_recipe(df: pd.DataFrame, ok: pd.DataFrame, m: Unsupported, store: str) -> Unsupported:
    """The store's workloads (most common framework, dtype and platform) again under a second
    framework: TensorFlow beside JAX, else the other framework the store names."""
    fw = framework_of(ok)
    base_fw = str(fw.value_counts().index[0])
    others = [f for f in frameworks(ok) if f != base_fw]
    # The next registered framework (the registry's order: JAX, TensorFlow, PyTorch, plugins).
    other = others[0] if others else next((f for f in backends.names() if f != base_fw),
                                          DEFAULT_FRAMEWORK)
    base = ok[fw == base_fw]
    dtype = common_dtype(base)
    base = base[base["dtype"] == dtype] if "dtype" in base.columns else base
    base = most_common_platform(base)
    replay = _replay_yaml(base, dtype, _store_settings(ok), framework=other)
    extra = backends.meta(other).extra
    install = f" (needs {other}: pip install 'paradnn[{extra}]')" if extra else ""
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
