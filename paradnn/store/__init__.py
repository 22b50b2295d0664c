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
leaves no ``-wal``/``-shm`` file that was not there (:func:`paradnn.store.files.open_readonly`); a store a failing
command created is taken away again (``Store._discard``); stores read together that give
one key and time two rows say so in a warning; a store whose records table cannot take a row
is refused when opened for writing (:func:`paradnn.store.writer.check_store`).

The package, one module per job (each imports only those listed before it):

* :mod:`~paradnn.store.schema`: the file layout and version, the columns, old rows migrated to the
  current schema, a row as JSON, and which rows are current;
* :mod:`~paradnn.store.files`: opening a store file; an SQLite failure classified into one
  StoreError, a damaged header read byte by byte; foreign files refused;
* :mod:`~paradnn.store.damage`: reading rows past damaged pages (:class:`Unreadable`), quick_check,
  the damage warning;
* :mod:`~paradnn.store.writer`: :class:`Store` (writes, migration, claims) and :func:`check_store`;
* :mod:`~paradnn.store.reader`: :func:`load`, :func:`merge`, :func:`export`, :func:`status_counts`,
  :func:`time_stamps`.
"""

from paradnn.store.damage import DAMAGE_ATTR, QUICK_CHECK_MESSAGES, UNREADABLE_CAUSES, Unreadable, damage_message
from paradnn.store.files import BUSY_TIMEOUT_S
from paradnn.store.reader import EXPORT_SUFFIXES, export, load, merge, status_counts, time_stamps
from paradnn.store.schema import COLUMNS, STORE_SCHEMA_VERSION, PathLike, current_rows, migrate_row
from paradnn.store.writer import Store, check_store

__all__ = ["STORE_SCHEMA_VERSION", "COLUMNS", "EXPORT_SUFFIXES", "Store", "load", "merge", "export", "migrate_row",
           "status_counts", "time_stamps", "check_store", "Unreadable", "UNREADABLE_CAUSES", "DAMAGE_ATTR",
           "damage_message", "current_rows", "BUSY_TIMEOUT_S", "QUICK_CHECK_MESSAGES", "PathLike"]
