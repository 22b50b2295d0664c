"""``paradnn ledger STORE``: take the time ledger (docs/ledger.md) of configs already in a store.

A store measured without the ``ledger`` setting holds step times but not where they went. This
module picks stored configs spread across the grid, within a time budget, measures each again
on this host with its stored settings and ``ledger`` on, and adds the new rows to the store
(repeat rows of the same config: ``ledger`` is not part of a record's key). Only configs measured
on this host's platform are taken: a ledger says where *this* platform's time goes.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

import pandas as pd

from paradnn import frameworks
from paradnn.analysis.columns import PLATFORM_KEY
from paradnn.analysis.prediction import workload_of
from paradnn.errors import SpecError
from paradnn.measure import KEYED_SETTINGS, MeasureSettings, parse_setting
from paradnn.record import Record
from paradnn.workload import Workload

#: The factor a config's stored wall time is multiplied by to estimate its ledger run: the
#: ledger's own profile adds at most about a quarter (benchmarks/bench_ledger.py).
LEDGER_COST = 1.25
#: Seconds added to each estimate: the framework's start-up and the store's write.
PER_CONFIG_S = 1.0


@dataclass
class Plan:
    """The configs a ledger pass takes (``chosen``: rows of the store, in the order they run),
    with the estimate of its time (s) and what was left out and why (counts by reason)."""

    chosen: list[dict[str, Any]]
    estimate_s: float
    left_out: dict[str, int] = field(default_factory=dict)


def spread(n: int) -> list[int]:
    """The indices ``0..n-1`` in an order that covers the range evenly at every prefix (the
    bit-reversed, van der Corput order): the first configs of a sorted grid taken this way
    lie across the whole grid, not at one corner of it."""
    if n <= 1:
        return list(range(n))
    bits = max(1, math.ceil(math.log2(n)))
    order = []
    for i in range(2 ** bits):
        j = int(format(i, f"0{bits}b")[::-1], 2)
        if j < n:
            order.append(j)
    return order


def estimate_s(row: dict[str, Any]) -> float:
    """Seconds a ledger run of a stored config should take: its stored wall time (``phase_total_s``,
    else compile plus timing) times :data:`LEDGER_COST`, plus :data:`PER_CONFIG_S`."""
    def num(name: str) -> float:
        value = row.get(name)
        return float(value) if isinstance(value, (int, float)) and value == value else 0.0

    wall = num("phase_total_s") or num("compile_s") + num("timing_s")
    return wall * LEDGER_COST + PER_CONFIG_S


def settings_of(row: dict[str, Any]) -> MeasureSettings:
    """The stored row's timing settings (those that shape the timed calls), with ``ledger`` on."""
    values = {}
    for name in KEYED_SETTINGS:
        value = row.get(name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        values[name] = parse_setting(value, name)
    return MeasureSettings(**values, ledger=True)


def plan(frame: pd.DataFrame, budget_s: float, platform: dict[str, Any]) -> Plan:
    """The configs of a store's rows ``frame`` (:func:`paradnn.load`) a ledger pass of about
    ``budget_s`` seconds takes: the latest ``ok`` row of each config measured on ``platform``
    (this host's :data:`PLATFORM_KEY` fields) that has no ledger yet, sorted by family and
    hyperparameters and taken in :func:`spread` order while their estimates fit the budget."""
    if not (isinstance(budget_s, (int, float)) and budget_s > 0 and math.isfinite(budget_s)):
        raise SpecError("budget_s", budget_s, "a positive number of seconds")
    left: dict[str, int] = {}

    def drop(reason: str, count: int) -> None:
        if count:
            left[reason] = left.get(reason, 0) + count

    if frame.empty or "status" not in frame.columns:
        return Plan([], 0.0, left)
    ok = frame[frame["status"] == "ok"]
    has_ledger = (set(ok.loc[ok["ledger_source"].notna(), "key"]) if "ledger_source" in ok.columns
                  else set())
    latest = ok.sort_values("time_utc").groupby("key", sort=False).tail(1)
    drop("already has a ledger", int(latest["key"].isin(has_ledger).sum()))
    latest = latest[~latest["key"].isin(has_ledger)]
    here = pd.Series(True, index=latest.index)
    for col in PLATFORM_KEY:
        if col in latest.columns:
            here &= latest[col].astype(str) == str(platform.get(col))
    drop("measured on another platform", int((~here).sum()))
    latest = latest[here]
    rows = []
    for row in latest.to_dict("records"):
        if workload_of(row) is None:
            drop("a real model or an incomplete row (no workload to rebuild)", 1)
            continue
        rows.append(row)
    sort_cols = [c for c in ("family", "framework", "dtype", "layers", "nodes", "filters", "blocks",
                             "embed", "length", "image", "batch") if c in latest.columns]
    rows.sort(key=lambda r: tuple(str(r.get(c)) if not isinstance(r.get(c), (int, float))
                                  else f"{float(r.get(c)):020.6f}" for c in sort_cols))
    chosen, total = [], 0.0
    for i in spread(len(rows)):
        cost = estimate_s(rows[i])
        if total + cost > budget_s:
            drop("over the time budget", 1)
            continue
        chosen.append(rows[i])
        total += cost
    return Plan(chosen, total, left)


def plan_store(store_path: str | Path, budget_s: float) -> Plan:
    """:func:`plan` for the store at ``store_path`` on this host's platform (that of the
    framework most of its rows ran with)."""
    from paradnn import runner, store

    frame = store.load(store_path)
    framework = (str(frame["framework"].mode().iloc[0]) if "framework" in frame.columns and len(frame)
                 else frameworks.DEFAULT)
    return plan(frame, budget_s, runner.context(framework)[0])


def take(store_path: str | Path, budget_s: float, *, stream: IO[str] | None = sys.stderr,
         run_fn: Callable[[Workload, MeasureSettings, int | None], Record] | None = None) -> list[Record]:
    """Measure again, with the ledger on, the configs of the store at ``store_path`` that
    :func:`plan` picks for ``budget_s`` seconds, adding each record to the store as it comes;
    returns the records. ``run_fn`` replaces :func:`paradnn.runner.run_workload` (tests)."""
    from paradnn import progress, runner, store

    chosen = plan_store(store_path, budget_s)
    if stream is not None:
        lost = "; ".join(f"{n} {why}" for why, n in chosen.left_out.items())
        stream.write(f"paradnn ledger: {len(chosen.chosen)} config(s) to profile, about "
                     f"{chosen.estimate_s:.0f} s" + (f" (left out: {lost})" if lost else "") + "\n")
        stream.flush()
    run = run_fn or runner.run_workload
    records = []
    with store.Store(store_path) as db:
        for i, row in enumerate(chosen.chosen, 1):
            workload = workload_of(row)
            assert workload is not None  # plan() kept only rows that rebuild
            limit = row.get("memory_limit_bytes") if row.get("memory_limit_source") == "given" else None
            record = run(workload, settings_of(row), int(limit) if limit else None)
            db.add(record)
            records.append(record)
            if stream is not None:
                from paradnn import ledger

                line = ledger.summary(record.metrics) if record.status == "ok" else None
                stream.write(f"paradnn ledger: [{i}/{len(chosen.chosen)}] {progress.config_name(workload)}: "
                             f"{line or record.metrics.get('ledger_note') or record.status}\n")
                stream.flush()
    return records
