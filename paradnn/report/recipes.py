"""How to supply an analysis a store cannot support: the command, the sweep file (or the change
to an existing one) and the estimated time of measuring what is missing.

A section builder that cannot run raises :class:`~paradnn.report.parts.Missing` with a hint (a
family's grid, the smoke sweep, more batches, another dtype, framework, platform or software
version, a profile); :func:`recipe` turns the hint into commands that run as printed. A
suggested grid's fixed values are replaced by the store's own where it has runs of the family,
so new runs join old. A sweep file that measures new runs carries the timing settings the
store's own timings call for (:func:`precise_settings`: the time budget in which the default
precision target is met on this host); one that measures a comparison's other side keeps the
store's settings (a comparison joins configs measured alike). A recipe's time is the one
estimator's (:func:`paradnn.analysis.cost.estimate`, as ``paradnn plan`` and the sweep's start
line give it) for the sweep file's configs and settings.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from paradnn import families, frameworks
from paradnn.analysis.columns import FAMILY_FIELDS, SPEC_FIELDS, fmt, ok_rows, unstable_mask, workload_label
from paradnn.analysis.compare import relative_spread
from paradnn.analysis.cost import estimate, estimate_seconds
from paradnn.analysis.framework import DEFAULT_FRAMEWORK, framework_of
from paradnn.analysis.framework import frameworks as stored_frameworks
from paradnn.errors import ParadnnError
from paradnn.grids.sweepfile import load_sweep_file
from paradnn.measure import KEYED_SETTINGS, MIN_TIMED_CALLS, MeasureSettings, nearest_valid
from paradnn.report.parts import Unsupported
from paradnn.report.rows import GENERATED, common_dtype, most_common_platform

# The small grid the report suggests when a family has too few runs (3 x 4 = 12 configs, above
# the 8 ok runs a regression needs), from the family registry.
SUGGESTED_GRIDS = families.RegistryView(lambda f: f.suggested_grid)
SMOKE_SWEEP = "sweeps/smoke.yaml"  # five tiny configs, seconds on a CPU: does the platform work?
#: The main job's sweep: an FC grid (heat map, roofline, sensitivity), a CNN and an LSTM.
QUICKSTART_SWEEP = "sweeps/quickstart.yaml"
QUICKSTART_CONFIGS = 14  # its configs, where the file cannot be read to count them
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


#: Time budgets (s) a recipe may ask for per config: the smallest that meets the target, never
#: above the last (a host that noisy gets it and the recipe says so).
RECIPE_BUDGETS_S = (5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0)
#: The share of the store's runs whose precision a recipe's budget is chosen to meet.
RECIPE_QUANTILE = 0.8
# 95% normal quantile x the asymptotic standard error of a median (sqrt(pi/2) sigma / sqrt(n)):
# the half-width of the median's interval is about this x the relative spread / sqrt(calls).
_MEDIAN_HALFWIDTH = 1.96 * math.sqrt(math.pi / 2)


def _times(value: Any) -> list[float]:
    """A row's per-call step times (``step_times_s``: a list, or its JSON text), [] if none."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    if not isinstance(value, (list, tuple)):
        return []
    return [float(x) for x in value if isinstance(x, (int, float)) and x == x and x > 0]


