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

Faults degrade gracefully (docs/reliability.md): a row whose content cannot be decoded is
skipped with a :class:`~paradnn.errors.ParadnnWarning` naming it; a store on read-only media is
read in SQLite's immutable mode; an SQLite failure (read-only file, full disk, corrupt file, a
lock held too long) becomes one :class:`~paradnn.errors.StoreError`, classified by SQLite's
error code, after which every row committed before is still in the file.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import socket
import sqlite3
import time
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Union

import pandas as pd

from paradnn.errors import ParadnnError, ParadnnWarning, StoreError, echo
from paradnn.measure import SETTINGS_FIELDS
from paradnn import families
from paradnn.record import METRICS, PLATFORM_FIELDS, SCHEMA_VERSION, SOFTWARE_FIELDS, Record, row_key

__all__ = ["STORE_SCHEMA_VERSION", "COLUMNS", "Store", "load", "merge", "export", "migrate_row",
           "status_counts"]

#: Version of the file layout (tables, columns). Bump when the layout changes; readers refuse
#: stores with a higher version. Independent of ``record.SCHEMA_VERSION`` (meaning of fields).
STORE_SCHEMA_VERSION = 3
_FORMAT = "paradnn-store"
_SQLITE_MAGIC = b"SQLite format 3\x00"
# Seconds a writer waits for another writer's lock before failing; sweeps on one store commit a
# row per config, so contention is short, but a merge of a big store holds the lock longer.
BUSY_TIMEOUT_S = 60.0

#: Columns :func:`load` always returns, in this order (spec fields of every registered family,
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
    ``tf_version: None`` and ``torch_compile``, PyTorch rows on JAX's versions): its ``key``
    becomes the one the current code gives the same config (:func:`paradnn.record.row_key`),
    so sweeps resume across the upgrade; rows whose family or framework is not registered keep
    theirs. Every field is kept. Idempotent, so rows of any version pass through it on every
    read.
    """
    if "backend" in row and "device_platform" not in row:
        row["device_platform"] = row.pop("backend")
    row.setdefault("framework", "jax")
    version = row.get("schema_version")
    if isinstance(version, int) and version < 3:
        key = row_key(row)
        if key is not None:
            row["key"] = key
            row["schema_version"] = SCHEMA_VERSION
    return row

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

# SQLite primary result codes (https://www.sqlite.org/rescode.html) -> what it means for a store.
_SQLITE_CAUSES = {
    3: "permission denied",                                      # SQLITE_PERM
    5: f"locked by another process for more than {BUSY_TIMEOUT_S:g} s",  # SQLITE_BUSY
    8: "read-only (a read-only file, folder or file system)",    # SQLITE_READONLY
    10: "input/output error (a full disk or a failing medium)",  # SQLITE_IOERR
    11: "corrupt (the database disk image is malformed)",        # SQLITE_CORRUPT
    13: "the disk is full",                                      # SQLITE_FULL
    14: "cannot be opened (a missing folder, or no permission to create the -wal/-shm files)",
    26: "not an SQLite database",                                # SQLITE_NOTADB
}
_SQLITE_READONLY, _SQLITE_FULL = 8, 13


def _store_error(path: Path, exc: sqlite3.Error, doing: str) -> StoreError:
    """One StoreError for an SQLite failure, its cause found from SQLite's error code."""
    code = getattr(exc, "sqlite_errorcode", None)
    cause = _SQLITE_CAUSES.get(code & 0xFF if isinstance(code, int) else -1,
                               f"SQLite error {getattr(exc, 'sqlite_errorname', type(exc).__name__)}")
    advice = {_SQLITE_FULL: "; every row committed before is kept: free space and run again "
                            "(a sweep resumes where it stopped)",
              _SQLITE_READONLY: "; read it with status/report/export, or copy it somewhere "
                                "writable to add to it"}.get(code & 0xFF if isinstance(code, int) else -1, "")
    return StoreError(f"store {path}: cannot {doing}: {cause}{advice}")


