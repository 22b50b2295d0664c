"""Axes and the join: along which axis two sets of records differ, and on which columns their
configs are matched (:func:`join_columns`); a config's key and name."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from paradnn.analysis.columns import (
    FAMILY_FIELDS,
    PLATFORM_KEY,
    WORKLOAD_FIELDS,
    fmt,
    workload_label,
)
from paradnn.errors import ParadnnError
from paradnn.measure import KEYED_SETTINGS

#: The comparison axes: name -> what it means. Their columns: :func:`axis_columns`.
AXES: dict[str, str] = {
    "software": "software versions (jax, jaxlib, flax, optax, TensorFlow, PyTorch, Python, "
                "XLA_FLAGS: every *_version column but the framework's and paradnn's)",
    "revision": "the paradnn source revision (paradnn_revision, paradnn_version)",
    "framework": "the framework (framework, framework_version)",
    "dtype": "the compute dtype",
    "platform": "the platform (device_platform, device_kind, device_count, cpu_model; the host "
                "name is left out, as in the record key)",
    "settings": "the measurement settings (time budget, CV target, XLA preset, step loop, ...)",
}
_FIXED_AXIS_COLUMNS: dict[str, Sequence[str]] = {
    "revision": ("paradnn_revision", "paradnn_version"),
    "framework": ("framework", "framework_version"),
    "dtype": ("dtype",),
    "platform": (*PLATFORM_KEY, "cpu_model"),
    # A live view: the protocol's fields and every registered framework's options (xla_preset,
    # step_loop, torch_compile, and those of a framework a plugin adds after this import).
    "settings": KEYED_SETTINGS,
}
#: Software fields that are not version numbers but shape a measurement.
_SOFTWARE_EXTRA = ("xla_flags", "xla_compile_options")
#: Columns named ``*_version`` that are no software version (the record's schema).
_NOT_SOFTWARE = ("schema_version",)

#: The axes whose values are different computations or machines, never repeats of one config: a
#: side holding several values of the axis compared is refused (:func:`join_columns`), not pooled.
#: Several revisions, software versions or settings on one side are pooled, with a note.
UNPOOLED_AXES = ("framework", "dtype", "platform")


def axis_columns(columns: Iterable[str]) -> dict[str, list[str]]:
    """The columns of each axis of :data:`AXES` among ``columns``. Software: the known software
    fields and every column named ``*_version``, less the framework's and paradnn's."""
    columns = list(columns)
    out = {name: [c for c in cols if c in columns] for name, cols in _FIXED_AXIS_COLUMNS.items()}
    taken = {c for cols in _FIXED_AXIS_COLUMNS.values() for c in cols}
    # Read from the data: a framework added later brings its *_version columns with it.
    software = [c for c in columns if c.endswith("_version") and c not in _NOT_SOFTWARE]
    software += [c for c in _SOFTWARE_EXTRA if c in columns]
    out["software"] = [c for c in software if c not in taken]
    return {name: out[name] for name in AXES}


def config_columns(columns: Iterable[str]) -> list[str]:
    """Every column of ``columns`` that identifies a configuration: the workload fields and the
    columns of every axis (the host name and the measurements are not among them)."""
    columns = list(columns)
    out = [c for c in WORKLOAD_FIELDS if c in columns]
    for cols in axis_columns(columns).values():
        out += [c for c in cols if c not in out]
    return out


def _norm(value: Any) -> Any:
    """A cell as a hashable key part: missing -> None, integral numbers -> int (64 and 64.0 from
    two stores are one value), containers -> sorted JSON, everything else as it is."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        v = float(value)
        if math.isnan(v):
            return None
        return int(v) if v.is_integer() else v
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value


def config_keys(df: pd.DataFrame, columns: Sequence[str]) -> list[tuple]:
    """One hashable key per row: the values of ``columns``, normalised so that two stores' rows
    of one config match (64 and 64.0 are one value; a missing column or value is None)."""
    if not columns:
        return [()] * len(df)
    # A list, not Series.map: pandas gives the mapped values a dtype again (None and 64 in a
    # float column come back as NaN and 64.0, and NaN never equals NaN in a key).
    cols = [[_norm(v) for v in df[c].tolist()] if c in df.columns else [None] * len(df)
            for c in columns]
    return list(zip(*cols))