def precise_settings(rows: pd.DataFrame) -> tuple[dict[str, Any], str]:
    """The timing settings a sweep file needs to measure configs like ``rows`` (ok rows of a
    store) to the default precision target on this host, from their own timings, and the
    reasoning in words. For each row with per-call times: its calls' relative spread (robust:
    1.4826 MAD / median), scaled to calls of the default length (the protocol's automatic K
    makes a call last ``call_target_s``; a shorter call's relative spread is taken to shrink as
    the square root of its length), gives the calls the ``ci`` rule needs (the median's 95%
    half-width is about 1.96 x sqrt(pi/2) x spread / sqrt(calls)), at least
    ``MIN_TIMED_CALLS``; with the default warm-up that is the time a config needs. The budget is
    the smallest of :data:`RECIPE_BUDGETS_S` that covers :data:`RECIPE_QUANTILE` of the rows with
    a 20% margin. Returns only the settings that differ from the defaults (``{}``: the defaults
    meet the target)."""
    defaults = MeasureSettings()
    ok = ok_rows(rows) if len(rows) else rows
    need_s, need_calls, spreads = [], [], []
    # Records of the two columns read, not of the ~160 a store row has (5 s at 10,000 rows).
    cols = [c for c in ("step_times_s", "steps_per_call_used") if c in ok.columns]
    for r in ok[cols].to_dict("records"):
        times = _times(r.get("step_times_s"))
        k = r.get("steps_per_call_used")
        if len(times) < 2 or not isinstance(k, (int, float)) or not k == k or k < 1:
            continue
        step = float(np.median(times))
        call = step * float(k)
        target_call = max(defaults.call_target_s, step)
        spread = relative_spread(times) * math.sqrt(min(1.0, call / target_call))
        calls = max(MIN_TIMED_CALLS, math.ceil((_MEDIAN_HALFWIDTH * spread / defaults.ci_target) ** 2))
        need_calls.append(calls)
        spreads.append(spread)
        need_s.append(defaults.warmup_s + calls * target_call)
    if not need_s:
        return {}, "the store's rows keep no per-call times: the default settings"
    budget_need = float(np.quantile(need_s, RECIPE_QUANTILE)) * 1.2
    budget = next((b for b in RECIPE_BUDGETS_S if b >= budget_need), RECIPE_BUDGETS_S[-1])
    out: dict[str, Any] = {}
    if budget > defaults.time_budget_s:
        out["time_budget_s"] = budget
    calls = int(np.quantile(need_calls, RECIPE_QUANTILE))
    if calls > defaults.max_calls:
        out["max_calls"] = min(calls, 10_000)
    basis = (f"from {len(need_s)} ok run(s) of the store: the calls' relative spread is "
             f"{100 * float(np.median(spreads)):.2g}% (median; scaled to {defaults.call_target_s:g} s calls), "
             f"so the +-{100 * defaults.ci_target:g}% target of the median needs about "
             f"{int(np.median(need_calls))} calls (median), {budget_need / 1.2:.3g} s for "
             f"{RECIPE_QUANTILE:.0%} of them: time_budget_s {budget:g}"
             + (" (the most a recipe asks for: this host is noisier than it can fix; measure on a quieter one)"
                if budget_need > RECIPE_BUDGETS_S[-1] else ""))
    return out, basis


def file_estimate(df: pd.DataFrame, name: str, text: str) -> tuple[float, str, int]:
    """``(seconds, basis, configs)`` of running the sweep file ``text`` (named ``name``) on
    the store's platform: :func:`paradnn.analysis.cost.estimate` on its configs and settings,
    the estimator ``paradnn plan`` and the sweep's start line use."""
    try:
        sweep = load_sweep_file(name, text=text)
        settings = MeasureSettings(**sweep.settings)
    except ParadnnError as exc:  # a recipe's own file: a bug, said rather than hidden
        return math.nan, f"the sweep file does not parse: {exc}", 0
    est = estimate(df, sweep.workloads, settings)
    if est.seconds is None:  # no timed record to learn from: the stated default
        seconds, basis = estimate_seconds(df, len(sweep.workloads), {})
        return seconds, basis, len(sweep.workloads)
    return est.seconds, est.basis, len(sweep.workloads)


def _store_settings(ok: pd.DataFrame) -> dict:
    """The measurement settings of the store's most common protocol, as a sweep file states
    them: a comparison's other side then times like the side in the store (a comparison joins
    configs measured alike)."""
    keys = [k for k in KEYED_SETTINGS if k in ok.columns and ok[k].notna().any()]
    if not keys or ok.empty:
        return {}
    sig = ok[keys].map(str).agg("|".join, axis=1)
    row = ok[sig == sig.value_counts().index[0]].iloc[0]
    # A value this version refuses (2 timed calls of an older store) is the nearest it takes.
    return {k: nearest_valid(k, _native(row[k])) for k in keys if pd.notna(row[k])}


def _native(value: Any) -> Any:
    """A stored value as a plain Python one (numpy scalars from pandas)."""
    return value.item() if isinstance(value, np.generic) else value


def _family_flags(row: pd.Series) -> str:
    family = row.get("family")
    fields = FAMILY_FIELDS.get(family, ())
    flags = " ".join(f"--{f} {fmt(row[f])}" for f in fields if f in row and pd.notna(row[f]))
    return f"{family} {flags} --batch {fmt(row['batch'])} --dtype {row.get('dtype', 'float32')}"


#: The file name the report and ``paradnn status`` give the sweep of a store's unstable runs.
REMEASURE_FILE = "remeasure-unstable.yaml"


def _path(folder: str, name: str) -> str:
    """A recipe's sweep file as its command names it: ``folder/name`` (the folder the report or
    ``paradnn status --recipes`` writes it to), else the bare name (write it there)."""
    return f"{folder.rstrip('/')}/{name}" if folder else name