def _check_file(path: Path) -> str:
    """'new' for a missing or empty file, 'sqlite' for an SQLite file; raises for anything else.

    Reads only the first 16 bytes, so a foreign file is never opened by SQLite for writing.
    """
    try:
        if not path.exists():
            return "new"
        if path.is_dir():
            raise ParadnnError(f"store {path}: is a directory, not a paradnn store (an SQLite file)")
        if not path.is_file():
            # /dev/null, a FIFO, a socket: SQLite would "open" some of them and lose every row.
            raise ParadnnError(f"store {path}: is not a regular file, not a paradnn store "
                               "(an SQLite file); choose a file path")
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise StoreError(f"store {path}: cannot be read: {exc.strerror or exc}") from None
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
    con = _open_ro(path)
    try:
        try:
            tables = {name for (name,) in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "paradnn_meta" not in tables:
                if not tables:
                    # An SQLite file with nothing in it: another process is creating this store
                    # right now (or the user made an empty database). Initializing it is safe.
                    return 0
                raise ParadnnError(f"store {path}: not a paradnn store (an SQLite file without "
                                   "a paradnn_meta table); choose another path")
            rows = dict(con.execute("SELECT name, value FROM paradnn_meta").fetchall())
        except sqlite3.DatabaseError as exc:
            raise _store_error(path, exc, "be read") from None
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


def _uri(path: Path, flags: str) -> str:
    # Percent-encode what URIs reserve so that any file name opens the file it names.
    from urllib.parse import quote

    return f"file:{quote(str(path.resolve()))}?{flags}"


def _open_ro(path: Path) -> sqlite3.Connection:
    """A read-only connection. A store in WAL mode needs its -shm file even to be read; on
    read-only media (or in a read-only folder) that file cannot be created, so the store is then
    opened immutable, with a warning: SQLite reads the main file as it is and assumes nobody
    writes it meanwhile (rows only in an uncheckpointed -wal file are not seen)."""
    try:
        con = sqlite3.connect(_uri(path, "mode=ro"), uri=True, timeout=BUSY_TIMEOUT_S)
        con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return con
    except sqlite3.OperationalError as exc:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code not in (_SQLITE_READONLY, 14, 10):  # read-only, cannot open -shm, I/O
            raise _store_error(path, exc, "be opened read-only") from None
    try:
        con = sqlite3.connect(_uri(path, "immutable=1"), uri=True, timeout=BUSY_TIMEOUT_S)
        con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise _store_error(path, exc, "be opened read-only") from None
    warnings.warn(f"store {path}: its folder or medium is read-only, so it was opened immutable "
                  "(rows still only in a -wal file are not seen)", ParadnnWarning, stacklevel=3)
    return con


def _decode(path: Path, rowid: Any, key: Any, text: Any) -> dict[str, Any] | None:
    """A stored row's dict, or None (with a warning naming it) when it cannot be decoded."""
    try:
        row = json.loads(text)
        if isinstance(row, dict) and row.get("key") and row.get("status"):
            return migrate_row(row)
        reason = "not a record (no key or status)"
    except (TypeError, ValueError) as exc:  # json.JSONDecodeError and non-text columns
        reason = f"not valid JSON ({type(exc).__name__})"
    warnings.warn(f"store {path}: row id {rowid} (key {echo(key, 40)}) is corrupt, {reason}; "
                  "skipped", ParadnnWarning, stacklevel=3)
    return None


def _read_rows(con: sqlite3.Connection, path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(key, time_utc, row) of every readable row in insertion order. A corrupt row is skipped
    with a warning; if a whole page cannot be scanned, rows are read one by one by id."""
    query = "SELECT id, key, time_utc, row FROM records"
    try:
        raw = con.execute(query + " ORDER BY id").fetchall()
    except sqlite3.DatabaseError as exc:
        try:
            ids = [i for (i,) in con.execute("SELECT id FROM records ORDER BY id")]
        except sqlite3.DatabaseError:
            raise _store_error(path, exc, "be read") from None
        raw, lost = [], 0
        for i in ids:
            try:
                raw.extend(con.execute(query + " WHERE id = ?", (i,)).fetchall())
            except sqlite3.DatabaseError:
                lost += 1
        if lost:
            warnings.warn(f"store {path}: {lost} row(s) are on corrupt pages and were skipped",
                          ParadnnWarning, stacklevel=3)
    out = []
    for rowid, key, t, text in raw:
        row = _decode(path, rowid, key, text)
        if row is not None:
            out.append((key, t, row))
    return out


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
        if kind == "sqlite" and not (os.access(self.path, os.W_OK)
                                     and os.access(self.path.parent, os.W_OK)):
            # access(2) reports a read-only file system even to root; SQLite needs the folder
            # too, for the -wal and -shm files.
            raise StoreError(f"store {self.path}: cannot be opened for writing: it or its folder "
                             "is read-only (a read-only file, folder or file system); read it "
                             "with status/report/export, or copy it somewhere writable to add "
                             "to it")
        if kind == "sqlite" and _check_meta(self.path) == 0:
            kind = "empty"
        if kind == "new":
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"store {self.path}: cannot create its folder: "
                                 f"{exc.strerror or exc}") from None
        self._owner: str | None = None
        try:
            self._con = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S,
                                        isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise _store_error(self.path, exc, "be opened for writing") from None
        try:
            self._con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            # WAL: readers never block the writer and a killed writer leaves a consistent file.
            self._con.execute("PRAGMA journal_mode = WAL")
            self._con.execute("PRAGMA synchronous = NORMAL")
            if kind in ("new", "empty"):
                self._init_schema()
            else:
                # Take the write lock (a read-only store fails here, before any work) and bring
                # an older store's rows to the current schema, all or nothing.
                with self._transaction() as con:
                    self._migrate(con)
        except sqlite3.Error as exc:
            self._con.close()
            raise _store_error(self.path, exc, "be opened for writing") from None

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

    def _migrate(self, con: sqlite3.Connection) -> None:
        (version,) = con.execute(
            "SELECT value FROM paradnn_meta WHERE name = 'schema_version'").fetchone()
        if int(version) >= STORE_SCHEMA_VERSION:
            return
        for rowid, key, text in con.execute("SELECT id, key, row FROM records").fetchall():
            try:
                row = json.loads(text)
            except (TypeError, ValueError):
                continue  # a corrupt row stays as it is: reads skip it with a warning
            if isinstance(row, dict):
                row = migrate_row(row)
                try:
                    con.execute("UPDATE records SET row = ?, key = ? WHERE id = ?",
                                (_row_json(row), row.get("key") or key, rowid))
                except sqlite3.IntegrityError:
                    # Two old rows that now share key and time (e.g. a JAX config measured at
                    # one instant with two torch_compile values, which JAX ignores): the second
                    # keeps its old key rather than vanish.
                    con.execute("UPDATE records SET row = ? WHERE id = ?",
                                (_row_json({**row, "key": key}), rowid))
        con.execute("UPDATE paradnn_meta SET value = ? WHERE name = 'schema_version'",
                    (str(STORE_SCHEMA_VERSION),))

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
            if exc_type is None:
                self.con.execute("COMMIT")
            elif self.con.in_transaction:
                try:
                    self.con.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # SQLite rolled back itself (e.g. after SQLITE_FULL)

    def _transaction(self) -> "Store._Tx":
        return Store._Tx(self._con)

    def _write(self, doing: str) -> "_Guard":
        """A context turning an SQLite failure into one StoreError naming the store."""
        return _Guard(self.path, doing)

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
        with self._write("add a record"), self._transaction() as con:
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
        """Insert rows in one transaction; returns (added, already present).

        A row whose key and time are already stored counts as present only when its content is
        the same; two different rows sharing key and time raise StoreError and nothing is
        written, because keeping either would silently lose the other.
        """
        added = dup = 0
        conflicts: list[str] = []
        with self._write("add rows"), self._transaction() as con:
            for row in rows:
                if self._insert(con, row):
                    added += 1
                    continue
                (stored,) = con.execute("SELECT row FROM records WHERE key = ? AND time_utc = ?",
                                        (row["key"], row["time_utc"])).fetchone()
                if _same_content(stored, row):
                    dup += 1
                else:
                    conflicts.append(f"key {row['key']} at {row['time_utc']}")
            if conflicts:
                raise StoreError(
                    f"store {self.path}: {len(conflicts)} row(s) share key and time with a "
                    f"different row (first: {conflicts[0]}); nothing was written, because "
                    "keeping one would lose the other")
        return added, dup

    # -- claims: two sweeps on one store split the work instead of measuring a config twice --
    def _owner_id(self) -> str:
        if self._owner is None:
            pid = os.getpid()
            self._owner = f"{socket.gethostname()}:{pid}:{_process_start_token(pid)}"
        return self._owner

    def claim(self, key: str, wanted: int, stale_after_s: float, unstable: bool = True) -> int | None:
        """Reserve one measurement of ``key`` if it has fewer than ``wanted`` rows plus live claims
        (rows counted as in :meth:`counts_by_key`).

        Claims of dead processes on this host are dropped; claims from other hosts expire after
        ``stale_after_s`` seconds. Returns the claim id, or None when nothing is left to do.
        """
        with self._write("claim a config"), self._transaction() as con:
            (rows,) = con.execute(f"SELECT COUNT(*) FROM records WHERE key = ? AND {_counted(unstable)}",
                                  (key,)).fetchone()
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
        with self._write("release a claim"), self._transaction() as con:
            con.execute("DELETE FROM claims WHERE id = ?", (claim,))

    # -- reading -------------------------------------------------------------------------------
    def counts_by_key(self, keys: Iterable[str] | None = None, unstable: bool = True) -> dict[str, int]:
        """Number of stored rows per record key (only ``keys`` when given); with ``unstable``
        False, ``ok`` rows that missed their precision target (``stable`` false) do not count."""
        with self._write("count rows"):
            rows = self._con.execute(
                f"SELECT key, COUNT(*) FROM records WHERE {_counted(unstable)} GROUP BY key").fetchall()
        counts = dict(rows)
        if keys is not None:
            wanted = set(keys)
            counts = {k: v for k, v in counts.items() if k in wanted}
        return counts

    def rows(self) -> list[dict[str, Any]]:
        """Every stored row as a dict (the record's ``to_dict()``), in insertion order; corrupt
        rows are skipped with a warning."""
        return [row for _, _, row in _read_rows(self._con, self.path)]

    def __len__(self) -> int:
        return int(self._con.execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame with one column per field (see :func:`load`)."""
        return _frame(self.rows())


def _counted(unstable: bool) -> str:
    """SQL condition on a records row: whether it counts as a done measurement of its key."""
    if unstable:
        return "1"
    # CASE guards json_extract: a corrupt row counts (it is skipped when loading) instead of
    # being an error that stops the count.
    return ("NOT (status = 'ok' AND "
            "CASE WHEN json_valid(row) THEN json_extract(row, '$.stable') END = 0)")


class _Guard:
    def __init__(self, path: Path, doing: str):
        self.path, self.doing = path, doing

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and issubclass(exc_type, sqlite3.Error):
            raise _store_error(self.path, exc, self.doing) from None


def _same_content(stored: str, row: dict[str, Any]) -> bool:
    try:
        return json.loads(stored) == json.loads(_row_json(row))
    except ValueError:
        return False


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
    (same key, time_utc and content) are kept once; two different rows that share key and time
    are both kept. Opens the files read-only; a corrupt row is skipped with a warning naming it.
    """
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for path in _paths(paths):
        for key, t, row in _raw(path):
            same = seen.setdefault((key, t), [])
            if row not in same:
                same.append(row)
                rows.append(row)
    return _frame(rows)


def _raw(path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(key, time_utc, row) of a store's readable rows; raises for a missing or foreign file."""
    if _check_file(path) == "new":
        raise ParadnnError(f"store {path}: no such paradnn store")
    if _check_meta(path) == 0:
        return []  # an empty SQLite file: no rows yet
    con = _open_ro(path)
    try:
        return _read_rows(con, path)
    finally:
        con.close()


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
        if out.exists() and (p.resolve() == out.resolve() or os.path.samefile(p, out)):
            raise ParadnnError(f"merge: input {p} is also the output; name a different -o")
    rows: list[dict[str, Any]] = []
    for p in paths:
        rows.extend(row for _, _, row in _raw(p))
    with Store(out) as store:
        return store.add_rows(rows)


def export(paths: PathLike | Sequence[PathLike], output: PathLike, force: bool = False) -> int:
    """Write the rows of one or more stores to ``output`` (``.csv`` or ``.parquet``); returns
    the number of rows. The output is never one of the stores, never a file paradnn did not
    write (unless ``force``), and is replaced atomically (:mod:`paradnn.outputs`)."""
    from paradnn.outputs import check_output, write_output

    out = Path(output)
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ParadnnError(f"export: output {out} must end in .csv or .parquet")
    inputs = _paths(paths)
    check_output(out, "export -o", inputs, force)  # before the (possibly long) load
    df = load(inputs)
    if suffix == ".csv":
        write_output(out, lambda tmp: df.to_csv(tmp, index=False), "export -o", inputs, force)
    else:
        write_output(out, lambda tmp: df.to_parquet(tmp, index=False), "export -o", inputs, force)
    return len(df)


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
