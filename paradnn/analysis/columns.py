"""Shared vocabulary of the analyses, the figures and the report: which columns name a workload,
a platform, a software stack; the unit and the label of every column a figure or table shows;
which rows were measured, are unstable or carry a physics warning. Pure data and small pure
helpers over a results DataFrame (``paradnn.load``)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from paradnn import families, frameworks, record
from paradnn.errors import ParadnnError
from paradnn.record import METRICS, PREDICTED
from paradnn.units import si

# Hyperparameters of each family, in the order of the spec dataclasses.
# (Read from the family registry at use time: a family registered later appears.)
FAMILY_FIELDS: "Mapping[str, tuple[str, ...]]" = families.RegistryView(lambda f: f.fields())
SPEC_FIELDS: Sequence[str] = families.FieldsView(families.all_fields)
# Everything that determines the computation (Workload.to_dict()).
WORKLOAD_FIELDS: Sequence[str] = families.FieldsView(
    lambda: ("family", *families.all_fields(), "batch", "dtype", "optimizer", "devices", "framework"))
PLATFORM_KEY: tuple[str, ...] = ("device_platform", "device_kind", "device_count")
FRAMEWORK = "framework"
#: What a row without a framework means: stores from before frameworks ran JAX only.
DEFAULT_FRAMEWORK = frameworks.DEFAULT
#: Software columns of every store, whatever its frameworks: the version of the framework that
#: ran the row, and the XLA flags in effect. Each framework's own version columns
#: (``jax_version``, ``tf_version``, ...) are read from the data: see :func:`software_columns`.
CORE_SOFTWARE: tuple[str, ...] = ("framework_version", "xla_flags")
#: Columns named ``*_version`` that do not describe the software that ran the step: the record
#: format, paradnn's own revision (it changes with every commit, not the measured program) and
#: the interpreter.
NOT_SOFTWARE: tuple[str, ...] = ("schema_version", "paradnn_version", "python_version")
#: A version column that follows another one (jaxlib is released with jax): where both are
#: there, a title names only the second.
COMPANION_VERSIONS: dict[str, str] = {"jaxlib_version": "jax_version"}
# Two rows with equal values here (and in software_columns) are repeats of one configuration.
CONFIG_FIELDS: Sequence[str] = families.FieldsView(
    lambda: (*WORKLOAD_FIELDS, *PLATFORM_KEY, *CORE_SOFTWARE))


def software_columns(df: pd.DataFrame) -> list[str]:
    """The software-stack columns of ``df``: ``framework_version``, every column named
    ``*_version`` but those of :data:`NOT_SOFTWARE` (by name), then ``xla_flags``; only those
    ``df`` has. A new framework's version column counts without an edit here."""
    names = [str(c) for c in df.columns]
    versions = sorted(c for c in names if c.endswith("_version")
                      and c not in NOT_SOFTWARE and c not in CORE_SOFTWARE)
    return [c for c in (CORE_SOFTWARE[0], *versions, CORE_SOFTWARE[1]) if c in names]


def software_name(column: str) -> str:
    """``jax`` for ``jax_version`` (and for ``jaxlib_version``, which follows it), ``tf`` for
    ``tf_version``; other columns unchanged."""
    column = COMPANION_VERSIONS.get(column, column)
    return column[: -len("_version")] if column.endswith("_version") else column


def config_columns(df: pd.DataFrame) -> list[str]:
    """The configuration columns ``df`` has: workload, platform, then software
    (:func:`software_columns`), in that order."""
    fixed = [c for c in (*WORKLOAD_FIELDS, *PLATFORM_KEY) if c in df.columns]
    return fixed + software_columns(df)


# Units of the hyperparameters, for axis labels.
# Hyperparameter units come from the family registry (``Axis.unit``); these are the workload's.
HYPER_UNITS: dict[str, str] = {"batch": "examples", "devices": "devices", "params": "parameters"}
# Readable names of metrics for labels; the unit comes from record.METRICS.
METRIC_NAMES: dict[str, str] = {
    "examples_per_sec": "throughput",
    "flops_utilization": "FLOPS utilization",
    "model_flops_utilization": "model FLOPS utilization",
    "ceiling_utilization": "ceiling utilization",
    "model_ceiling_utilization": "model ceiling utilization",
    "flops_per_sec": "achieved FLOPS",
    "arithmetic_intensity": "arithmetic intensity",
    "step_time_s": "step time",
    "params": "trainable parameters",
    "speedup": "speedup",
}
# Fractions that are neither of a peak nor a plain count (record.METRICS gives them unit 1).
FRACTION_UNITS: dict[str, str] = {"host_cpu_utilization": "fraction of the host's cores",
                                  "device_busy_fraction": "fraction of the timed window"}


