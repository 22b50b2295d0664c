"""Opening a store file, and what is wrong with one that does not open: every SQLite failure
becomes one :class:`~paradnn.errors.StoreError` classified by SQLite's error code and, for a
damaged file, by its 100-byte header and its length (:func:`store_error`, :func:`header_damage`);
a file that is not a paradnn store is refused before SQLite writes to it (:func:`check_file`,
:func:`check_meta`); a read leaves no file beside the store (:func:`open_readonly`); the files
this process holds open for writing are never opened a second time (:func:`hold`)."""

from __future__ import annotations

import functools
import os
import sqlite3
import warnings
from pathlib import Path
from typing import Any

from paradnn.errors import ParadnnError, ParadnnWarning, StoreError
from paradnn.store.schema import STORE_FORMAT, STORE_SCHEMA_VERSION

_SQLITE_MAGIC = b"SQLite format 3\x00"
# Seconds a writer waits for another writer's lock before failing; sweeps on one store commit a
# row per config, so contention is short, but a merge of a big store holds the lock longer.
BUSY_TIMEOUT_S = 60.0


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


class Connection(sqlite3.Connection):
    """The connection every store opens (``factory=`` of ``sqlite3.connect``): its cursors are
    :class:`_Cursor`, so a damaged file's bytes are SQLite damage wherever they are read."""

    def cursor(self, factory: Any = _Cursor) -> Any:  # type: ignore[override]
        return super().cursor(factory)

    def execute(self, *args: Any) -> Any:  # type: ignore[override]
        # The C shortcut makes a plain cursor: make ours, so its reads convert too.
        return self.cursor().execute(*args)