def remeasure_unstable(df: pd.DataFrame, store: str, folder: str = "") -> dict[str, Any] | None:
    """How to measure a store's unstable ok runs (``stable`` False) again, or None if it has
    none: ``unstable`` (count), ``sweep_file`` (a sweep file listing exactly their configs, of
    the most common platform, with the time budget the store's own timings call for:
    :func:`precise_settings`; None where they are too many to list or are real models),
    ``file_name``, ``command`` (``paradnn sweep FILE --store STORE --remeasure-unstable``: each
    new run replaces the unstable one of its config, ``paradnn.load`` gives the new one),
    ``configs``, ``settings_basis`` (why those settings) and ``change`` (what to do, in
    words)."""
    ok = ok_rows(df) if len(df) else df
    bad = ok[unstable_mask(ok)] if len(ok) else ok
    if not len(bad):
        return None
    # Only the most common platform's runs are listed: a sweep measures the platform it runs on.
    same = most_common_platform(bad)
    settings, basis = precise_settings(same)
    replay = _replay_yaml(same, None, settings,
                          description=f"the {len(same)} unstable runs of {store} again, with the time budget "
                          "the store's own timings call for")
    path = _path(folder, REMEASURE_FILE)
    out: dict[str, Any] = {"unstable": len(bad), "sweep_file": None, "configs": len(bad), "file_name": "",
                           "settings": settings, "settings_basis": basis,
                           "command": f"paradnn sweep {path} --store {store} --remeasure-unstable"}
    busy = int(bad["contended"].map(lambda v: v is True or v == 1).sum()) if "contended" in bad.columns else 0
    why = ("their timing missed its precision target within the time budget"
           + (f"; {busy} of them were measured while other processes kept the host busy "
              "(contended): measure those on a quiet host" if busy else ""))
    if replay is not None:
        out["sweep_file"], out["configs"] = replay
        out["file_name"] = REMEASURE_FILE
        out["change"] = (f"{why}; this file lists their configs with the settings this host's timings "
                         f"call for ({basis}), and --remeasure-unstable measures them again: each new "
                         "run replaces the unstable one (paradnn.load(attempts=True) keeps both)"
                         + (f" ({len(bad) - len(same)} unstable runs of other platforms or real models "
                            "are not listed: run the sweep files that made them with "
                            "--remeasure-unstable where they ran)"
                            if len(same) < len(bad) else ""))
    else:
        out["command"] = f"paradnn sweep YOUR_SWEEP.yaml --store {store} --remeasure-unstable"
        out["change"] = (f"{why}: run the sweep file that measured them again with --remeasure-unstable"
                         + (f" and these settings ({basis}): {settings}" if settings else ""))
    return out


def _with_file(df: pd.DataFrame, m: Unsupported, name: str, text: str, folder: str) -> str:
    """Give ``m`` the sweep file ``text`` named ``name`` and its estimate (configs, seconds,
    basis: :func:`file_estimate`); returns the path its command names."""
    m.sweep_file, m.file_name = text, name
    m.seconds, m.basis, m.configs = file_estimate(df, name, text)
    return _path(folder, name)