def unit(column: str) -> str:
    """The unit of a column: fractions from FRACTION_UNITS, metrics from record.METRICS,
    hyperparameters from the family registry's axes, workload settings from HYPER_UNITS; ""
    when none is known."""
    if column in FRACTION_UNITS:
        return FRACTION_UNITS[column]
    if column in METRICS:
        u = METRICS[column][0]
        if column in ("flops_utilization", "model_flops_utilization"):
            return "fraction of peak"
        if column in ("ceiling_utilization", "model_ceiling_utilization"):
            return "fraction of the measured ceiling"
        if u == "1" and column.endswith(("utilization", "fraction")):
            return "fraction of time"
        return "count" if u == "1" else u
    if column == "speedup":
        return "x"
    if column in HYPER_UNITS:
        return HYPER_UNITS[column]
    for name in families.names():  # the first family that has the axis names its unit
        found = families.get(name).unit(column)
        if found:
            return found
    return ""


def label(column: str, scale: str = "", table: bool = False) -> str:
    """The one label of a column, with its unit (:func:`unit`).

    For an axis or a colour bar, the readable name (``METRIC_NAMES``) and the unit with the
    axis's ``scale`` if any: ``throughput (examples/s)``, ``batch (examples, log2 scale)``,
    ``nodes (log2 scale)``. For a table header (``table=True``), the column's own name, so the
    reader can find it in the data, and the unit in brackets: ``examples_per_sec [examples/s]``;
    a count has no unit there.
    """
    u = unit(column)
    if table:
        return f"{column} [{u}]" if u and u != "count" else column
    name = METRIC_NAMES.get(column, column)
    inside = ", ".join(p for p in (u if u != name else "", scale) if p)
    return f"{name} ({inside})" if inside else name


