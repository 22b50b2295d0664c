"""``paradnn.status``: what a store holds, and what went wrong, grouped so a user can act on it.

>>> from paradnn.status import failures
>>> failures("results.db")   # doctest: +SKIP
   status           reason  count  example                                ... next_command

A failure's *reason* is its status plus, for ``oom`` rows, whether it was predicted without
running (the typed ``oom_predicted`` field) and, for ``error`` and other ``oom`` rows, the
exception's class name the runner wrote in front of its message (``XlaRuntimeError: ...``, the
runner's and executors' ``f"{type(exc).__name__}: {exc}"`` convention). ``timeout`` and
``crashed`` rows are grouped by status alone (their messages carry the limit and the exit
signal).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from typing import Any, Union

import pandas as pd

from paradnn import families
from paradnn.record import PREDICTED
from paradnn.workload import short_name
from paradnn.store import DAMAGE_ATTR, UNREADABLE_CAUSES, Unreadable, load

__all__ = ["failures", "reason", "rerun_command", "FAILURE_COLUMNS"]

PathLike = Union[str, os.PathLike]

#: Columns of :func:`failures`.
FAILURE_COLUMNS = ("status", "reason", "count", "family", "example", "example_key", "error",
                   "next_command", "advice")

# The runner's prefixes: a Python class name, or a phrase of lower-case words, then ": ".
_CLASS = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*): ")
_PHRASE = re.compile(r"^([a-z][a-z ]{2,60}): ")

_ADVICE = {
    "oom": "does not fit the memory limit: find the largest batch that fits with `paradnn "
           "maxbatch`, then lower this batch in the sweep file (or drop the config)",
    "error": "reproduce it alone with `paradnn run` to read the full message",
    "timeout": "took longer than the time limit: time it alone with `paradnn run`, then raise "
               "--timeout (or run.timeout_s in the sweep file)",
    "crashed": "killed its process (often the host ran out of memory): run it alone with "
               "`paradnn run`; on a CPU give the sweep --memory-limit so such configs are "
               "recorded oom before they run",
}


def reason(status: str, error: Any, oom_predicted: Any = None) -> str:
    """The group of a failed row: ``status`` and, for error and oom rows, the cause (see the
    module docstring); ``status`` alone when there is none."""
    if status == "oom" and oom_predicted is True:
        return "oom: predicted before running"
    if status in ("timeout", "crashed") or not isinstance(error, str):
        return status
    match = _CLASS.match(error) or _PHRASE.match(error)
    return f"{status}: {match.group(1)}" if match else status


def _flag(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def rerun_command(row: dict[str, Any], memory_limit_bytes: Any = None) -> str:
    """The ``paradnn run`` (or, for oom, ``paradnn maxbatch``) command for a row's config."""
    family = row.get("family")
    if family not in families.names():
        return ""
    parts = ["paradnn", "maxbatch" if row.get("status") == "oom" else "run", family]
    for f in dataclasses.fields(families.get(family).spec):
        v = row.get(f.name)
        if v is None or (isinstance(v, float) and v != v) or (family == "real" and v in (0, 0.0)):
            continue
        parts += [f"--{f.name}", _flag(v)]
    if row.get("status") != "oom":
        parts += ["--batch", _flag(row.get("batch"))]
    parts += ["--dtype", str(row.get("dtype")), "--optimizer", str(row.get("optimizer"))]
    if row.get("devices") not in (None, 1, 1.0):
        parts += ["--devices", _flag(row.get("devices"))]
    if row.get("status") == "oom" and row.get("device_platform") == "cpu":
        parts += ["--memory-limit", "SIZE"]  # a CPU reports no memory size: maxbatch needs one
    return " ".join(parts)


_DAMAGE_ADVICE = (
    "the store file is damaged (a disk fault, or a copy or sync cut short): these rows cannot be "
    "read, so they count as not measured and resuming the sweep measures their configs again; "
    "copy the readable rows into a new store first (merge), so nothing more is written into the "
    "damaged file")

_WRONG_TYPE_ADVICE = (
    "a field of these rows holds a value of another type (a row edited by hand, or written by "
    "another tool; docs/schema.md, Reading a row): they cannot be read, so they count as not "
    "measured and resuming the sweep measures their configs again; copy the readable rows into "
    "a new store (merge), or correct the field in the row's JSON (table records, column row)")


