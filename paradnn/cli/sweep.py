"""``paradnn sweep``, ``paradnn status``, ``paradnn merge`` and ``paradnn export``."""

from __future__ import annotations

import argparse

from paradnn.errors import ParadnnError


def _sweep(args: argparse.Namespace) -> int:
    from paradnn.grids import parse_bytes
    from paradnn.sweeper import DEFAULT_CACHE, sweep

    if args.no_cache and args.cache_dir:
        raise ParadnnError("--cache-dir and --no-cache exclude each other")
    if args.dry_run:
        from paradnn.cli.plan import show_plan

        return show_plan(args.file, store=args.store, memory_limit=args.memory_limit,
                         repeat=args.repeat)
    import datetime as _dt

    started = _dt.datetime.now(_dt.timezone.utc)
    df = sweep(
        args.file, store=args.store, executor=args.executor, repeat=args.repeat,
        memory_limit_bytes=None if args.memory_limit is None else parse_bytes(args.memory_limit),
        timeout_s=args.timeout, address=args.address,
        cache_dir=None if args.no_cache else (args.cache_dir or DEFAULT_CACHE),
        progress=not args.quiet)
    # Rows written since this sweep started were measured now (by it, or by a sweep sharing
    # the store); the others were already in the store and were skipped.
    import pandas as pd

    when = pd.to_datetime(df["time_utc"], utc=True, format="ISO8601") if len(df) else None
    now = df[when >= started] if len(df) else df

    def summary(frame) -> str:
        counts = frame["status"].value_counts().to_dict() if len(frame) else {}
        return ", ".join(f"{s} {n}" for s, n in sorted(counts.items())) or "none"

    print(f"{args.store}: {len(now)} measured now ({summary(now)}), {len(df) - len(now)} already "
          f"in the store; {len(df)} rows for this sweep ({summary(df)})"
          + ("; `paradnn status` groups the failures" if (df["status"] != "ok").any() else ""))
    return 0


def _status(args: argparse.Namespace) -> int:
    import pandas as pd

    from paradnn.status import failures
    from paradnn.store import load

    stores = [args.store] if isinstance(args.store, str) else list(args.store)
    df = load(stores)
    print(f"{', '.join(stores)}: {len(df)} rows")
    if not len(df):
        print("nothing measured yet: `paradnn sweep sweeps/smoke.yaml` fills a store")
        return 0
    ok = int((df["status"] == "ok").sum())
    print(f"ok {ok}, failed {len(df) - ok}")

    def crosstab(index) -> str:
        table = pd.crosstab(index, df["status"])
        return "\n".join("  " + line for line in table.to_string().splitlines())

    print("\nrows by family and status:")
    print(crosstab(df["family"].fillna("?").rename("family")))
    platform = (df["backend"].fillna("?").astype(str) + "/"
                + df["device_kind"].fillna("?").astype(str)).rename("backend/device")
    print("\nrows by platform and status:")
    print(crosstab(platform))
    table = failures(df)
    if not len(table):
        print("\nno failures")
        return 0
    print(f"\nfailures by reason ({len(table)} reason(s), most frequent first):")
    for i, r in table.iterrows():
        print(f"\n{i + 1}. {r['reason']}: {r['count']} row(s) ({r['family']})")
        print(f"   example  {r['example']}  [key {r['example_key']}]")
        if r["error"]:
            print(f"   message  {r['error'][:160]}{'...' if len(r['error']) > 160 else ''}")
        print(f"   next     {r['next_command']}")
        print(f"   why      {r['advice']}")
    print("\nA sweep skips configs that have a record, failures included: after a fix, measure "
          "again with `paradnn sweep FILE --repeat N` or into a new store.")
    return 0


def _merge(args: argparse.Namespace) -> int:
    from paradnn.store import merge

    added, present = merge(args.stores, args.output)
    print(f"{args.output}: {added} rows added, {present} already present (not duplicated)")
    return 0


def _export(args: argparse.Namespace) -> int:
    from paradnn.store import export

    n = export(args.store, args.output)
    print(f"{args.output}: {n} rows")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a sweep file into a results store (resumable)",
                       description="Run every config of a YAML sweep file (docs/sweeps.md) into "
                       "a store. Configs already in the store are skipped.")
    p.add_argument("file", help="YAML sweep file, e.g. sweeps/smoke.yaml")
    p.add_argument("--store", default="results.db", help="SQLite results store (default: "
                   "results.db; created if missing)")
    p.add_argument("--repeat", type=int, default=None,
                   help="records wanted per config (default: the file's, else 1)")
    p.add_argument("--executor", choices=("process", "inprocess", "ray"), default=None,
                   help="where configs run (default: the file's, else process)")
    p.add_argument("--address", default=None, help="Ray cluster HOST:PORT (with --executor ray)")
    p.add_argument("--memory-limit", default=None,
                   help="device memory for out-of-memory prediction, e.g. 2GB or 512MiB "
                   "(default: the device's own where known)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per config, compile included (default: the file's, else 1800)")
    p.add_argument("--cache-dir", default=None,
                   help="persistent XLA compilation cache (default: ~/.cache/paradnn/xla)")
    p.add_argument("--no-cache", action="store_true", help="disable the compilation cache")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    p.add_argument("--dry-run", action="store_true",
                   help="run nothing: print the plan (configs, parameters, FLOPs, predicted "
                   "memory and oom, estimated time), as `paradnn plan FILE` does")
    p.set_defaults(func=_sweep)

    p = sub.add_parser("status", help="counts of a store's rows; failures grouped by reason, "
                       "with an example config and the next command to run")
    p.add_argument("store", nargs="+", help="one or more stores")
    p.set_defaults(func=_status)

    p = sub.add_parser("merge", help="combine stores without duplicates")
    p.add_argument("stores", nargs="+", help="input stores")
    p.add_argument("-o", "--output", required=True, help="output store (created or extended)")
    p.set_defaults(func=_merge)

    p = sub.add_parser("export", help="write a store's rows to CSV or Parquet")
    p.add_argument("store", nargs="+", help="one or more stores")
    p.add_argument("-o", "--output", required=True, help="file.csv or file.parquet")
    p.set_defaults(func=_export)
