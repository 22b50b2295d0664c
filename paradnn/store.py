"""The results store: one SQLite file, one row per record, committed as soon as it exists.

>>> import paradnn
>>> df = paradnn.load("results.db")                  # doctest: +SKIP
>>> df = paradnn.load(["tpu.db", "gpu.db"])          # several machines at once  # doctest: +SKIP

The file layout is documented and versioned in docs/schema.md (``STORE_SCHEMA_VERSION``). A row
keeps every field of ``Record.to_dict()`` as JSON plus indexed copies of the identity columns;
:func:`load` gives one DataFrame column per field. A row's identity is ``key`` + ``time_utc``:
merging stores never duplicates a row and never drops a repeated measurement.

A file that is not a paradnn store, or one written by a newer paradnn, raises
:class:`~paradnn.errors.ParadnnError` before anything is written to it.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Union

import pandas as pd

from paradnn.errors import ParadnnError
from paradnn.record import METRICS, PLATFORM_FIELDS, SOFTWARE_FIELDS, Record

__all__ = ["STORE_SCHEMA_VERSION", "COLUMNS", "Store", "load", "merge", "export", "status_counts"]

#: Version of the file layout (tables, columns). Bump when the layout changes; readers refuse
#: stores with a higher version. Independent of ``record.SCHEMA_VERSION`` (meaning of fields).
STORE_SCHEMA_VERSION = 1
_FORMAT = "paradnn-store"
_SQLITE_MAGIC = b"SQLite format 3\x00"
# Seconds a writer waits for another writer's lock before failing; sweeps on one store commit a
# row per config, so contention is short, but a merge of a big store holds the lock longer.
BUSY_TIMEOUT_S = 60.0

_SPEC_FIELDS = ("layers", "nodes", "input", "output", "block", "blocks", "filters", "image",
                "cell", "embed", "length", "vocab", "model")
_SETTINGS_FIELDS = ("steps_per_call", "warmup_calls", "min_calls", "max_calls", "cv_target",
                    "time_budget_s")
#: Columns :func:`load` always returns, in this order; fields a record adds come after them.
COLUMNS: tuple[str, ...] = (
    "key", "workload_key", "status", "error", "time_utc", "schema_version", "kind", "task", "family",
    *_SPEC_FIELDS, "batch", "dtype", "optimizer", "devices",
    *PLATFORM_FIELDS, *SOFTWARE_FIELDS, *_SETTINGS_FIELDS, *METRICS,
)

_DDL = """
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


def _check_file(path: Path) -> str:
    """'new' for a missing or empty file, 'sqlite' for an SQLite file; raises for anything else.

    Reads only the first 16 bytes, so a foreign file is never opened by SQLite for writing.
    """
    if not path.exists():
        return "new"
    if path.is_dir():
        raise ParadnnError(f"store {path}: is a directory, not a paradnn store (an SQLite file)")
    with open(path, "rb") as f:
        head = f.read(16)
    if not head:
        return "new"
    if head != _SQLITE_MAGIC:
        raise ParadnnError(f"store {path}: not a paradnn store (not an SQLite file); "
                           "choose a new path or an existing paradnn store")
    return "sqlite"


def _check_meta(path: Path) -> int:
    """The store schema version of an existing SQLite file, opened read-only; raises if foreign
    or newer; 0 for an SQLite file without any table. Read-only so that refusing a file cannot
    change it."""
    uri = f"file:{path.resolve()}?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise ParadnnError(f"store {path}: cannot be opened read-only: {exc}") from None
    try:
        try:
            rows = dict(con.execute("SELECT name, value FROM paradnn_meta").fetchall())
        except sqlite3.DatabaseError as exc:
            if "no such table" in str(exc):
                (tables,) = con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                if tables == 0:
                    # An SQLite file with nothing in it: another process is creating this store
                    # right now (or the user made an empty database). Initializing it is safe.
                    return 0
                raise ParadnnError(f"store {path}: not a paradnn store (an SQLite file without "
                                   "a paradnn_meta table); choose another path") from None
            raise ParadnnError(f"store {path}: unreadable SQLite file: {exc}") from None
    finally:
        con.close()
    if rows.get("format") != _FORMAT:
        raise ParadnnError(f"store {path}: not a paradnn store (paradnn_meta format is "
                           f"{rows.get('format')!r}, expected {_FORMAT!r})")
    try:
        version = int(rows["schema_version"])
    except (KeyError, ValueError):
        raise ParadnnError(f"store {path}: paradnn_meta has no valid schema_version") from None
    if version > STORE_SCHEMA_VERSION:
        raise ParadnnError(
            f"store {path}: schema version {version} is newer than this paradnn supports "
            f"({STORE_SCHEMA_VERSION}); upgrade paradnn to read or write it")
    return version


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


def _row_json(row: dict[str, Any]) -> str:
    # JSON has no NaN/inf; store them as null so every reader can parse the row.
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
             for k, v in row.items()}
    return json.dumps(clean, default=_json_default, allow_nan=False)


