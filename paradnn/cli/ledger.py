"""`paradnn ledger STORE`: the time ledger of configs already in a store (docs/ledger.md).

Measures again, with the ``ledger`` setting on, stored configs spread across the grid within
``--budget-s`` seconds (:mod:`paradnn.ledger_store`), adding the new rows to the store; ``--plan``
only says which configs it would take. `paradnn run --ledger` and a sweep's ``settings: {ledger:
true}`` take the ledger while measuring.
"""

from __future__ import annotations

import argparse
import sys

from paradnn.outputs import path_type
from paradnn.store import check_store
from paradnn.units import parse_number


def _cmd_ledger(args: argparse.Namespace) -> int:
    from paradnn import ledger_store, progress

    if args.plan:
        plan = ledger_store.plan_store(args.store, args.budget_s)
        for row in plan.chosen:
            print(f"{progress.config_name(row)}  (about {ledger_store.estimate_s(row):.0f} s)")
        lost = "; ".join(f"{n} {why}" for why, n in plan.left_out.items())
        print(f"{len(plan.chosen)} config(s), about {plan.estimate_s:.0f} s" + (f"; left out: {lost}" if lost else ""))
        return 0
    records = ledger_store.take(args.store, args.budget_s, stream=sys.stderr)
    failed = [r for r in records if r.status != "ok"]
    print(f"{len(records)} config(s) measured again with their ledger into {args.store}"
          + (f"; {len(failed)} not ok" if failed else ""))
    return 1 if failed else 0


def register(sub: argparse._SubParsersAction) -> None:
    from paradnn.cli import DEFAULT_STORE, typed

    p = sub.add_parser("ledger", help="the time ledger of stored configs: measure configs spread across "
                       "the store's grid again with the ledger on, within a time budget (docs/ledger.md)")
    p.add_argument("store", nargs="?", default=DEFAULT_STORE, type=path_type("store", "ledger STORE", then=check_store),
                   help="the results store (SQLite) whose configs are measured again, rows added to it")
    p.add_argument("--budget-s", type=typed(parse_number, "--budget-s", minimum=0.0), default=120.0,
                   metavar="S", help="seconds to spend, estimated from each config's stored wall time")
    p.add_argument("--plan", action="store_true", help="list the configs it would take, measure nothing")
    p.set_defaults(func=_cmd_ledger)
