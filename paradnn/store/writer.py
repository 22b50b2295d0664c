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

Faults degrade gracefully (docs/reliability.md): a store on read-only media is read in SQLite's
immutable mode; an SQLite failure (read-only file, full disk, a file that cannot be opened, a
lock held too long) becomes one :class:`~paradnn.errors.StoreError`, classified by SQLite's
error code and, for a damaged file, by its header and length, after which every row committed
before is still in the file. A store with damaged pages still loads: rows that do not read back
intact (:class:`Unreadable`) are left out, counted and named in one
:class:`~paradnn.errors.ParadnnWarning` per store, and count as not measured, so a sweep
measures them again; ``PRAGMA quick_check`` runs on every load and when a store is opened for
writing.

Content (docs/reliability.md, "Store content"): every row is read through one typed reader
(:func:`paradnn.rowschema.read_row`); a row with a field that cannot be its type is unreadable
in the sense above (cause ``wrong type``). A zero-byte file is a store without rows. A read
leaves no ``-wal``/``-shm`` file that was not there (:func:`_open_ro`); a store a failing
command created is taken away again (:meth:`Store._discard`); stores read together that give
one key and time two rows say so in a warning; a store whose records table cannot take a row
is refused when opened for writing (:func:`_check_appendable`).
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import math
import os
import socket
import sqlite3
import time
import warnings
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Union

import pandas as pd

from paradnn.errors import ParadnnError, ParadnnWarning, SpecError, StoreError, echo
from paradnn.measure import PROTOCOL_FIELDS, SETTINGS_FIELDS
from paradnn import backends, families
from paradnn.record import (
    METRICS, PLATFORM_FIELDS, SCHEMA_VERSION, SETTINGS_ADDED, SOFTWARE_FIELDS, Record, row_key, superseded,
)
from paradnn.rowschema import RowSchema, read_row, row_schema

__all__ = ["STORE_SCHEMA_VERSION", "COLUMNS", "EXPORT_SUFFIXES", "Store", "load", "merge", "export", "migrate_row",
           "status_counts", "check_store", "Unreadable", "UNREADABLE_CAUSES", "DAMAGE_ATTR",
           "damage_message"]

