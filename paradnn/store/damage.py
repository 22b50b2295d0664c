"""Reading a store's rows past damage: every row that reads back intact, and for each one that
does not an :class:`Unreadable` saying why (:func:`scan`, which steps over damaged pages by the
ids the indexes still list); what SQLite's ``PRAGMA quick_check`` finds (:func:`quick_check`);
and the one warning per store that counts and names them (:func:`damage_message`)."""

from __future__ import annotations

import json
import sqlite3
import warnings
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paradnn.errors import ParadnnWarning, SpecError, StoreError, echo
from paradnn.rowschema import RowSchema, read_row, row_schema
from paradnn.store.files import is_damage
from paradnn.store.schema import PathLike, migrate_row

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
#: Name of the :attr:`pandas.DataFrame.attrs` entry in which :func:`paradnn.store.load` reports damage.
DAMAGE_ATTR = "paradnn_damage"
_NAMED = 5  # unreadable rows named in a warning; status and DAMAGE_ATTR list every one
#: Columns as bytes, so that a damaged byte in a text column is this row's problem (not valid
# UTF-8, hence not JSON) instead of an exception that ends the whole read.
ROW_COLUMNS = "id, CAST(key AS BLOB), CAST(time_utc AS BLOB), CAST(row AS BLOB)"


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



def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def decode_row(path: Path, raw: tuple[Any, Any, Any, Any], schema: RowSchema
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
            if not is_damage(exc):
                raise
    return listed


def scan(con: sqlite3.Connection, path: Path
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
                cur = (con.execute(f"SELECT {ROW_COLUMNS} FROM records NOT INDEXED ORDER BY id")
                       if after is None else
                       con.execute(f"SELECT {ROW_COLUMNS} FROM records NOT INDEXED WHERE id > ? "
                                   "ORDER BY id", (after,)))
                for raw in cur:
                    got[raw[0]] = raw
                    after = raw[0]
                break
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                i = 0 if after is None else bisect_right(order, after)
                if i == len(order):
                    cut = True
                    break
                after = order[i]
                try:
                    raw = con.execute(f"SELECT {ROW_COLUMNS} FROM records WHERE id = ?",
                                      (after,)).fetchone()
                    if raw is not None:
                        got[after] = raw
                except sqlite3.DatabaseError as exc2:
                    if not is_damage(exc2):
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
        row, bad = decode_row(path, got[rowid], schema)
        if row is not None:
            rows.append((rowid, row))
        else:
            lost.append(bad)
    if cut:
        lost.append(Unreadable(str(path), after, None, "unreachable"))
    return rows, lost


def quick_check(con: sqlite3.Connection, path: Path) -> list[str]:
    """The problems found in a store file that opens: a file cut short inside its last page
    (SQLite opens it, reading the missing bytes as zeros), then what SQLite's ``PRAGMA
    quick_check`` finds in its structure (pages, b-trees, free list; not index content, which
    :func:`scan` compares with the table), at most QUICK_CHECK_MESSAGES of them; empty when the
    file is sound. quick_check reads every page once."""
    found = []
    try:
        # From SQLite, not the file: this connection is open (see paradnn.store.files.hold).
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
        if not is_damage(exc):
            raise
        return found + [f"quick_check itself stopped: {exc}"]
    if checked == ["ok"]:
        return found
    # One problem per line; SQLite prefixes the first with the database's name.
    return found + [line for m in checked for line in m.splitlines()
                    if line.strip() and not line.startswith("*** in database")]


def refuse_damaged_header(path: Path, problems: Sequence[str], header: str | None, doing: str) -> None:
    """Raise one StoreError where quick_check found ``problems`` and the file's header explains
    them (``header``: :func:`paradnn.store.files.header_field_damage`, read before the file was
    held): a damaged header makes every page suspect, so no row is read or written, rather than
    the rows reported lost one by one."""
    if problems and header is not None:
        raise StoreError(f"store {path}: cannot {doing}: {header}; restore it from a copy (SQLite's "
                         f"`sqlite3 {path} .recover` may salvage rows into a new file)")


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


def warn_damage(path: Path, lost: Sequence[Unreadable], problems: Sequence[str]) -> None:
    """Warn (:func:`damage_message`) where a store has unreadable rows or quick_check problems; the
    warning points at the caller of the public function that read the store (two frames up)."""
    if lost or problems:
        warnings.warn(damage_message(path, lost, problems), ParadnnWarning, stacklevel=4)

