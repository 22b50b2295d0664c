"""Reading stores out: :func:`load` (one DataFrame of one store or several, one row per config),
:func:`merge` (stores combined into one without duplicates), :func:`export` (CSV or Parquet),
:func:`status_counts` and :func:`time_stamps` (the rows' times alone)."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from paradnn.errors import ParadnnError, ParadnnWarning, echo
from paradnn.store.damage import DAMAGE_ATTR, Unreadable, quick_check, refuse_damaged_header, scan, warn_damage
from paradnn.store.files import Guard, check_file, check_meta, empty_file, header_field_damage, open_readonly
from paradnn.store.schema import PathLike, current_rows, rows_frame
from paradnn.store.writer import Store


def _paths(paths: PathLike | Sequence[PathLike]) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    out = [Path(p) for p in paths]
    if not out:
        raise ParadnnError("load: no store paths given")
    return out


def load(paths: PathLike | Sequence[PathLike], attempts: bool = False) -> pd.DataFrame:
    """Load one store or several into one DataFrame, one row per config (and per repeat).

    A config measured again because its row missed its precision target (a sweep's automatic
    retry, ``--remeasure-unstable``) keeps its newer row: the older attempt is left out
    (:func:`current_rows`), as status, compare, predict, the report and every analysis see the
    store. ``attempts=True`` returns every row, the replaced attempts included.

    Columns: ``COLUMNS`` (identity, status and error, spec fields of every family, batch, dtype,
    optimizer, devices, platform, software, measurement settings, every metric of
    ``record.METRICS`` with the units given there), then any extra field a record carries.
    A field a record does not have is missing (None/NaN). Every field is read as its type
    (:func:`paradnn.rowschema.read_row`; a row with a field that is not is unreadable, below).
    Rows that appear in several stores (same key, time_utc and content) are kept once; two
    different rows of two stores that share key and time are both kept, with one warning naming
    the stores and counting them (``paradnn merge`` refuses to combine such stores). A
    zero-byte file is a store with no rows yet. Opens the files read-only and leaves no file
    beside them that was not there (SQLite's ``-wal`` and ``-shm``).

    A damaged store still loads: every row that reads back intact is in the frame; a warning
    (one line per store) counts and names the others, and ``frame.attrs[DAMAGE_ATTR]`` (set
    only when something is damaged) holds ``{"unreadable": [{"store", "rowid", "key", "cause"},
    ...], "problems": {store: [quick_check messages]}}`` (causes: :data:`paradnn.store.UNREADABLE_CAUSES`).
    A store that cannot be opened at all (truncated, a damaged header) raises StoreError.
    """
    rows: list[dict[str, Any]] = []
    # (key, time_utc) -> [(store, row), ...]: the different rows of one identity, by store.
    seen: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    conflicts: dict[tuple[str, str], set[str]] = {}  # identity -> the stores that differ on it
    lost: list[Unreadable] = []
    problems: dict[str, list[str]] = {}
    for path in _paths(paths):
        found, unreadable, trouble = _raw(path)
        lost.extend(unreadable)
        if trouble:
            problems[str(path)] = trouble
        for row in found:
            identity = (row["key"], row["time_utc"])
            same = seen.setdefault(identity, [])
            if any(row == other for _, other in same):
                continue
            # Within one store two rows never share an identity (UNIQUE), except rows an older
            # schema's migration gave one key (docs/schema.md): only stores disagree here.
            others = {store for store, _ in same if store != str(path)}
            if others:
                conflicts.setdefault(identity, set()).update(others | {str(path)})
            same.append((str(path), row))
            rows.append(row)
    if conflicts:
        _warn_conflicts(conflicts)
    frame = rows_frame(rows if attempts else current_rows(rows))
    if lost or problems:
        frame.attrs[DAMAGE_ATTR] = {"unreadable": [asdict(u) for u in lost], "problems": problems}
    return frame


def _warn_conflicts(conflicts: dict[tuple[str, str], set[str]]) -> None:
    """One warning for the rows of several stores that share key and time but differ."""
    stores = sorted(set().union(*conflicts.values()))
    (key, when), _ = next(iter(conflicts.items()))
    warnings.warn(
        f"stores {', '.join(stores)}: {len(conflicts)} row(s) share key and time with a different "
        f"row of another store (first: key {echo(key, 40)} at {echo(when, 40)}); both are kept, "
        "as two measurements of their config: which one is right cannot be told from the rows, "
        "and `paradnn merge` refuses to combine these stores until one of them is left out",
        ParadnnWarning, stacklevel=3)


def _raw(path: Path) -> tuple[list[dict[str, Any]], list[Unreadable], list[str]]:
    """A store's rows that read back intact, the rows that do not, and what SQLite's
    quick_check found (a warning says so); raises for a missing, foreign or unopenable file.
    A zero-byte file has no rows (:func:`empty_file`)."""
    if check_file(path) == "new":
        if empty_file(path):
            return [], [], []
        raise ParadnnError(f"store {path}: no such paradnn store")
    if check_meta(path) == 0:
        return [], [], []  # an empty SQLite file: no rows yet
    # The header before SQLite opens the file: reading it with a connection open would drop
    # that connection's locks (paradnn.store.files._HELD); used only if SQLite finds damage.
    header = header_field_damage(path)
    con = open_readonly(path)
    try:
        with Guard(path, "be read"):
            problems = quick_check(con, path)
            refuse_damaged_header(path, problems, header, "be read")
            rows, lost = scan(con, path)
    finally:
        con.close()
    warn_damage(path, lost, problems)
    return [row for _, row in rows], lost, problems


def merge(inputs: Sequence[PathLike], output: PathLike) -> tuple[int, int]:
    """Combine stores into ``output`` (created, or an existing store extended) without
    duplicates. Every input is checked before anything is written. Returns (rows added, rows
    already present)."""
    paths = _paths(inputs)
    out = Path(output)
    for p in paths:
        if check_file(p) == "new":
            if not empty_file(p):
                raise ParadnnError(f"store {p}: no such paradnn store")
        else:
            check_meta(p)
        if out.exists() and (p.resolve() == out.resolve() or os.path.samefile(p, out)):
            raise ParadnnError(f"merge: input {p} is also the output; name a different -o")
    rows: list[dict[str, Any]] = []
    for p in paths:
        rows.extend(_raw(p)[0])
    with Store(out) as store:
        return store.add_rows(rows)


#: What :func:`export` writes: CSV or Parquet, by the output's suffix.
EXPORT_SUFFIXES = (".csv", ".parquet")


def export(paths: PathLike | Sequence[PathLike], output: PathLike, force: bool = False,
           attempts: bool = False) -> int:
    """Write the rows of one or more stores to ``output`` (``.csv`` or ``.parquet``), one per
    config unless ``attempts`` (:func:`load`); returns the number of rows. The output is never
    one of the stores, never a file paradnn did not write (unless ``force``), and is replaced
    atomically (:mod:`paradnn.outputs`)."""
    from paradnn.outputs import check_output, write_output

    out = Path(output)
    suffix = out.suffix.lower()
    if suffix not in EXPORT_SUFFIXES:
        raise ParadnnError(f"export: output {out} must end in .csv or .parquet")
    inputs = _paths(paths)
    check_output(out, "export -o", inputs, force)  # before the (possibly long) load
    df = load(inputs, attempts=attempts)
    if suffix == ".csv":
        write_output(out, lambda tmp: _write_csv(df, tmp), "export -o", inputs, force)
    else:
        table = _parquet_columns(df)
        write_output(out, lambda tmp: table.to_parquet(tmp, index=False), "export -o", inputs,
                     force)
    return len(df)


def _write_csv(frame: pd.DataFrame, path: PathLike) -> None:
    """``frame`` as CSV through Arrow's writer: about 5x faster than pandas' ``to_csv`` on a
    40,000-row store (3.3 s to 0.75 s). Text is quoted; a number is written in its shortest form
    that reads back to the same float (so a whole number has no ``.0``); a missing value is an
    empty field; true and false are ``true`` and ``false``. A column of Python objects (a list
    such as ``step_times_s``, or values of several kinds) is written as text, a list as JSON."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    columns = {name: pa.array([_csv_text(v) for v in frame[name]], pa.string())
               if frame[name].dtype == object else pa.array(frame[name], from_pandas=True)
               for name in frame.columns}
    pacsv.write_csv(pa.table(columns), str(path))