#: Version of the file layout (tables, columns). Bump when the layout changes; readers refuse
#: stores with a higher version. Independent of ``record.SCHEMA_VERSION`` (meaning of fields).
STORE_SCHEMA_VERSION = 5
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
    ``tf_version: None`` and ``torch_compile``, PyTorch rows on JAX's versions); rows before
    schema 5 lack the settings added since (``paradnn.record.SETTINGS_ADDED``: they ran with the
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
        declared = (*PROTOCOL_FIELDS, *(backends.option_names(framework) if framework in backends.names() else ()))
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
_SQLITE_READONLY, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB = 8, 11, 13, 26
# SQLite's codes for a damaged file: only these mark a row unreadable; any other failure (a lock
# held too long, an I/O error) stops the command, so it is never taken for lost data.
_DAMAGE_CODES = (_SQLITE_CORRUPT, _SQLITE_NOTADB)
_HEADER_BYTES = 100  # SQLite's file header


def _undecodable(exc: UnicodeDecodeError) -> sqlite3.DatabaseError:
    """The DatabaseError SQLite means where Python cannot decode its message or a value: bytes
    that are not UTF-8 in the schema or a page are damage (SQLITE_CORRUPT), and are classified
    and reported as such by every reader of this module."""
    err = sqlite3.DatabaseError(f"database disk image is malformed (bytes that are not UTF-8: {exc.reason})")
    err.sqlite_errorcode = _SQLITE_CORRUPT  # type: ignore[attr-defined]
    err.sqlite_errorname = "SQLITE_CORRUPT"  # type: ignore[attr-defined]
    return err


def _decoded(method: Any) -> Any:
    """``method`` of sqlite3's cursor with a UnicodeDecodeError raised as SQLite's corrupt error
    (:func:`_undecodable`)."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any) -> Any:
        try:
            return method(self, *args)
        except UnicodeDecodeError as exc:
            raise _undecodable(exc) from None
    return wrapper


class _Cursor(sqlite3.Cursor):
    """A cursor whose undecodable text (a damaged file) raises SQLite's corrupt error, not a
    UnicodeDecodeError that no reader expects (:func:`_undecodable`)."""

    execute = _decoded(sqlite3.Cursor.execute)
    fetchone = _decoded(sqlite3.Cursor.fetchone)
    fetchall = _decoded(sqlite3.Cursor.fetchall)
    __next__ = _decoded(sqlite3.Cursor.__next__)


class _Connection(sqlite3.Connection):
    """The connection every store opens (``factory=`` of ``sqlite3.connect``): its cursors are
    :class:`_Cursor`, so a damaged file's bytes are SQLite damage wherever they are read."""

    def cursor(self, factory: Any = _Cursor) -> Any:  # type: ignore[override]
        return super().cursor(factory)

    def execute(self, *args: Any) -> Any:  # type: ignore[override]
        # The C shortcut makes a plain cursor: make ours, so its reads convert too.
        return self.cursor().execute(*args)


def _store_error(path: Path, exc: sqlite3.Error, doing: str, opening: bool = False) -> StoreError:
    """One StoreError for an SQLite failure, its cause found from SQLite's error code; for a
    damaged file, what is wrong is read from the file's header and length (:func:`_damage`).
    ``opening``: the file could not even be opened, so no paradnn command can read it."""
    code = getattr(exc, "sqlite_errorcode", None)
    code = code & 0xFF if isinstance(code, int) else -1
    name = getattr(exc, "sqlite_errorname", type(exc).__name__)
    cause = _SQLITE_CAUSES.get(code, f"SQLite error {name}")
    advice = {_SQLITE_FULL: "; every row committed before is kept: free space and run again "
                            "(a sweep resumes where it stopped)",
              _SQLITE_READONLY: "; read it with status/report/export, or copy it somewhere "
                                "writable to add to it"}.get(code, "")
    # A damaged header or length explains a file SQLite cannot open, calls corrupt, or takes as
    # read-only (a file format version above 2); never a full disk, which leaves a file short of
    # the pages its header already counts.
    found = _damage(path) if opening or code in (*_DAMAGE_CODES, _SQLITE_READONLY) else None
    if found is not None:
        cause = found
    if opening and (found is not None or code in _DAMAGE_CODES):
        advice = (f"; restore it from a copy (SQLite's `sqlite3 {path} .recover` may salvage "
                  "rows into a new file)")
    elif found is not None or code in _DAMAGE_CODES:
        # The file opens: every row that can be read still loads (the scan steps over
        # damaged pages).
        advice = (f"; `paradnn merge {path} -o NEW.db` copies every row that can be read into "
                  "a new store")
    return StoreError(f"store {path}: cannot {doing}: {cause}{advice}")


# Store files this process has open for writing, by (device, inode), with how many Stores hold
# each. SQLite locks a file with POSIX advisory locks, which belong to the process: closing ANY
# descriptor of the file drops them all, and a writer in another process may then checkpoint and
# delete the -wal file this process is still committing to, losing those commits
# (https://www.sqlite.org/howtocorrupt.html, "Posix advisory locks canceled by a separate thread
# doing close()"). So paradnn never opens such a file itself (_head), and reads page sizes
# through SQLite (PRAGMA page_size) while a connection is open.
_HELD: dict[tuple[int, int], int] = {}


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _head(path: Path, size: int) -> bytes | None:
    """The first ``size`` bytes of the file; None when a Store of this process holds it open
    (reading it would drop that Store's locks, see _HELD), then it is a paradnn store anyway."""
    if _HELD.get(_identity(path) or (-1, -1)):
        return None
    with open(path, "rb") as f:
        return f.read(size)


def _page_size(head: bytes) -> int:
    """The page size in B that an SQLite header (its first 100 bytes) gives; 0 if too short."""
    if len(head) < 18:
        return 0
    raw = int.from_bytes(head[16:18], "big")
    return 65536 if raw == 1 else raw  # the file format stores 65536 as 1


def _damage(path: Path) -> str | None:
    """What is wrong with a store file that SQLite refused, read from its 100-byte header and
    its length (https://www.sqlite.org/fileformat.html#the_database_header); None when both
    look right (the damage is further in). Only called after SQLite failed, so it never refuses
    a file SQLite accepts."""
    try:
        size = path.stat().st_size
        head = _head(path, _HEADER_BYTES)
    except OSError:
        return None
    if head is None:
        return None
    if len(head) < _HEADER_BYTES:
        return f"truncated: the file is {size} B, shorter than SQLite's {_HEADER_BYTES}-byte header"
    raw, page = int.from_bytes(head[16:18], "big"), _page_size(head)
    if not 512 <= page <= 65536 or page & (page - 1):
        return (f"its header is damaged: the page size (bytes 16-17) reads {raw}, not a power "
                "of two from 512 to 65536 B")
    if head[18] not in (1, 2) or head[19] not in (1, 2):
        return (f"its header is damaged: the file format versions (bytes 18-19) read "
                f"{head[18]} and {head[19]}, not 1 or 2")
    if page - head[20] < 480:
        return (f"its header is damaged: the reserved space (byte 20) reads {head[20]} B, "
                f"leaving less than 480 B of a {page}-byte page")
    if head[21:24] != b"\x40\x20\x20":
        return (f"its header is damaged: the payload fractions (bytes 21-23) read "
                f"{', '.join(map(str, head[21:24]))}, not 64, 32, 32")
    pages = int.from_bytes(head[28:32], "big")
    # The header's page count is valid only when the change counter (bytes 24-27) equals the
    # version-valid-for number (bytes 92-95).
    if head[24:28] == head[92:96] and pages * page > size:
        return (f"truncated: the file is {size} B, but its header says {pages} pages of "
                f"{page} B ({pages * page} B)")
    if size % page:
        return f"truncated: the file is {size} B, not a whole number of {page}-byte pages"
    if int.from_bytes(head[44:48], "big") not in (1, 2, 3, 4):
        return (f"its header is damaged: the schema format (bytes 44-47) reads "
                f"{int.from_bytes(head[44:48], 'big')}, not 1 to 4")
    if int.from_bytes(head[56:60], "big") not in (1, 2, 3):
        return (f"its header is damaged: the text encoding (bytes 56-59) reads "
                f"{int.from_bytes(head[56:60], 'big')}, not 1 to 3")
    return None


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
        head = _head(path, len(_SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"store {path}: cannot be read: {exc.strerror or exc}") from None
    if head is None:
        return "sqlite"  # a Store of this process has it open
    if not head:
        return "new"
    if head != _SQLITE_MAGIC and _SQLITE_MAGIC.startswith(head):
        raise StoreError(f"store {path}: truncated: the file is {len(head)} B, shorter than "
                         "SQLite's 100-byte header; restore it from a copy")
    if head != _SQLITE_MAGIC:
        raise ParadnnError(f"store {path}: not a paradnn store (not an SQLite file); "
                           "allowed: a new path or an existing paradnn store")
    return "sqlite"


def _empty_file(path: Path) -> bool:
    """Whether ``path`` is a zero-byte file: a store with no rows yet, to every command.

    A zero-byte file is what ``touch results.db`` leaves, or a store whose create was
    interrupted before SQLite wrote its first page (``Store`` connects, then writes the
    tables). Both are someone's store that holds nothing yet: a writer adopts it (``Store``
    finds it 'new'), so a reader (``load``, ``status``, ``plan --store``, ``merge``) reads it
    as a store of no rows rather than as "no such paradnn store", which would contradict the
    sweep that fills it next. It is never written to by a reader (nothing to migrate or
    check), and only a missing file is "no such paradnn store"."""
    try:
        return path.is_file() and path.stat().st_size == 0
    except OSError:
        return False


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
            raise _store_error(path, exc, "be read", opening=True) from None
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


#: Files SQLite keeps beside a store while it is open (WAL mode; a rollback journal).
_SIDE_FILES = ("-wal", "-shm", "-journal")


def _open_ro(path: Path) -> sqlite3.Connection:
    """A connection that only reads. A store in WAL mode needs its -shm (and -wal) file even
    to be read; on read-only media (or in a read-only folder) that file cannot be created, so
    the store is then opened immutable, with a warning: SQLite reads the main file as it is and
    assumes nobody writes it meanwhile (rows only in an uncheckpointed -wal file are not seen).

    A read leaves the store's folder as it found it. SQLite creates the -wal and -shm files for
    any reader of a WAL store, and only a connection that may write deletes them when it is the
    last to close (after a checkpoint); a read-only connection (``mode=ro``) leaves them behind.
    So where neither exists (no other process has the store open, no crashed writer left a
    -wal to recover), the store is opened for reading and writing with ``PRAGMA query_only``,
    which refuses every write statement: its last close removes what its open created. Where
    one exists, it belongs to another connection (or holds committed rows): read-only, and it
    stays."""
    con = None
    # (A file or folder that is not writable is read read-only as before: there a connection
    # that may write could not remove the files either.)
    alone = (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
             and not any(Path(f"{path}{side}").exists() for side in _SIDE_FILES))
    try:
        # mode=rw never creates the file: a store that vanished meanwhile is an error here.
        con = sqlite3.connect(_uri(path, "mode=rw" if alone else "mode=ro"), uri=True,
                              timeout=BUSY_TIMEOUT_S, factory=_Connection)
        if alone:
            con.execute("PRAGMA query_only = ON")
        con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return con
    except sqlite3.Error as exc:
        if con is not None:
            con.close()  # before _store_error reads the file's header (see _HELD)
        # A damaged or truncated file is a DatabaseError, not an OperationalError: both end here.
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code not in (_SQLITE_READONLY, 14, 10):  # read-only, cannot open -shm, I/O
            raise _store_error(path, exc, "be read", opening=True) from None
    con = None
    try:
        con = sqlite3.connect(_uri(path, "immutable=1"), uri=True, timeout=BUSY_TIMEOUT_S,
                              factory=_Connection)
        con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        if con is not None:
            con.close()
        raise _store_error(path, exc, "be read", opening=True) from None
    warnings.warn(f"store {path}: its folder or medium is read-only, so it was opened immutable "
                  "(rows still only in a -wal file are not seen)", ParadnnWarning, stacklevel=3)
    return con


#: Why a stored row cannot be read back intact (:class:`Unreadable` ``cause``), and the words
#: a user reads for it.
UNREADABLE_CAUSES: dict[str, str] = {
    "damaged page": "SQLite cannot read the page that holds it",
    "missing": "an index lists it but its page no longer holds it",
    "unreachable": "the table cannot be read past this row id and no index lists what follows "
                   "(an unknown number of rows)",
    "not JSON": "its content is not valid JSON",
    "not a record": "its content is not a record (no key or status)",
    "identity mismatch": "its key or time column differs from its content",
    "wrong type": "a field's value is not of its type",
}
#: Messages ``PRAGMA quick_check`` returns at most (it stops after as many problems).
QUICK_CHECK_MESSAGES = 20
#: Name of the :attr:`pandas.DataFrame.attrs` entry in which :func:`load` reports damage.
DAMAGE_ATTR = "paradnn_damage"
_NAMED = 5  # unreadable rows named in a warning; status and DAMAGE_ATTR list every one
# Columns as bytes, so that a damaged byte in a text column is this row's problem (not valid
# UTF-8, hence not JSON) instead of an exception that ends the whole read.
_ROW_COLUMNS = "id, CAST(key AS BLOB), CAST(time_utc AS BLOB), CAST(row AS BLOB)"


@dataclass(frozen=True)
class Unreadable:
    """A stored row that cannot be read back intact. It is in no loaded frame and counts as not
    measured (a sweep measures its config again); the row stays in the file as it is."""

    store: str
    rowid: int | None  # SQLite's row id (the records table's ``id``)
    key: str | None    # its record key, where an index or the row itself still gives it
    cause: str         # a key of UNREADABLE_CAUSES
    detail: str | None = None  # for "wrong type": the field, its value and what is allowed

    def name(self) -> str:
        """``key K (row id N)``, ``row id N`` when the key is unknown."""
        if self.cause == "unreachable":
            return ("every row" if self.rowid is None else f"the rows after row id {self.rowid}")
        where = f"row id {self.rowid}"
        return f"key {echo(self.key, 40)} ({where})" if self.key else where


def _damaged(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _DAMAGE_CODES


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _decode(path: Path, raw: tuple[Any, Any, Any, Any], schema: RowSchema
            ) -> tuple[dict[str, Any] | None, Unreadable | None]:
    """A stored row's dict, every field read as its type (:func:`paradnn.rowschema.read_row`)
    and migrated to the current schema, or why it is unreadable."""
    rowid, key, t, text = raw
    key, t = _text(key), _text(t)
    try:
        row = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except (TypeError, ValueError):  # JSONDecodeError, UnicodeDecodeError, a NULL
        return None, Unreadable(str(path), rowid, key, "not JSON")
    if not (isinstance(row, dict) and row.get("key") and row.get("status")):
        return None, Unreadable(str(path), rowid, key, "not a record")
    if row.get("key") != key or row.get("time_utc") != t:
        # The identity is stored twice (indexed columns and content): a difference is damage.
        return None, Unreadable(str(path), rowid, key, "identity mismatch")
    try:
        # Typed before migrating: the key migration computes must hash 32, not "32".
        row = read_row(row, schema)
    except SpecError as exc:
        return None, Unreadable(str(path), rowid, key, "wrong type", str(exc))
    return migrate_row(row), None


def _listed(con: sqlite3.Connection) -> dict[int, str | None]:
    """Row id -> record key (None where the index does not hold it) of every entry the records
    table's indexes still give: the rows that should be there. A damaged index gives what it
    can; an index is a second copy of the ids, so a row whose table page is lost is still named."""
    listed: dict[int, str | None] = {}
    for _, name, *_ in con.execute("PRAGMA index_list(records)").fetchall():
        quoted = '"' + name.replace('"', '""') + '"'
        columns = {c for _, _, c in con.execute(f"PRAGMA index_info({quoted})")}
        key = "CAST(key AS BLOB)" if "key" in columns else "NULL"
        try:
            # INDEXED BY and only indexed columns: read from the index alone (covering).
            for rowid, k in con.execute(f"SELECT id, {key} FROM records INDEXED BY {quoted}"):
                if listed.get(rowid) is None:
                    listed[rowid] = _text(k)
        except sqlite3.DatabaseError as exc:
            if not _damaged(exc):
                raise
    return listed


def _scan(con: sqlite3.Connection, path: Path
          ) -> tuple[list[tuple[int, dict[str, Any]]], list[Unreadable]]:
    """(row id, row) of every row that reads back intact, in insertion order, and every row that
    does not. The table is read in row-id order; where SQLite cannot read on (a damaged page), the
    read resumes after the next row id the indexes list, so one damaged page costs only its own
    rows. A row the indexes list and the table does not hold is unreadable too (a damaged page
    can lose rows without an error)."""
    own = not con.in_transaction
    if own:
        con.execute("BEGIN")  # one snapshot: the indexes and the table agree
    try:
        listed = _listed(con)
        order = sorted(listed)
        got: dict[int, tuple[Any, Any, Any, Any]] = {}
        failed: set[int] = set()  # listed rows whose own read failed
        after: int | None = None
        cut = False  # the table cannot be read past ``after`` and no index lists what follows
        while True:
            try:
                cur = (con.execute(f"SELECT {_ROW_COLUMNS} FROM records NOT INDEXED ORDER BY id")
                       if after is None else
                       con.execute(f"SELECT {_ROW_COLUMNS} FROM records NOT INDEXED WHERE id > ? "
                                   "ORDER BY id", (after,)))
                for raw in cur:
                    got[raw[0]] = raw
                    after = raw[0]
                break
            except sqlite3.DatabaseError as exc:
                if not _damaged(exc):
                    raise
                i = 0 if after is None else bisect_right(order, after)
                if i == len(order):
                    cut = True
                    break
                after = order[i]
                try:
                    raw = con.execute(f"SELECT {_ROW_COLUMNS} FROM records WHERE id = ?",
                                      (after,)).fetchone()
                    if raw is not None:
                        got[after] = raw
                except sqlite3.DatabaseError as exc2:
                    if not _damaged(exc2):
                        raise
                    failed.add(after)
    finally:
        if own and con.in_transaction:
            # A read-only snapshot: nothing to commit (and COMMIT fails after a damaged read).
            con.execute("ROLLBACK")
    rows: list[tuple[int, dict[str, Any]]] = []
    lost: list[Unreadable] = []
    schema = row_schema()
    for rowid in sorted(set(got) | set(listed)):
        if rowid not in got:
            lost.append(Unreadable(str(path), rowid, listed[rowid],
                                   "damaged page" if rowid in failed else "missing"))
            continue
        row, bad = _decode(path, got[rowid], schema)
        if row is not None:
            rows.append((rowid, row))
        else:
            lost.append(bad)
    if cut:
        lost.append(Unreadable(str(path), after, None, "unreachable"))
    return rows, lost


def _quick_check(con: sqlite3.Connection, path: Path) -> list[str]:
    """The problems found in a store file that opens: a file cut short inside its last page
    (SQLite opens it, reading the missing bytes as zeros), then what SQLite's ``PRAGMA
    quick_check`` finds in its structure (pages, b-trees, free list; not index content, which
    :func:`_scan` compares with the table), at most QUICK_CHECK_MESSAGES of them; empty when the
    file is sound. quick_check reads every page once."""
    found = []
    try:
        # From SQLite, not the file: this connection is open (see _HELD).
        (page,) = con.execute("PRAGMA page_size").fetchone()
        size = path.stat().st_size
    except (OSError, sqlite3.Error):
        page = size = 0
    if page and size % page:
        found.append(f"truncated: the file is {size} B, not a whole number of {page}-byte pages "
                     "(its last page is cut short)")
    try:
        checked = [str(m) for (m,) in con.execute(f"PRAGMA quick_check({QUICK_CHECK_MESSAGES})")]
    except sqlite3.DatabaseError as exc:
        if not _damaged(exc):
            raise
        return found + [f"quick_check itself stopped: {exc}"]
    if checked == ["ok"]:
        return found
    # One problem per line; SQLite prefixes the first with the database's name.
    return found + [line for m in checked for line in m.splitlines()
                    if line.strip() and not line.startswith("*** in database")]


def damage_message(path: PathLike, lost: Sequence[Unreadable], problems: Sequence[str]) -> str:
    """The one line that says a store is damaged: how many rows cannot be read, the first of
    them by name and cause, what SQLite's quick_check found, and what to do."""
    parts = []
    if lost:
        known = sum(u.cause != "unreachable" for u in lost)
        unknown = any(u.cause == "unreachable" for u in lost)
        count = (f"{known} or more" if known and unknown else "an unknown number of" if unknown
                 else str(known))
        named = "; ".join(f"{u.name()}: {UNREADABLE_CAUSES[u.cause]}"
                          + (f": {u.detail}" if u.detail else "") for u in lost[:_NAMED])
        more = f"; and {len(lost) - _NAMED} more" if len(lost) > _NAMED else ""
        parts.append(f"{count} row(s) cannot be read and are left out (their configs count as "
                     f"not measured, so a sweep measures them again): {named}{more}")
    if problems:
        parts.append(f"SQLite's quick_check found {len(problems)}"
                     f"{'+' if len(problems) >= QUICK_CHECK_MESSAGES else ''} problem(s), first: "
                     f"{_cut(problems[0], 120)}")
    return (f"store {path}: damaged: {'; '.join(parts)}; `paradnn merge {path} -o NEW.db` "
            "copies every readable row into a new store")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _warn_damage(path: Path, lost: Sequence[Unreadable], problems: Sequence[str]) -> None:
    if lost or problems:
        warnings.warn(damage_message(path, lost, problems), ParadnnWarning, stacklevel=4)


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


def _writable(path: Path, create: bool) -> str:
    """What :class:`Store` finds at ``path`` before opening it for writing: 'new' (a missing or
    empty file), 'empty' (an SQLite file without tables) or 'sqlite' (a paradnn store); raises
    for anything it cannot write to. Reads only: nothing is created or changed."""
    kind = _check_file(path)
    if kind == "new" and not create:
        raise ParadnnError(f"store {path}: no such paradnn store")
    if kind == "sqlite" and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        # access(2) reports a read-only file system even to root; SQLite needs the folder
        # too, for the -wal and -shm files.
        raise StoreError(f"store {path}: cannot be opened for writing: it or its folder "
                         "is read-only (a read-only file, folder or file system); read it "
                         "with status/report/export, or copy it somewhere writable to add "
                         "to it")
    if kind == "sqlite" and _check_meta(path) == 0:
        kind = "empty"
    if kind == "sqlite":
        _check_appendable(path)
    return kind


def _check_appendable(path: Path) -> None:
    """Refuse a store whose records table cannot take a new row, before any work is done for it.

    A row goes after the table's last row: SQLite finds the place from the table's root page
    down its last pages. Where one of those pages is damaged, every insert fails with
    SQLITE_CORRUPT; quick_check reports the damage but so it does for damage anywhere else,
    where writing goes on (docs/reliability.md), and the rows that read are still loaded. So the
    way a row would go is read here (``max(id)`` walks exactly that path) and, where it cannot
    be, the store is refused in one line, with how many rows can still be copied out of it.
    Only reads: check_store calls it too."""
    con = _open_ro(path)
    try:
        try:
            con.execute("SELECT max(id) FROM records").fetchone()
            return
        except sqlite3.DatabaseError as exc:
            if not _damaged(exc):
                raise _store_error(path, exc, "be opened for writing") from None
            failure = exc
        with _Guard(path, "be read"):
            readable = len(_scan(con, path)[0])
    finally:
        con.close()  # before _damage reads the file's header (see _HELD)
    if _damage(path) is not None:  # a damaged header: that message, with its advice
        raise _store_error(path, failure, "be opened for writing")
    remedy = (f"`paradnn merge {path} -o NEW.db` copies the {readable} row(s) that can still be "
              "read into a new store; use that one" if readable else
              f"no row can be read through it either: restore it from a copy (SQLite's "
              f"`sqlite3 {path} .recover` may salvage rows into a new file)")
    raise StoreError(f"store {path}: cannot be opened for writing: its records table is damaged "
                     "where a new row goes (the table's root or last page cannot be read: "
                     "SQLITE_CORRUPT), so no row can be added; nothing was measured or written; "
                     f"{remedy}")


def check_store(path: PathLike) -> str:
    """``path`` (as given) if :class:`Store` can open it for writing: a missing file (created
    when the first row is written) or a paradnn store that opens; raises what ``Store(path)``
    would raise (a foreign, truncated or read-only file, a damaged header), without creating or
    changing anything. For a command that writes its rows only after minutes of measuring: it
    checks its ``--store`` first. A store whose records table is damaged where a new row goes
    is refused here too (:func:`_check_appendable`); a damaged page elsewhere is found later,
    when the store is opened, and is a warning: the rows that read stay usable."""
    _writable(Path(path), create=True)
    return str(path)


class Store:
    """An open results store. Use as a context manager or call :meth:`close`.

    ``Store(path)`` creates the file if it does not exist (``create=False`` refuses to). Every
    :meth:`add` is one committed transaction: a sweep killed at any instant loses at most the
    record being measured.

    Used as a context manager, a Store that made its file (none was there, or a zero-byte one)
    takes it away again when the block ends with an exception before a row was written (a
    sweep whose executor cannot start, a merge refused for a conflict): a command that fails
    leaves no new store behind (:meth:`_discard`).
    """

    def __init__(self, path: PathLike, create: bool = True):
        self.path = Path(path)
        kind = _writable(self.path, create)
        # What this Store makes, for _discard: the file (None: it was a store already), and the
        # folders made for it, deepest first.
        self._made: str | None = None
        self._made_folders: list[Path] = []
        if kind == "new":
            self._made = "zero-byte file" if _empty_file(self.path) else "file"
            folder = self.path.parent
            while not folder.exists() and folder != folder.parent:
                self._made_folders.append(folder)
                folder = folder.parent
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"store {self.path}: cannot create its folder: "
                                 f"{exc.strerror or exc}") from None
        self._owner: str | None = None
        self._problems: list[str] = []
        # Row ids the last read found unreadable: claim's write transaction never reads them,
        # because a damaged page met inside a write transaction fails the rest of it.
        self._lost: set[int] = set()
        self._held: tuple[int, int] | None = None
        try:
            # Only a new store is created: a store that vanished since _writable looked (see
            # _discard) is an error, not an empty file made in its place.
            self._con = sqlite3.connect(_uri(self.path, "mode=rwc" if kind == "new" else "mode=rw"),
                                        uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                        check_same_thread=False, factory=_Connection)
        except sqlite3.Error as exc:
            self._remove_folders()
            raise _store_error(self.path, exc, "be opened for writing") from None
        try:
            self._con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            # WAL: readers never block the writer and a killed writer leaves a consistent file.
            self._con.execute("PRAGMA journal_mode = WAL")
            self._held = _identity(self.path)  # the file exists now
            if self._held is not None:
                _HELD[self._held] = _HELD.get(self._held, 0) + 1
            self._con.execute("PRAGMA synchronous = NORMAL")
            if kind in ("new", "empty"):
                self._init_schema()
            else:
                # Take the write lock (a read-only store fails here, before any work) and bring
                # an older store's rows to the current schema, all or nothing.
                with self._transaction() as con:
                    self._migrate(con)
            # From its first transaction on, this connection holds the store (WAL readers keep
            # a lock), so that no other command's _discard can remove it; one that did so just
            # before would leave this connection writing into a file no longer in the folder.
            if self._held is None or _identity(self.path) != self._held:
                raise StoreError(f"store {self.path}: was removed while it was being opened (by "
                                 "another paradnn command that created it and failed before "
                                 "writing a row); run the command again")
            # Damage is found before anything is added: the warning names the rows that cannot
            # be read, which count as not measured (counts_by_key, claim).
            self._problems = _quick_check(self._con, self.path)
            if self._problems:
                self._read()
        except sqlite3.Error as exc:
            self._discard()
            raise _store_error(self.path, exc, "be opened for writing") from None
        except BaseException:
            self._discard()
            raise

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
        rows, _ = _scan(con, self.path)  # read and migrated; an unreadable row stays as it is
        for rowid, row in rows:
            try:
                con.execute("UPDATE records SET row = ?, key = ? WHERE id = ?",
                            (_row_json(row), row.get("key"), rowid))
            except sqlite3.IntegrityError:
                # Two old rows that now share key and time (e.g. a JAX config measured at one
                # instant with two torch_compile values, which JAX ignores): the second keeps
                # its old key rather than vanish.
                old = con.execute("SELECT key FROM records WHERE id = ?", (rowid,)).fetchone()[0]
                con.execute("UPDATE records SET row = ? WHERE id = ?",
                            (_row_json({**row, "key": old}), rowid))
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
        """Close the store (again: nothing)."""
        if self._held is not None:
            _HELD[self._held] -= 1
            if not _HELD[self._held]:
                del _HELD[self._held]
            self._held = None
        self._con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self._discard()
        else:
            self.close()

    def _discard(self) -> None:
        """Close, and take away what this Store made when no row was written into it: the file
        (a zero-byte file it found is left zero bytes again) and the folders made for it. Runs
        while another error propagates, so it never raises; where it cannot be sure, the store
        stays.

        Other commands may share a new store (two sweeps started together): it is removed only
        when no other connection has it open. SQLite tells that without waiting: leaving WAL mode
        needs every other connection closed and fails at once (SQLITE_BUSY, the busy timeout set
        to 0) while another holds the store; the exclusive lock taken next keeps every other
        process out until the file is gone, and a Store that opened the file just before checks
        that its path still names it (``__init__``)."""
        made = self._made
        self._made = None
        removed = False
        try:
            if made is not None:
                con = self._con
                con.execute("PRAGMA busy_timeout = 0")
                if not _has_rows(con) and con.execute(
                        "PRAGMA journal_mode = DELETE").fetchone()[0].lower() == "delete":
                    con.execute("BEGIN EXCLUSIVE")
                    try:
                        if not _has_rows(con):  # a row committed before the switch: keep it
                            if made == "zero-byte file":
                                os.truncate(self.path, 0)  # by path: no descriptor (see _HELD)
                            else:
                                os.unlink(self.path)
                            removed = True
                    finally:
                        con.execute("ROLLBACK")
                    if not removed:
                        con.execute("PRAGMA journal_mode = WAL")
        except (sqlite3.Error, OSError):
            pass  # not sure it is unused, or cannot remove it: the store stays as it is
        finally:
            self.close()
        if removed:
            # Leaving WAL mode removed the -wal and -shm files; nothing else beside the path is
            # touched, since another command may create a store there from now on.
            self._remove_folders()

    def _remove_folders(self) -> None:
        """Remove the folders made for a store that is not there, deepest first (only empty
        ones: anything else put there meanwhile stays)."""
        for folder in self._made_folders:
            try:
                folder.rmdir()
            except OSError:
                break
        self._made_folders = []

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
            rows = sum(_counts(row, unstable)
                       for row in current_rows(_rows_of_key(con, self.path, key, self._lost)))
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
        """Number of rows per record key that read back intact (only ``keys`` when given), the
        attempts a newer attempt replaced left out (:func:`current_rows`); with ``unstable``
        False, ``ok`` rows that missed their precision target (``stable`` false) do not count. A row that cannot be read does not count (it is named in a warning), so a
        sweep measures its config again."""
        counts: dict[str, int] = {}
        for row in current_rows(self._read()):
            if _counts(row, unstable):
                counts[row["key"]] = counts.get(row["key"], 0) + 1
        if keys is not None:
            wanted = set(keys)
            counts = {k: v for k, v in counts.items() if k in wanted}
        return counts

    def _read(self) -> list[dict[str, Any]]:
        """The rows that read back intact; a warning names the others."""
        with self._write("be read"):
            rows, lost = _scan(self._con, self.path)
        self._lost = {u.rowid for u in lost if u.rowid is not None and u.cause != "unreachable"}
        _warn_damage(self.path, lost, self._problems)
        return [row for _, row in rows]

    def rows(self) -> list[dict[str, Any]]:
        """Every stored row that reads back intact as a dict (the record's ``to_dict()``), in
        insertion order; a warning names the rows that cannot be read."""
        return self._read()

    def __len__(self) -> int:
        """Rows in the file, readable or not."""
        with self._write("count rows"):
            return int(self._con.execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def frame(self, attempts: bool = False) -> pd.DataFrame:
        """The rows as a DataFrame with one column per field, one row per config unless
        ``attempts`` (see :func:`load`)."""
        rows = self.rows()
        return _frame(rows if attempts else current_rows(rows))


def _has_rows(con: sqlite3.Connection) -> bool:
    """Whether the store open on ``con`` has a records table with a row in it."""
    if not con.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' "
                       "AND name = 'records'").fetchone()[0]:
        return False
    return bool(con.execute("SELECT EXISTS (SELECT 1 FROM records)").fetchone()[0])


def _counts(row: dict[str, Any], unstable: bool) -> bool:
    """Whether an intact row counts as a done measurement of its key: always with ``unstable``;
    otherwise not an ``ok`` row whose ``stable`` is false (it missed its precision target)."""
    stable = row.get("stable")
    return unstable or not (row.get("status") == "ok" and isinstance(stable, (bool, int, float))
                            and stable == 0)


def _rows_of_key(con: sqlite3.Connection, path: Path, key: str,
                 lost: set[int]) -> list[dict[str, Any]]:
    """The rows of one record key that read back intact: found through the key's index, read one
    by one, except the row ids in ``lost`` (known unreadable: not read again)."""
    out = []
    schema = row_schema()
    for (rowid,) in con.execute("SELECT id FROM records WHERE key = ?", (key,)).fetchall():
        if rowid in lost:
            continue
        raw = con.execute(f"SELECT {_ROW_COLUMNS} FROM records WHERE id = ?", (rowid,)).fetchone()
        row = _decode(path, raw, schema)[0] if raw is not None else None
        if row is not None:
            out.append(row)
    return out


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


def current_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` without the attempts a newer attempt replaced (:func:`paradnn.record.superseded`:
    a config measured again because it missed its precision target keeps its newer row), in
    their order: one row per config, and per repeat a config was asked to have."""
    gone = superseded(rows)
    return [row for i, row in enumerate(rows) if i not in gone] if gone else list(rows)


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
    ...], "problems": {store: [quick_check messages]}}`` (causes: :data:`UNREADABLE_CAUSES`).
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
    frame = _frame(rows if attempts else current_rows(rows))
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
    A zero-byte file has no rows (:func:`_empty_file`)."""
    if _check_file(path) == "new":
        if _empty_file(path):
            return [], [], []
        raise ParadnnError(f"store {path}: no such paradnn store")
    if _check_meta(path) == 0:
        return [], [], []  # an empty SQLite file: no rows yet
    con = _open_ro(path)
    try:
        with _Guard(path, "be read"):
            problems = _quick_check(con, path)
            rows, lost = _scan(con, path)
    finally:
        con.close()
    _warn_damage(path, lost, problems)
    return [row for _, row in rows], lost, problems


def merge(inputs: Sequence[PathLike], output: PathLike) -> tuple[int, int]:
    """Combine stores into ``output`` (created, or an existing store extended) without
    duplicates. Every input is checked before anything is written. Returns (rows added, rows
    already present)."""
    paths = _paths(inputs)
    out = Path(output)
    for p in paths:
        if _check_file(p) == "new":
            if not _empty_file(p):
                raise ParadnnError(f"store {p}: no such paradnn store")
        else:
            _check_meta(p)
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
        write_output(out, lambda tmp: df.to_csv(tmp, index=False), "export -o", inputs, force)
    else:
        table = _parquet_columns(df)
        write_output(out, lambda tmp: table.to_parquet(tmp, index=False), "export -o", inputs,
                     force)
    return len(df)


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