def _process_start_token(pid: int) -> str | None:
    """The process's start time in clock ticks (Linux), so a reused pid is not taken as alive."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _owner_alive(owner: str, host: str, pid: int) -> bool:
    if host != socket.gethostname():
        return True  # cannot tell; stale foreign claims expire by age (see Store.claim)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    token = _process_start_token(pid)
    return token is None or owner.endswith(f":{token}")


class Store:
    """An open results store. Use as a context manager or call :meth:`close`.

    ``Store(path)`` creates the file if it does not exist (``create=False`` refuses to). Every
    :meth:`add` is one committed transaction: a sweep killed at any instant loses at most the
    record being measured.
    """

    def __init__(self, path: PathLike, create: bool = True):
        self.path = Path(path)
        kind = _check_file(self.path)
        if kind == "new" and not create:
            raise ParadnnError(f"store {self.path}: no such paradnn store")
        if kind == "sqlite" and _check_meta(self.path) == 0:
            kind = "empty"
        if kind == "new":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._con = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S,
                                    isolation_level=None, check_same_thread=False)
        self._con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        # WAL: readers never block the writer and a killed writer leaves a consistent file.
        self._con.execute("PRAGMA journal_mode = WAL")
        self._con.execute("PRAGMA synchronous = NORMAL")
        if kind in ("new", "empty"):
            self._init_schema()
        self._owner: str | None = None

    def _init_schema(self) -> None:
        with self._transaction():
            for statement in _DDL.split(";"):
                if statement.strip():
                    self._con.execute(statement)
            self._con.execute("INSERT OR IGNORE INTO paradnn_meta VALUES ('format', ?)",
                              (_FORMAT,))
            self._con.execute("INSERT OR IGNORE INTO paradnn_meta VALUES ('schema_version', ?)",
                              (str(STORE_SCHEMA_VERSION),))
            self._con.execute("INSERT OR IGNORE INTO paradnn_meta VALUES ('created_utc', ?)",
                              (_dt.datetime.now(_dt.timezone.utc).isoformat(),))

    # -- transactions --------------------------------------------------------------------------
    class _Tx:
        def __init__(self, con: sqlite3.Connection):
            self.con = con

        def __enter__(self) -> sqlite3.Connection:
            # IMMEDIATE takes the write lock up front, so read-then-write decisions (claims)
            # are atomic across processes.
            self.con.execute("BEGIN IMMEDIATE")
            return self.con

        def __exit__(self, exc_type, exc, tb) -> None:
            self.con.execute("ROLLBACK" if exc_type else "COMMIT")

    def _transaction(self) -> "Store._Tx":
        return Store._Tx(self._con)

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- writing -------------------------------------------------------------------------------
    def add(self, record: Record | dict[str, Any], claim: int | None = None) -> bool:
        """Commit one record (a Record or its ``to_dict()`` row); release ``claim`` with it.

        Returns False when a row with the same key and time_utc is already stored.
        """
        row = record.to_dict() if isinstance(record, Record) else dict(record)
        with self._transaction() as con:
            added = self._insert(con, row)
            if claim is not None:
                con.execute("DELETE FROM claims WHERE id = ?", (claim,))
        return added

    @staticmethod
    def _insert(con: sqlite3.Connection, row: dict[str, Any]) -> bool:
        missing = [k for k in ("key", "time_utc", "status") if not row.get(k)]
        if missing:
            raise ParadnnError(f"record row lacks {missing[0]!r}: not a paradnn record")
        cur = con.execute(
            "INSERT OR IGNORE INTO records (key, time_utc, workload_key, status, family, host, row)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (row["key"], row["time_utc"], row.get("workload_key"), row["status"],
             row.get("family"), row.get("host"), _row_json(row)))
        return cur.rowcount == 1

    def add_rows(self, rows: Iterable[dict[str, Any]]) -> tuple[int, int]:
        """Insert rows in one transaction; returns (added, already present)."""
        added = dup = 0
        with self._transaction() as con:
            for row in rows:
                if self._insert(con, row):
                    added += 1
                else:
                    dup += 1
        return added, dup

    # -- claims: two sweeps on one store split the work instead of measuring a config twice --
    def _owner_id(self) -> str:
        if self._owner is None:
            pid = os.getpid()
            self._owner = f"{socket.gethostname()}:{pid}:{_process_start_token(pid)}"
        return self._owner

    def claim(self, key: str, wanted: int, stale_after_s: float) -> int | None:
        """Reserve one measurement of ``key`` if it has fewer than ``wanted`` rows plus live claims.

        Claims of dead processes on this host are dropped; claims from other hosts expire after
        ``stale_after_s`` seconds. Returns the claim id, or None when nothing is left to do.
        """
        with self._transaction() as con:
            (rows,) = con.execute("SELECT COUNT(*) FROM records WHERE key = ?", (key,)).fetchone()
            live = 0
            now = time.time()
            for cid, owner, host, pid, when in con.execute(
                    "SELECT id, owner, host, pid, claimed_unix FROM claims WHERE key = ?",
                    (key,)).fetchall():
                stale = (not _owner_alive(owner, host, pid)
                         or (host != socket.gethostname() and now - when > stale_after_s))
                if stale:
                    con.execute("DELETE FROM claims WHERE id = ?", (cid,))
                else:
                    live += 1
            if rows + live >= wanted:
                return None
            cur = con.execute(
                "INSERT INTO claims (key, owner, host, pid, claimed_unix) VALUES (?, ?, ?, ?, ?)",
                (key, self._owner_id(), socket.gethostname(), os.getpid(), now))
            return int(cur.lastrowid)

    def release(self, claim: int) -> None:
        """Give a claim back without a record (the sweep was interrupted)."""
        with self._transaction() as con:
            con.execute("DELETE FROM claims WHERE id = ?", (claim,))

    # -- reading -------------------------------------------------------------------------------
    def counts_by_key(self, keys: Iterable[str] | None = None) -> dict[str, int]:
        """Number of stored rows per record key (only ``keys`` when given)."""
        rows = self._con.execute("SELECT key, COUNT(*) FROM records GROUP BY key").fetchall()
        counts = dict(rows)
        if keys is not None:
            wanted = set(keys)
            counts = {k: v for k, v in counts.items() if k in wanted}
        return counts

    def rows(self) -> list[dict[str, Any]]:
        """Every stored row as a dict (the record's ``to_dict()``), in insertion order."""
        return [json.loads(r) for (r,) in
                self._con.execute("SELECT row FROM records ORDER BY id").fetchall()]

    def __len__(self) -> int:
        return int(self._con.execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame with one column per field (see :func:`load`)."""
        return _frame(self.rows())


def _frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    extra: dict[str, None] = {}
    for row in rows:
        for k in row:
            if k not in extra:
                extra[k] = None
    columns = list(COLUMNS) + [k for k in extra if k not in COLUMNS]
    return pd.DataFrame.from_records(list(rows), columns=columns)


def _paths(paths: PathLike | Sequence[PathLike]) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    out = [Path(p) for p in paths]
    if not out:
        raise ParadnnError("load: no store paths given")
    return out


def load(paths: PathLike | Sequence[PathLike]) -> pd.DataFrame:
    """Load one store or several into one DataFrame, one row per record.

    Columns: ``COLUMNS`` (identity, status and error, spec fields of every family, batch, dtype,
    optimizer, devices, platform, software, measurement settings, every metric of
    ``record.METRICS`` with the units given there), then any extra field a record carries.
    A field a record does not have is missing (None/NaN). Rows that appear in several stores
    (same key and time_utc) are kept once. Opens the files read-only.
    """
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for path in _paths(paths):
        kind = _check_file(path)
        if kind == "new":
            raise ParadnnError(f"store {path}: no such paradnn store")
        if _check_meta(path) == 0:
            continue  # an empty SQLite file: no rows yet
        con = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        try:
            for key, t, r in con.execute("SELECT key, time_utc, row FROM records ORDER BY id"):
                if (key, t) not in seen:
                    seen.add((key, t))
                    rows.append(json.loads(r))
        finally:
            con.close()
    return _frame(rows)


def merge(inputs: Sequence[PathLike], output: PathLike) -> tuple[int, int]:
    """Combine stores into ``output`` (created, or an existing store extended) without
    duplicates. Every input is checked before anything is written. Returns (rows added, rows
    already present)."""
    paths = _paths(inputs)
    out = Path(output)
    for p in paths:
        if _check_file(p) == "new":
            raise ParadnnError(f"store {p}: no such paradnn store")
        _check_meta(p)
        if out.exists() and p.resolve() == out.resolve():
            raise ParadnnError(f"merge: input {p} is also the output; name a different -o")
    rows: list[dict[str, Any]] = []
    for p in paths:
        if _check_meta(p) != 0:
            rows.extend(_raw_rows(p))
    with Store(out) as store:
        return store.add_rows(rows)


def _raw_rows(path: Path) -> list[dict[str, Any]]:
    con = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    try:
        return [json.loads(r) for (r,) in con.execute("SELECT row FROM records ORDER BY id")]
    finally:
        con.close()


def export(paths: PathLike | Sequence[PathLike], output: PathLike) -> int:
    """Write the rows of one or more stores to ``output`` (``.csv`` or ``.parquet``); returns
    the number of rows."""
    out = Path(output)
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ParadnnError(f"export: output {out} must end in .csv or .parquet")
    df = load(paths)
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".csv":
        df.to_csv(out, index=False)
    else:
        df.to_parquet(out, index=False)
    return len(df)


def status_counts(paths: PathLike | Sequence[PathLike]) -> dict[str, pd.DataFrame]:
    """Counts of rows by status, by family and status, and by platform and status."""
    df = load(paths)
    platform = (df["backend"].fillna("?").astype(str) + "/"
                + df["device_kind"].fillna("?").astype(str))
    return {
        "status": df.groupby("status").size().rename("rows").to_frame(),
        "family": pd.crosstab(df["family"].fillna("?"), df["status"]),
        "platform": pd.crosstab(platform.rename("platform"), df["status"]),
    }