def require_columns(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ParadnnError(
            f"{what}: column {missing[0]!r} is missing; the DataFrame has {sorted(map(str, df.columns))}"
        )


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that were measured (status ok); a frame without ``status`` is taken as all ok."""
    if "status" not in df.columns:
        return df
    return df[df["status"] == "ok"]


def measurements(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that are runs, whatever their status: every row but predictions (``status ==
    "predicted"``, paradnn predict), which no analysis of measured rows may use."""
    if "status" not in df.columns:
        return df
    return df[df["status"] != PREDICTED]


def present(df: pd.DataFrame, columns: Iterable[str]) -> list[str]:
    """The columns of ``columns`` that exist in ``df`` and hold at least one value."""
    return [c for c in columns if c in df.columns and df[c].notna().any()]


def varying(df: pd.DataFrame, columns: Iterable[str]) -> list[str]:
    """The columns that take more than one distinct (non-null) value."""
    return [c for c in present(df, columns) if df[c].dropna().nunique() > 1]


def hyperparameters(df: pd.DataFrame, family: str | None = None) -> list[str]:
    """Numeric hyperparameters (spec fields and batch) that vary in ``df``."""
    fields = FAMILY_FIELDS.get(family, SPEC_FIELDS) if family else SPEC_FIELDS
    out = []
    for c in varying(df, (*fields, "batch")):
        if pd.api.types.is_numeric_dtype(pd.to_numeric(df[c].dropna(), errors="coerce")) and \
                pd.to_numeric(df[c].dropna(), errors="coerce").notna().all():
            out.append(c)
    return out


def fmt(v: Any) -> str:
    """A value as a user reads it: integral floats (from columns with gaps) without ``.0``."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def workload_label(row: pd.Series | dict) -> str:
    """A short readable name of a workload row, e.g. ``fc layers=4 nodes=256 ... float32``."""
    get = row.get
    family = get("family")
    if get("kind") == "real" or family == "real":
        name = str(get("model"))
    else:
        fields = FAMILY_FIELDS.get(family, ())
        parts = [f"{f}={fmt(get(f))}" for f in fields if f in row and pd.notna(get(f))]
        name = " ".join([str(family), *parts])
    dtype = get("dtype")
    return f"{name} {dtype}" if isinstance(dtype, str) and dtype != "float32" else name


def label_columns(df: pd.DataFrame) -> list[str]:
    """The columns of ``df`` that :func:`workload_label`, :func:`platform_label` and
    :func:`software_label` read: a big frame's labels are made from records of these alone
    (a record of all ~160 columns of a store row costs more than the label)."""
    keep = {"family", "kind", "model", "dtype", "batch", "device_kind", "device_platform",
            "devices", "device_count", "framework"}
    for fields in FAMILY_FIELDS.values():
        keep.update(fields)
    return [c for c in df.columns if c in keep or c.endswith("_version")]


def platform_label(row: pd.Series | dict) -> str:
    """``device_kind x count (backend)`` for one row."""
    kind = row.get("device_kind") or row.get("device_platform") or "unknown device"
    count = row.get("devices") if pd.notna(row.get("devices", None)) else row.get("device_count")
    backend = row.get("device_platform")
    text = str(kind)
    if pd.notna(count) and int(count) > 1:
        text += f" x{int(count)}"
    if isinstance(backend, str) and backend and backend != kind:
        text += f" ({backend})"
    return text


def software_label(row: pd.Series | dict) -> str:
    """``jax 0.10.2``: the framework that ran a row and its version (``framework_version``;
    rows from before that column, all JAX's, give ``jax_version``)."""
    framework = row.get("framework")
    framework = framework if isinstance(framework, str) and framework else DEFAULT_FRAMEWORK
    for c in ("framework_version", f"{framework}_version"):
        v = row.get(c)
        if isinstance(v, str) and v:
            return f"{framework} {v}"
    return "unknown software"


def group_columns(df: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """Configuration columns present in ``df`` (minus ``exclude``), for grouping repeats."""
    exclude = set(exclude)
    return [c for c in config_columns(df) if c not in exclude]


# -- measurement trust (record columns `stable` and `warnings`; absent in older stores) --------

def _is_false(v: Any) -> bool:
    # Stores keep JSON booleans; CSV round trips give strings or 0/1. None/NaN is "unknown".
    if v is None or (isinstance(v, float) and v != v):
        return False
    if isinstance(v, str):
        return v.strip().lower() in ("false", "0", "no")
    try:
        return not bool(v)
    except (TypeError, ValueError):
        return False


def unstable_mask(df: pd.DataFrame) -> pd.Series:
    """True where a record says its timing missed its precision target (``stable`` is False).

    A frame without the ``stable`` column (older stores) or a null value is *unknown* and
    counts as not unstable: nothing is left out on a guess.
    """
    if "stable" not in df.columns:
        return pd.Series(False, index=df.index, dtype=bool)
    return df["stable"].map(_is_false).astype(bool)


def drop_unstable(df: pd.DataFrame, include_unstable: bool = False) -> tuple[pd.DataFrame, int]:
    """``(rows, n_left_out)``: ``df`` without its unstable rows unless ``include_unstable``."""
    if include_unstable:
        return df, 0
    bad = unstable_mask(df)
    return df[~bad], int(bad.sum())


def warning_lists(df: pd.DataFrame, kind: str | None = "physics") -> pd.Series:
    """The warning codes of each row (``warnings`` column) as lists, only those of ``kind``
    (``paradnn.record.WARNING_KINDS``: physics by default, the kind that marks figures; None for
    every kind); [] where none or where the column is absent (older stores). Rows of every
    version get the precision code ``unstable`` from their ``stable`` column when asked for."""
    if "warnings" not in df.columns or not df["warnings"].notna().any():
        codes = pd.Series([[] for _ in range(len(df))], index=df.index, dtype=object)
    else:
        codes = df["warnings"].map(lambda v: record.warning_codes(v, kind))
    if kind in (None, "physics"):
        changed = count_changed_mask(df)
        if changed.any():
            codes = pd.Series([c + ["flops_count_changed"] if changed.loc[i] else c
                               for i, c in codes.items()], index=df.index, dtype=object)
    if kind in (None, "precision"):
        # Rows written before the code existed say it in ``stable`` only.
        shaky = unstable_mask(df)
        codes = pd.Series([c + ["unstable"] if shaky.loc[i] and "unstable" not in c else c
                           for i, c in codes.items()], index=df.index, dtype=object)
    return codes


#: Relative difference above which two analytic FLOP counts of one workload disagree. The counts
#: are integers far below 2**53 (exact as JSON floats), so any difference is a change of rule.
COUNT_RTOL = 1e-9


def count_changed_mask(df: pd.DataFrame) -> pd.Series:
    """True where a row's analytic FLOP count (``model_flops_per_step``) was made by another
    rule than others of ``df`` it is read with (the physics code ``flops_count_changed``, which
    :func:`warning_lists` adds): its family's counting rule (``flops_count_rule``; 1 where a row
    does not say, as rows written before it was recorded) is older than the newest rule among
    the rows of its family and family implementation (``replaced_by``), whatever their
    configs; or its count differs from that of the latest row (``time_utc``) of the same
    workload (:data:`WORKLOAD_FIELDS`, framework included), on which nothing else depends: a
    change of rule that no rule number records. Rows without a count (failed runs, operator
    rows) never are; nor is any row of a frame without the columns (older stores)."""
    out = pd.Series(False, index=df.index, dtype=bool)
    if not {"model_flops_per_step", "family"} <= set(df.columns) or len(df) < 2:
        return out
    counts = pd.to_numeric(df["model_flops_per_step"], errors="coerce")
    rows = df[counts.notna() & (counts > 0) & df["family"].notna()]
    if len(rows) < 2:
        return out
    implementation = ["family", *([record.REPLACED_BY] if record.REPLACED_BY in rows.columns else [])]
    rule = (pd.to_numeric(rows["flops_count_rule"], errors="coerce").fillna(1)
            if "flops_count_rule" in rows.columns else pd.Series(1.0, index=rows.index))
    newest = rule.groupby([rows[c] for c in implementation], dropna=False).transform("max")
    out.loc[rule.index[rule < newest]] = True
    if "time_utc" in rows.columns:
        by = [c for c in (*WORKLOAD_FIELDS, *implementation[1:]) if c in rows.columns]
        ordered = rows.assign(_count=counts.loc[rows.index]).sort_values(
            "time_utc", kind="stable", na_position="first")
        latest = ordered.groupby(by, dropna=False, sort=False)["_count"].transform("last")
        gap = (ordered["_count"] - latest).abs() > COUNT_RTOL * latest.abs()
        out.loc[gap[gap].index] = True
    return out


def flagged_mask(df: pd.DataFrame) -> pd.Series:
    """True where a row carries at least one physics warning (an impossible value: the rows
    figures mark and the report says not to publish)."""
    return warning_lists(df, "physics").map(bool).astype(bool)


def warning_meaning(code: str) -> str:
    """Meaning and likely cause of a warning code, from ``paradnn.record.WARNINGS``."""
    flag = record.WARNINGS.get(code)
    return flag.text if flag is not None else "unknown code (not in paradnn.record.WARNINGS)"


def warning_kind(code: str) -> str:
    """The kind of a warning code (``paradnn.record.WARNING_KINDS``), ``unknown`` for a code
    this version does not know."""
    return record.warning_kind(code) or "unknown"


#: What each ``peak_source`` means, for captions that name the denominator.
PEAK_SOURCES: dict[str, str] = {
    "spec": "the vendor's peak",
    "measured": "the best quiet probe of the host (paradnn probe)",
    "nominal": "the CPU's nominal peak (cores x clock x vector lanes x FMA units: no quiet probe on record)",
    "none": "no peak",
}


def bounded_mask(df: pd.DataFrame) -> pd.Series:
    """True where a row's roof is a bound no run can pass: its peak and bandwidth come from a
    vendor table or a quiet probe (``paradnn.record.TRUSTED_SOURCES``), not a nominal figure or
    a probe under load; rows without the columns (older stores) count as bounded. Above such a
    roof is impossible; above another one is a provenance note."""
    out = pd.Series(True, index=df.index, dtype=bool)
    for col in ("peak_source", "peak_bytes_source"):
        if col in df.columns:
            known = df[col].notna()
            out &= ~known | df[col].isin(record.TRUSTED_SOURCES)
    return out


def denominators(df: pd.DataFrame) -> str:
    """What the utilizations of ``df``'s ok rows divide by, in words with units, e.g.
    ``the CPU's nominal peak (...): 332 GFLOP/s float32 (12 runs)``; several when the rows use
    several; "" for rows without peaks."""
    ok = ok_rows(df)
    if "peak_flops" not in ok.columns or "peak_source" not in ok.columns:
        return ""
    rows = ok[pd.to_numeric(ok["peak_flops"], errors="coerce").notna()]
    if not len(rows):
        return ""
    dtype = rows["dtype"] if "dtype" in rows.columns else pd.Series("", index=rows.index)
    parts = []
    for (source, peak, dt), g in rows.groupby([rows["peak_source"].fillna("?"),
                                              pd.to_numeric(rows["peak_flops"], errors="coerce"),
                                              dtype.fillna("")], sort=True):
        what = PEAK_SOURCES.get(source, str(source))
        parts.append(f"{what}: {si(float(peak), 'FLOP/s')}" + (f" {dt}" if dt else "")
                     + f" ({len(g)} run{'s' if len(g) != 1 else ''})")
    return "; ".join(parts)


def headline_utilization(df: pd.DataFrame) -> str | None:
    """The utilization a figure leads with: ``model_flops_utilization`` (useful, analytic FLOPs,
    the MFU convention) where the rows hold it, else ``flops_utilization`` (XLA executed FLOPs,
    older stores); None when neither has a value."""
    for c in ("model_flops_utilization", "flops_utilization"):
        if c in df.columns and pd.to_numeric(df[c], errors="coerce").notna().any():
            return c
    return None