def _filled(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if df[c].notna().any()]


def _value_label(values: Iterable[tuple], columns: Sequence[str], limit: int = 3) -> str:
    """Readable values of an axis on one side: ``jax_version=0.12, jaxlib_version=0.12``."""
    texts = []
    for v in sorted(set(values), key=str):
        parts = [f"{c}={fmt(x)}" for c, x in zip(columns, v) if x is not None]
        texts.append(", ".join(parts) or "none")
    more = f" (+{len(texts) - limit} more)" if len(texts) > limit else ""
    return "; ".join(texts[:limit]) + more


def differing_axes(base: pd.DataFrame, new: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """The axes along which ``base`` and ``new`` differ: axis -> (BASE's values, NEW's values).

    An axis differs when the values of its columns (those with a value on both sides) on BASE
    and on NEW have nothing in common: all of BASE is ``dtype=float32`` and all of NEW
    ``dtype=bfloat16``. Sides that share a value (both hold float32 rows) do not differ along
    it: the join matches those rows on it.
    """
    both = set(_filled(base)) & set(_filled(new))
    out: dict[str, tuple[str, str]] = {}
    for name, cols in axis_columns(both).items():
        if not cols:
            continue
        a, b = set(config_keys(base, cols)), set(config_keys(new, cols))
        if a and b and not a & b:
            out[name] = (_value_label(a, cols), _value_label(b, cols))
    return out


def workload_join(df_a: pd.DataFrame, df_b: pd.DataFrame) -> list[str]:
    """The columns that say "the same workload" in A and in B, for a speedup of A over B: the
    workload fields both hold, without a workload axis (``dtype``, ``framework``) along which A
    and B differ (:func:`differing_axes`'s rule). Two stores of TensorFlow and PyTorch runs join
    on everything but ``framework``; float32 and bfloat16 rows on everything but ``dtype``.
    When A and B differ in neither and both have ``workload_key`` (the hash of every workload
    field), that one column."""
    both = set(_filled(df_a)) & set(_filled(df_b))
    on = [c for c in WORKLOAD_FIELDS if c in both]
    drop: set[str] = set()
    for name in ("dtype", "framework"):
        cols = [c for c in _FIXED_AXIS_COLUMNS[name] if c in on]
        if cols and not set(config_keys(df_a, cols)) & set(config_keys(df_b, cols)):
            drop.update(cols)
    if not drop and "workload_key" in df_a.columns and "workload_key" in df_b.columns:
        return ["workload_key"]
    return [c for c in on if c not in drop]


def parse_axes(text: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """Axis names from ``"software,revision"`` or a sequence; None for automatic; SpecError-like
    ParadnnError naming the allowed ones otherwise."""
    if text is None:
        return None
    names = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    bad = [n for n in names if n not in AXES]
    if bad or not names:
        raise ParadnnError(f"compare: axis={text!r}; allowed: one or more of "
                           f"{', '.join(AXES)}, comma-separated")
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class Join:
    """How two sets of records are matched: the ``axes`` compared (empty: the same
    configuration measured twice), their values on each side, the join columns ``on``, the
    configuration columns left out because one side has no value in them (``ignored``), and
    notes for the user."""

    axes: tuple[str, ...]
    values: dict[str, tuple[str, str]]
    on: list[str]
    ignored: list[str]
    notes: list[str] = field(default_factory=list)


def join_columns(base: pd.DataFrame, new: pd.DataFrame,
                 axes: str | Sequence[str] | None = None) -> Join:
    """The :class:`Join` of ``base`` and ``new``: along ``axes`` (names of :data:`AXES`), or,
    when None, along the one axis that differs (none: a repeat of the same configuration).

    Raises ParadnnError when more axes differ than those asked, naming each with its values:
    two changes at once cannot be told apart.
    """
    asked = parse_axes(axes)
    differ = differing_axes(base, new)
    notes: list[str] = []
    if asked is None:
        if len(differ) > 1:
            raise ParadnnError(
                "compare: BASE and NEW differ in more than one axis: "
                + "; ".join(f"{a} (BASE {v[0]}; NEW {v[1]})" for a, v in differ.items())
                + f"; allowed: one change at a time, or name them together: --axis "
                f"{','.join(differ)}")
        chosen = tuple(differ)
    else:
        extra = [a for a in differ if a not in asked]
        if extra:
            raise ParadnnError(
                f"compare: asked to compare {','.join(asked)}, but BASE and NEW differ in "
                + "; ".join(f"{a} (BASE {differ[a][0]}; NEW {differ[a][1]})" for a in extra)
                + f" too; allowed: name every axis that differs: --axis "
                f"{','.join([*asked, *extra])}")
        for a in asked:
            if a not in differ:
                notes.append(f"axis {a} does not differ between BASE and NEW: configs are "
                             f"joined on it too")
        chosen = tuple(a for a in asked if a in differ)
    filled_a, filled_b = set(_filled(base)), set(_filled(new))
    configs = config_columns(set(base.columns) | set(new.columns))
    cols_of = axis_columns(configs)
    dropped = {c for a in chosen for c in cols_of[a]}
    on = [c for c in configs if c not in dropped and c in filled_a and c in filled_b]
    ignored = [c for c in configs if c not in dropped and (c in filled_a) != (c in filled_b)]
    for a in chosen:
        for side, df in (("BASE", base), ("NEW", new)):
            cols = [c for c in cols_of[a] if c in df.columns]
            n = len(set(config_keys(df, cols))) if cols else 0
            if n > 1 and a in UNPOOLED_AXES:
                # Runs of two frameworks (dtypes, platforms) are different computations, not
                # repeats of one: pooled, their ratio would describe neither.
                flag = "--base-where" if side == "BASE" else "--new-where"
                first = cols[0]
                values = sorted({str(k[0]) for k in config_keys(df, [first]) if k[0] is not None})
                raise ParadnnError(
                    f"compare: {side} holds {n} values of {a} "
                    f"({_value_label(config_keys(df, cols), cols)}) and would pool their runs of "
                    f"one config into one sample; allowed: one {a} a side, e.g. {flag} "
                    f"{first}={values[0] if values else '...'}"
                    + (f" (or {', '.join(values[1:4])})" if len(values) > 1 else ""))
            if n > 1:
                notes.append(f"{side} holds {n} values of {a} ({_value_label(config_keys(df, cols), cols)}); "
                             "their runs of one config are pooled")
    for a, cols in cols_of.items():
        cols = [c for c in cols if c in on]
        if a in chosen or not cols:
            continue
        va, vb = set(config_keys(base, cols)), set(config_keys(new, cols))
        if va != vb and (len(va) > 1 or len(vb) > 1):
            # The sides share some values of this axis but not all: the join keeps only rows
            # whose value is on both sides (a pooled side with two revisions, say).
            notes.append(f"BASE holds {_value_label(va, cols)} and NEW {_value_label(vb, cols)} "
                         f"of {a}: only rows with a value on both sides are matched")
    if ignored:
        notes.append("configuration columns with values on one side only are not joined on: "
                     + ", ".join(ignored))
    return Join(chosen, {a: differ[a] for a in chosen}, on, ignored, notes)


def config_label(row: pd.Series, columns: Sequence[str] = ()) -> str:
    """A config's name: :func:`~paradnn.analysis.columns.workload_label` (family, its
    hyperparameters, a dtype other than float32), then ``batch=`` and ``column=value`` for each
    of ``columns`` the name does not hold yet (the columns that vary among the configs)."""
    named = {"family", "dtype", "kind", "model", *FAMILY_FIELDS.get(row.get("family"), ())}
    text = workload_label(row)
    for c in dict.fromkeys(("batch", *columns)):
        if c not in named and c in row.index and _norm(row[c]) is not None:
            text += f" {c}={fmt(_norm(row[c]))}"
    return text


def unmatched_reason(base: pd.DataFrame, new: pd.DataFrame, on: Sequence[str]) -> str:
    """Why no config of ``base`` matches one of ``new`` on the join columns ``on``: the first
    column whose values on the two sides never meet, with those values."""
    for c in on:
        a, b = set(config_keys(base, [c])), set(config_keys(new, [c]))
        if not a & b:
            return (f"{c} never matches (BASE {_value_label(a, [c])}; NEW {_value_label(b, [c])})")
    return "no combination of the join columns matches"
