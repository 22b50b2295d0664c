"""The store's layout and its rows' meaning: the file format's name and version, the tables
(``DDL``), the columns :func:`paradnn.store.load` returns, how a stored row of an older schema is
read today (:func:`migrate_row`), how a row is written as JSON, and which rows are current
(:func:`current_rows`). Everything here is shared by the writer and the readers of a store."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any, Union

import pandas as pd

from paradnn import families, frameworks
from paradnn.measure import PROTOCOL_FIELDS, SETTINGS_FIELDS
from paradnn.record import (
    METRICS,
    PLATFORM_FIELDS,
    SCHEMA_VERSION,
    SETTINGS_ADDED,
    SOFTWARE_FIELDS,
    row_key,
    superseded,
)

#: Version of the file layout (tables, columns). Bump when the layout changes; readers refuse
#: stores with a higher version. Independent of ``record.SCHEMA_VERSION`` (meaning of fields).
STORE_SCHEMA_VERSION = 7
#: The ``format`` a paradnn store names in its ``paradnn_meta`` table.
STORE_FORMAT = "paradnn-store"


#: Columns :func:`paradnn.store.load` always returns, in this order (spec fields of every registered family,
#: see :mod:`paradnn.families`); fields a record adds come after them.
COLUMNS: tuple[str, ...] = (
    "key", "workload_key", "status", "error", "time_utc", "schema_version", "kind", "task", "family",
    *families.all_fields(), "batch", "dtype", "optimizer", "devices", "framework",
    *PLATFORM_FIELDS, *SOFTWARE_FIELDS, *SETTINGS_FIELDS, *METRICS,
)


def migrate_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the current schema names it (the row itself, changed in place).

    Store schema 1 (paradnn before frameworks) ran JAX only and called the device platform
    ``backend``: it becomes ``device_platform`` and the row gains ``framework: "jax"``.
    Record schema 2 keyed a row on every framework's version fields and options (JAX rows on
    ``tf_version: None`` and ``torch_compile``, PyTorch rows on JAX's versions); rows before
    schema 7 lack the settings added since (``paradnn.record.SETTINGS_ADDED``: they ran with the
    value filled in; protocol settings on every row, options where the framework declares them). An older row's ``key`` becomes the one the current code gives the same
    config (:func:`paradnn.record.row_key`), so sweeps resume across the upgrade; rows whose
    family or framework is not registered keep theirs. Every field is kept. Idempotent, so rows of any version pass through it on every
    read.
    """
    if "backend" in row and "device_platform" not in row:
        row["device_platform"] = row.pop("backend")
    row.setdefault("framework", "jax")
    version = row.get("schema_version")
    if isinstance(version, int) and version < SCHEMA_VERSION:
        framework = row["framework"]
        declared = (*PROTOCOL_FIELDS, *(frameworks.option_names(framework) if framework in frameworks.names() else ()))
        for added, defaults in SETTINGS_ADDED.items():
            if version < added:
                for name, value in defaults.items():
                    if name in declared:
                        row.setdefault(name, value)
        key = row_key(row)
        if key is not None:
            row["key"] = key
            row["schema_version"] = SCHEMA_VERSION
    return row

#: The tables and indexes of a store (docs/schema.md), created when a store is made.
DDL = """
CREATE TABLE IF NOT EXISTS paradnn_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    time_utc TEXT NOT NULL,
    workload_key TEXT,
    status TEXT NOT NULL,
    family TEXT,
    host TEXT,
    row TEXT NOT NULL,
    UNIQUE (key, time_utc)
);
CREATE INDEX IF NOT EXISTS records_workload_key ON records (workload_key);
CREATE TABLE IF NOT EXISTS claims (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    claimed_unix REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS claims_key ON claims (key);
"""

PathLike = Union[str, os.PathLike]


def _json_default(value: Any) -> Any:
    # numpy scalars and similar: keep numbers numbers.
    for cast in (int, float):
        try:
            if cast is int and float(value).is_integer() and not isinstance(value, float):
                return int(value)
            return cast(value)
        except (TypeError, ValueError):
            continue
    return str(value)


def row_json(row: dict[str, Any]) -> str:
    """``row`` as the JSON text a store keeps (numpy scalars as numbers, NaN and inf as null)."""
    # JSON has no NaN/inf; store them as null so every reader can parse the row.
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
             for k, v in row.items()}
    return json.dumps(clean, default=_json_default, allow_nan=False)



def rows_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """``rows`` as a DataFrame: :data:`COLUMNS` in order, then every other field in the order it
    first appears."""
    extra: dict[str, None] = {}
    for row in rows:
        for k in row:
            if k not in extra:
                extra[k] = None
    columns = list(COLUMNS) + [k for k in extra if k not in COLUMNS]
    return pd.DataFrame.from_records(list(rows), columns=columns)


def current_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` without the attempts a newer attempt replaced (:func:`paradnn.record.superseded`:
    a config measured again because it missed its precision target keeps its newer row), in
    their order: one row per config, and per repeat a config was asked to have."""
    gone = superseded(rows)
    return [row for i, row in enumerate(rows) if i not in gone] if gone else list(rows)