def _damage_groups(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Failure-table rows for a damaged store (``load``'s ``attrs[DAMAGE_ATTR]``): one per store
    and cause of unreadable rows, and one per store whose structure SQLite's quick_check faults
    though every row was read (count 0)."""
    damage = df.attrs.get(DAMAGE_ATTR) or {}
    groups: dict[tuple[str, str], list[Unreadable]] = {}
    for u in damage.get("unreadable", []):
        groups.setdefault((u["store"], u["cause"]), []).append(Unreadable(**u))
    out = []
    for (store, cause), lost in groups.items():
        out.append({
            "status": "unreadable", "reason": f"unreadable: {cause}",
            "count": sum(u.cause != "unreachable" for u in lost), "family": "?",
            "example": (f"row id {lost[0].rowid}" if lost[0].key else lost[0].name())
                       + f" in {store}", "example_key": lost[0].key or "",
            # A wrong type names its field, value and what is allowed: the first row's comes
            # first, so the message line (cut to the terminal) shows what to correct.
            "error": f"{UNREADABLE_CAUSES[cause]}: " + ", ".join(
                u.name() + (f" ({u.detail})" if u.detail else "") for u in lost),
            "next_command": f"paradnn merge {store} -o NEW.db && paradnn sweep SWEEP_FILE "
                            "--store NEW.db",
            "advice": _WRONG_TYPE_ADVICE if cause == "wrong type" else _DAMAGE_ADVICE})
    for store, problems in damage.get("problems", {}).items():
        if any(key[0] == store for key in groups):
            continue
        out.append({
            "status": "damaged", "reason": "damaged: SQLite's quick_check", "count": 0,
            "family": "?", "example": store, "example_key": "",
            "error": "; ".join(problems), "next_command": f"paradnn merge {store} -o NEW.db",
            "advice": "every row was read, but the file's structure is damaged: writing into "
                      "it may fail; copy its rows into a new store and use that"})
    return out


def failures(paths: PathLike | Sequence[PathLike] | pd.DataFrame) -> pd.DataFrame:
    """Failed rows of one or more stores (or of a loaded frame) grouped by reason.

    One row per (status, reason), most frequent first, with ``count`` (rows), ``family``
    (families involved), ``example`` (one config, short form), ``example_key`` (its record
    key), ``error`` (its message, first 300 characters), ``next_command`` (the command that
    reproduces it or, for oom, finds the batch that fits) and ``advice`` (what to do). Rows of a
    damaged store that cannot be read are groups too (status ``unreadable``, one per store and
    cause, every row named in ``error``), and so is a store whose structure SQLite's quick_check
    faults (status ``damaged``, count 0). Empty (with these columns) when nothing failed.
    """
    df = paths if isinstance(paths, pd.DataFrame) else load(paths)
    # Predicted rows (paradnn predict) are not runs, so they are never failures.
    failed = df[~df["status"].isin(("ok", PREDICTED))] if len(df) else df
    damage = _damage_groups(df)
    if not len(failed):
        return pd.DataFrame(damage, columns=list(FAILURE_COLUMNS))
    predicted = failed["oom_predicted"] if "oom_predicted" in failed else [None] * len(failed)
    failed = failed.assign(reason=[reason(s, e, p is True or p == 1.0)
                                   for s, e, p in zip(failed["status"], failed["error"], predicted)])
    out = []
    for (status, why), group in failed.groupby(["status", "reason"], sort=False):
        example = group.iloc[0].to_dict()
        out.append({
            "status": status,
            "reason": why,
            "count": len(group),
            "family": ", ".join(sorted(group["family"].dropna().astype(str).unique())),
            "example": short_name(example),
            "example_key": example["key"],
            "error": str(example.get("error") or "")[:300],
            "next_command": rerun_command(example),
            "advice": _ADVICE.get(status, ""),
        })
    table = pd.DataFrame(out + damage, columns=list(FAILURE_COLUMNS))
    return table.sort_values(["count", "status"], ascending=[False, True]).reset_index(drop=True)