def _repository_file(df: pd.DataFrame, m: Unsupported, path: str) -> None:
    """``m``'s estimate for a sweep file of this repository (``sweeps/...``): from the file
    where it can be read here, else from the store's median config time."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        text = None
    if text is not None:
        m.seconds, m.basis, m.configs = file_estimate(df, path, text)
    else:
        m.configs = QUICKSTART_CONFIGS if path == QUICKSTART_SWEEP else 5
        m.seconds, m.basis = estimate_seconds(df, m.configs, {})


#: Seconds `paradnn ledger` is given in the report's recipe.
LEDGER_BUDGET_S = 300.0


def recipe(df: pd.DataFrame, m: Unsupported, hint: dict[str, Any], store: str,
           folder: str = "") -> Unsupported:
    """``m`` with its recipe filled in: the command that supplies the data (naming ``store``
    and the sweep file under ``folder``, where the report writes it), the sweep file or the
    change to make, and the estimated time on the store's platform. ``hint`` is the section
    builder's (:class:`~paradnn.report.parts.Missing`)."""
    ok = ok_rows(df) if len(df) else df
    if hint.get("remeasure"):  # enough runs, but unstable ones: measure those again
        again = remeasure_unstable(df, store, folder)
        if again is not None:
            m.command, m.change = again["command"], again["change"]
            if again["sweep_file"]:
                _with_file(df, m, again["file_name"], again["sweep_file"], folder)
            else:
                m.configs = again["configs"]
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
        settings, basis = precise_settings(fam_rows if len(fam_rows) else ok)
        text = _sweep_yaml(f"{families.display_name(family)} grid for the report's heat map and "
                           "sensitivity", family, fixed, axes, [dtype], settings)
        m.command = f"paradnn sweep {_with_file(df, m, name, text, folder)} --store {store}"
        m.change = f"the timing settings come from the store's own timings: {basis}"
        if hint.get("unstable"):
            m.change += (f"; {hint['unstable']} unstable runs were left out (not enough to fill the gap "
                         f"if measured again: `paradnn status {store}` lists the command); this grid "
                         "adds the runs the analysis needs")
        return m
    if hint.get("smoke"):
        m.command = f"paradnn sweep {QUICKSTART_SWEEP} --store {store}"
        if hint.get("probe"):
            m.command = "paradnn probe --refresh && " + m.command
        _repository_file(df, m, QUICKSTART_SWEEP)
        return m
    if hint.get("batches") and len(ok):
        key = [c for c in ("family", *SPEC_FIELDS, "dtype") if c in ok.columns]
        sig = ok[key].map(str).agg("|".join, axis=1)
        r = ok[sig == sig.value_counts().index[0]].iloc[0]  # the most measured workload
        family = r.get("family")
        b = int(r["batch"])
        batches = sorted({max(1, b // 2), 2 * b, 4 * b})  # the measured batch is already in the store
        fields = [f for f in FAMILY_FIELDS.get(family, ()) if f in r and pd.notna(r[f])]
        settings, basis = precise_settings(ok)
        text = _sweep_yaml(f"{workload_label(r)} at more batch sizes", family,
                           {f: r[f] for f in fields}, {"batch": batches},
                           [str(r.get("dtype", "float32"))], settings)
        m.command = f"paradnn sweep {_with_file(df, m, 'saturation.yaml', text, folder)} --store {store}"
        m.change = f"the timing settings come from the store's own timings: {basis}"
        return m
    if hint.get("framework") and len(ok) and "family" in ok.columns:
        return _framework_recipe(df, ok, m, store, folder)
    if hint.get("ledger"):
        m.command = f"paradnn ledger {store} --budget-s {LEDGER_BUDGET_S:g}"
        m.change = ("measure stored configs spread across the grid again with the time ledger on, "
                    "within the budget (or add `ledger: true` to a sweep file's settings)")
        m.configs = int(ok["key"].nunique()) if "key" in ok.columns else len(ok)
        m.seconds, m.basis = float(LEDGER_BUDGET_S), "the command's time budget"
        return m
    if hint.get("energy"):
        m.command = f"paradnn sweep {SMOKE_SWEEP} --store {store}"
        m.change = ("run it on an NVIDIA GPU host (NVML's energy counter; pip install "
                    "nvidia-ml-py) or on a CPU host whose RAPL counters are readable "
                    "(/sys/class/powercap/intel-rapl:*/energy_uj, often root-only: make them "
                    "readable with sudo chmod a+r); no counter, no energy number")
        _repository_file(df, m, SMOKE_SWEEP)
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
    # Speedups: the same workloads again in another dtype, platform or software version, with
    # the store's own settings (a comparison joins configs measured alike).
    kind = m.id.split(":", 1)[1] if m.id.startswith("speedup:") else ""
    if kind and len(ok) and "family" in ok.columns:
        dtype = common_dtype(ok)
        base = ok[ok["dtype"] == dtype] if "dtype" in ok.columns else ok
        base = most_common_platform(base)
        other = ("bfloat16" if dtype == "float32" else "float32") if kind == "dtype" else dtype
        replay = _replay_yaml(base, other, _store_settings(ok))
        name = f"speedup-{kind}.yaml" if replay is not None else "YOUR_SWEEP.yaml"
        if replay is not None:
            name = _with_file(df, m, name, replay[0], folder)
        else:  # too many workloads to list: say how to change the sweep file that made them
            n = int(base["workload_key"].nunique()) if "workload_key" in base.columns else len(base)
            m.configs = n
            m.seconds, m.basis = estimate_seconds(df, n, {"dtype": dtype})
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
        m.command = f"paradnn sweep {QUICKSTART_SWEEP} --store {store}"
        _repository_file(df, m, QUICKSTART_SWEEP)
    return m


def _framework_recipe(df: pd.DataFrame, ok: pd.DataFrame, m: Unsupported, store: str,
                      folder: str = "") -> Unsupported:
    """The store's workloads (most common framework, dtype and platform) again under a second
    framework: TensorFlow beside JAX, else the other framework the store names."""
    fw = framework_of(ok)
    base_fw = str(fw.value_counts().index[0])
    others = [f for f in stored_frameworks(ok) if f != base_fw]
    # The next registered framework (the registry's order: JAX, TensorFlow, PyTorch, plugins).
    other = others[0] if others else next((f for f in frameworks.names() if f != base_fw),
                                          DEFAULT_FRAMEWORK)
    base = ok[fw == base_fw]
    dtype = common_dtype(base)
    base = base[base["dtype"] == dtype] if "dtype" in base.columns else base
    base = most_common_platform(base)
    replay = _replay_yaml(base, dtype, _store_settings(ok), framework=other)
    extra = frameworks.meta(other).extra
    install = f" (needs {other}: pip install 'paradnn[{extra}]')" if extra else ""
    if replay is not None:
        path = _with_file(df, m, "speedup-framework.yaml", replay[0], folder)
        m.command = f"paradnn sweep {path} --store {store}"
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
