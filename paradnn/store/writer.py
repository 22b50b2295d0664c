"""Writing a store: :class:`Store` opens (or creates) one for writing, commits each record in
its own transaction, brings an older store to the current schema, and hands out claims so that
two sweeps on one store split the work; a Store that made its file and wrote no row takes it
away again. :func:`check_store` refuses, before any measuring, a store that cannot be written."""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from paradnn.errors import ParadnnError, StoreError
from paradnn.record import Record
from paradnn.rowschema import row_schema
from paradnn.store.damage import ROW_COLUMNS, decode_row, quick_check, refuse_damaged_header, scan, warn_damage
from paradnn.store.files import (
    BUSY_TIMEOUT_S,
    Connection,
    Guard,
    check_file,
    check_meta,
    empty_file,
    file_identity,
    file_uri,
    header_damage,
    header_field_damage,
    hold,
    is_damage,
    open_readonly,
    release,
    store_error,
)
from paradnn.store.schema import (
    DDL,
    STORE_FORMAT,
    STORE_SCHEMA_VERSION,
    PathLike,
    current_rows,
    row_json,
    rows_frame,
)


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
    kind = check_file(path)
    if kind == "new" and not create:
        raise ParadnnError(f"store {path}: no such paradnn store")
    if kind == "sqlite" and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        # access(2) reports a read-only file system even to root; SQLite needs the folder
        # too, for the -wal and -shm files.
        raise StoreError(f"store {path}: cannot be opened for writing: it or its folder "
                         "is read-only (a read-only file, folder or file system); read it "
                         "with status/report/export, or copy it somewhere writable to add "
                         "to it")
    if kind == "sqlite" and check_meta(path) == 0:
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
    con = open_readonly(path)
    try:
        try:
            con.execute("SELECT max(id) FROM records").fetchone()
            return
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise store_error(path, exc, "be opened for writing") from None
            failure = exc
        with Guard(path, "be read"):
            readable = len(scan(con, path)[0])
    finally:
        con.close()  # before header_damage reads the file's header (see paradnn.store.files.hold)
    if header_damage(path) is not None:  # a damaged header: that message, with its advice
        raise store_error(path, failure, "be opened for writing")
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
            self._made = "zero-byte file" if empty_file(self.path) else "file"
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
        # The header as it is before this Store holds the file (reading it later would drop the
        # connection's locks, see paradnn.store.files._HELD); used only if SQLite finds damage.
        header = header_field_damage(self.path) if kind not in ("new", "empty") else None
        try:
            # Only a new store is created: a store that vanished since _writable looked (see
            # _discard) is an error, not an empty file made in its place.
            self._con = sqlite3.connect(file_uri(self.path, "mode=rwc" if kind == "new" else "mode=rw"),
                                        uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                        check_same_thread=False, factory=Connection)
        except sqlite3.Error as exc:
            self._remove_folders()
            raise store_error(self.path, exc, "be opened for writing") from None
        try:
            self._con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            # WAL: readers never block the writer and a killed writer leaves a consistent file.
            self._con.execute("PRAGMA journal_mode = WAL")
            self._held = hold(self.path)  # the file exists now
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
            if self._held is None or file_identity(self.path) != self._held:
                raise StoreError(f"store {self.path}: was removed while it was being opened (by "
                                 "another paradnn command that created it and failed before "
                                 "writing a row); run the command again")
            # Damage is found before anything is added: the warning names the rows that cannot
            # be read, which count as not measured (counts_by_key, claim).
            self._problems = quick_check(self._con, self.path)
            refuse_damaged_header(self.path, self._problems, header, "be opened for writing")
            if self._problems:
                self._read()
        except sqlite3.Error as exc:
            self._discard()
            raise store_error(self.path, exc, "be opened for writing") from None
        except BaseException:
            self._discard()
            raise

    def _init_schema(self) -> None:
        with self._transaction():
            for statement in DDL.split(";"):
                if statement.strip():
                    self._con.execute(statement)
            self._con.execute("INSERT OR IGNORE INTO paradnn_meta VALUES ('format', ?)",
                              (STORE_FORMAT,))
            self._con.execute("INSERT OR IGNORE INTO paradnn_meta VALUES ('schema_version', ?)",
                              (str(STORE_SCHEMA_VERSION),))
            self._con.execute("INSERT OR IGNORE INTO paradnn_meta VALUES ('created_utc', ?)",
                              (_dt.datetime.now(_dt.timezone.utc).isoformat(),))

    def _migrate(self, con: sqlite3.Connection) -> None:
        (version,) = con.execute(
            "SELECT value FROM paradnn_meta WHERE name = 'schema_version'").fetchone()
        if int(version) >= STORE_SCHEMA_VERSION:
            return
        rows, _ = scan(con, self.path)  # read and migrated; an unreadable row stays as it is
        for rowid, row in rows:
            try:
                con.execute("UPDATE records SET row = ?, key = ? WHERE id = ?",
                            (row_json(row), row.get("key"), rowid))
            except sqlite3.IntegrityError:
                # Two old rows that now share key and time (e.g. a JAX config measured at one
                # instant with two torch_compile values, which JAX ignores): the second keeps
                # its old key rather than vanish.
                old = con.execute("SELECT key FROM records WHERE id = ?", (rowid,)).fetchone()[0]
                con.execute("UPDATE records SET row = ? WHERE id = ?",
                            (row_json({**row, "key": old}), rowid))
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

    def _write(self, doing: str) -> "Guard":
        """A context turning an SQLite failure into one StoreError naming the store."""
        return Guard(self.path, doing)

    def close(self) -> None:
        """Close the store (again: nothing)."""
        if self._held is not None:
            release(self._held)
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
                                os.truncate(self.path, 0)  # by path: no descriptor (see paradnn.store.files.hold)
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
             row.get("family"), row.get("host"), row_json(row)))
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
            rows, lost = scan(self._con, self.path)
        self._lost = {u.rowid for u in lost if u.rowid is not None and u.cause != "unreachable"}
        warn_damage(self.path, lost, self._problems)
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
        ``attempts`` (see :func:`paradnn.store.load`)."""
        rows = self.rows()
        return rows_frame(rows if attempts else current_rows(rows))


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
        raw = con.execute(f"SELECT {ROW_COLUMNS} FROM records WHERE id = ?", (rowid,)).fetchone()
        row = decode_row(path, raw, schema)[0] if raw is not None else None
        if row is not None:
            out.append(row)
    return out



def _same_content(stored: str, row: dict[str, Any]) -> bool:
    try:
        return json.loads(stored) == json.loads(row_json(row))
    except ValueError:
        return False