def _csv_text(value: Any) -> str | None:
    """A value of a column of Python objects as CSV text, as Arrow writes a typed column's."""
    if _missing(value):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _parquet_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "number" if -2**63 <= value < 2**63 else "integer past 64 bits"
    if isinstance(value, float):
        return "number"
    return type(value).__name__  # str, list


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _parquet_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a type per column that Parquet can hold. A declared field has one already
    (:mod:`paradnn.rowschema`); a field the reader keeps as it is (one a newer record or another
    tool adds) may be text in one row and a number in another, or an integer past 64 bits,
    which Parquet refuses for the whole file: such a column is written as text."""
    out = frame
    for name in frame.columns:
        column = frame[name]
        if column.dtype != object:
            continue
        kinds = {_parquet_kind(v) for v in column if not _missing(v)}
        if len(kinds) > 1 or "integer past 64 bits" in kinds:
            if out is frame:
                out = frame.copy()
            out[name] = [None if _missing(v) else json.dumps(v) if isinstance(v, list) else str(v)
                         for v in column]
    return out


def time_stamps(path: PathLike) -> pd.Series:
    """The ``time_utc`` text of every row of the store at ``path`` (every attempt), read from its
    indexed column alone: no row is decoded, so it stays fast on a large store (a full
    :func:`load` of 38,880 rows took 6 s, this 0.04 s), which is what a sweep stopped by SIGTERM
    needs to say what it kept within a scheduler's grace period. Empty for a new or empty
    store; a damaged or unreadable one raises StoreError (:func:`load` reads past damage)."""
    path = Path(path)
    if check_file(path) == "new" or check_meta(path) == 0:
        return pd.Series([], dtype=object, name="time_utc")
    con = open_readonly(path)
    try:
        with Guard(path, "be read"):
            stamps = [row[0] for row in con.execute("SELECT time_utc FROM records")]
    finally:
        con.close()
    return pd.Series(stamps, dtype=object, name="time_utc")


def status_counts(paths: PathLike | Sequence[PathLike]) -> dict[str, pd.DataFrame]:
    """Counts of rows by status, by family and status, and by platform and status."""
    df = load(paths)
    platform = (df["device_platform"].fillna("?").astype(str) + "/"
                + df["device_kind"].fillna("?").astype(str))
    return {
        "status": df.groupby("status").size().rename("rows").to_frame(),
        "family": pd.crosstab(df["family"].fillna("?"), df["status"]),
        "platform": pd.crosstab(platform.rename("platform"), df["status"]),
    }