def store_error(path: Path, exc: sqlite3.Error, doing: str, opening: bool = False) -> StoreError:
    """One StoreError for an SQLite failure, its cause found from SQLite's error code; for a
    damaged file, what is wrong is read from the file's header and length (:func:`header_damage`).
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
    found = header_damage(path) if opening or code in (*_DAMAGE_CODES, _SQLITE_READONLY) else None
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


def file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None if it cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def hold(path: Path) -> tuple[int, int] | None:
    """Mark the store file at ``path`` as held open for writing by this process (see _HELD);
    returns its identity (device, inode) for :func:`release`, None if it is not there."""
    held = file_identity(path)
    if held is not None:
        _HELD[held] = _HELD.get(held, 0) + 1
    return held


def release(held: tuple[int, int]) -> None:
    """Undo one :func:`hold` of the file whose identity ``held`` is."""
    _HELD[held] -= 1
    if not _HELD[held]:
        del _HELD[held]


def _head(path: Path, size: int) -> bytes | None:
    """The first ``size`` bytes of the file; None when a Store of this process holds it open
    (reading it would drop that Store's locks, see _HELD), then it is a paradnn store anyway."""
    if _HELD.get(file_identity(path) or (-1, -1)):
        return None
    with open(path, "rb") as f:
        return f.read(size)


def _page_size(head: bytes) -> int:
    """The page size in B that an SQLite header (its first 100 bytes) gives; 0 if too short."""
    if len(head) < 18:
        return 0
    raw = int.from_bytes(head[16:18], "big")
    return 65536 if raw == 1 else raw  # the file format stores 65536 as 1


def _field_damage(head: bytes) -> str | None:
    """What is wrong with the fields of a full 100-byte SQLite header; None when they look right."""
    raw, page = int.from_bytes(head[16:18], "big"), _page_size(head)
    if not 512 <= page <= 65536 or page & (page - 1):
        return (f"its header is damaged: the page size (bytes 16-17) reads {raw}, not a power "
                "of two from 512 to 65536 B")
    if head[18] not in (1, 2) or head[19] not in (1, 2):
        return (f"its header is damaged: the file format versions (bytes 18-19) read "
                f"{head[18]} and {head[19]}, not 1 or 2")
    if head[20]:
        # SQLite reserves bytes at the end of each page only for an extension that asks for them
        # (encryption, checksums); paradnn's stores never do, and a wrong count misplaces the
        # cells of every page, so that SQLite opens the file and reads no row of it.
        return (f"its header is damaged: the reserved space (byte 20) reads {head[20]} B, not 0 "
                "(paradnn's stores reserve none)")
    if head[21:24] != b"\x40\x20\x20":
        return (f"its header is damaged: the payload fractions (bytes 21-23) read "
                f"{', '.join(map(str, head[21:24]))}, not 64, 32, 32")
    if int.from_bytes(head[44:48], "big") not in (1, 2, 3, 4):
        return (f"its header is damaged: the schema format (bytes 44-47) reads "
                f"{int.from_bytes(head[44:48], 'big')}, not 1 to 4")
    if int.from_bytes(head[56:60], "big") not in (1, 2, 3):
        return (f"its header is damaged: the text encoding (bytes 56-59) reads "
                f"{int.from_bytes(head[56:60], 'big')}, not 1 to 3")
    return None


def header_field_damage(path: Path) -> str | None:
    """What is wrong with the fields of a store file's 100-byte header (not its length: a file
    cut short still gives the rows before the cut); None when they look right, the file is
    shorter than a header, or a Store of this process holds it. Used only once SQLite found
    damage, so it never refuses a file SQLite reads whole."""
    try:
        head = _head(path, _HEADER_BYTES)
    except OSError:
        return None
    if head is None or len(head) < _HEADER_BYTES:
        return None
    return _field_damage(head)


def header_damage(path: Path) -> str | None:
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
    found = _field_damage(head)
    if found is not None:
        return found
    page = _page_size(head)
    pages = int.from_bytes(head[28:32], "big")
    # The header's page count is valid only when the change counter (bytes 24-27) equals the
    # version-valid-for number (bytes 92-95).
    if head[24:28] == head[92:96] and pages * page > size:
        return (f"truncated: the file is {size} B, but its header says {pages} pages of "
                f"{page} B ({pages * page} B)")
    if size % page:
        return f"truncated: the file is {size} B, not a whole number of {page}-byte pages"
    return None


def check_file(path: Path) -> str:
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
        # A name too long, a folder without permission: say what a store path may be.
        raise StoreError(f"store {path}: cannot be read: {exc.strerror or exc}; allowed: a new path "
                         "or an existing paradnn store that this user can read") from None
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


def empty_file(path: Path) -> bool:
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


def check_meta(path: Path) -> int:
    """The store schema version of an existing SQLite file, opened read-only; raises if foreign
    or newer; 0 for an SQLite file without any table. Read-only so that refusing a file cannot
    change it."""
    con = open_readonly(path)
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
            raise store_error(path, exc, "be read", opening=True) from None
    finally:
        con.close()
    if rows.get("format") != STORE_FORMAT:
        raise ParadnnError(f"store {path}: not a paradnn store (paradnn_meta format is "
                           f"{rows.get('format')!r}, expected {STORE_FORMAT!r})")
    try:
        version = int(rows["schema_version"])
    except (KeyError, ValueError):
        raise ParadnnError(f"store {path}: paradnn_meta has no valid schema_version") from None
    if version > STORE_SCHEMA_VERSION:
        raise ParadnnError(
            f"store {path}: schema version {version} is newer than this paradnn supports "
            f"({STORE_SCHEMA_VERSION}); upgrade paradnn to read or write it")
    return version


def file_uri(path: Path, flags: str) -> str:
    """SQLite's ``file:`` URI of ``path`` with the query ``flags`` (e.g. ``mode=ro``)."""
    # Percent-encode what URIs reserve so that any file name opens the file it names.
    from urllib.parse import quote

    return f"file:{quote(str(path.resolve()))}?{flags}"


#: Files SQLite keeps beside a store while it is open (WAL mode; a rollback journal).
_SIDE_FILES = ("-wal", "-shm", "-journal")


def open_readonly(path: Path) -> sqlite3.Connection:
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
        con = sqlite3.connect(file_uri(path, "mode=rw" if alone else "mode=ro"), uri=True,
                              timeout=BUSY_TIMEOUT_S, factory=Connection)
        if alone:
            con.execute("PRAGMA query_only = ON")
        con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return con
    except sqlite3.Error as exc:
        if con is not None:
            con.close()  # before store_error reads the file's header (see _HELD)
        # A damaged or truncated file is a DatabaseError, not an OperationalError: both end here.
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code not in (_SQLITE_READONLY, 14, 10):  # read-only, cannot open -shm, I/O
            raise store_error(path, exc, "be read", opening=True) from None
    con = None
    try:
        con = sqlite3.connect(file_uri(path, "immutable=1"), uri=True, timeout=BUSY_TIMEOUT_S,
                              factory=Connection)
        con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        if con is not None:
            con.close()
        raise store_error(path, exc, "be read", opening=True) from None
    warnings.warn(f"store {path}: its folder or medium is read-only, so it was opened immutable "
                  "(rows still only in a -wal file are not seen)", ParadnnWarning, stacklevel=3)
    return con




def is_damage(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is SQLite's error for a damaged file (corrupt, not a database): only such
    an error marks a row unreadable; any other stops the command."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _DAMAGE_CODES



class Guard:
    """A context turning an SQLite failure into one StoreError (:func:`store_error`) naming the
    store at ``path`` and what it could not ``doing`` ("be read", "add a record")."""

    def __init__(self, path: Path, doing: str):
        self.path, self.doing = path, doing

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and issubclass(exc_type, sqlite3.Error):
            raise store_error(self.path, exc, self.doing) from None

