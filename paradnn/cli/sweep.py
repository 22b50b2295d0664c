"""``paradnn sweep``, ``paradnn status``, ``paradnn merge`` and ``paradnn export``."""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import pandas as pd

from paradnn.cli import DEFAULT_STORE, last_words, typed
from paradnn.cli.plan import show_plan
from paradnn.errors import ParadnnError
from paradnn.grids.runsettings import RUN_SETTINGS, add_flags, from_flags
from paradnn.outputs import path_type, write_output
from paradnn.record import PHASES, format_phase_totals, phase_metric, phase_totals
from paradnn.status import failures
from paradnn.store import EXPORT_SUFFIXES, check_store, export, load, merge, time_stamps
from paradnn.sweeper import DEFAULT_CACHE, RETRY_BUDGET_FACTOR, is_retry, sweep
from paradnn.units import parse_int, parse_number


def _sweep(args: argparse.Namespace) -> int:
    if args.no_cache and args.cache_dir:
        raise ParadnnError("--cache-dir and --no-cache exclude each other")
    if args.target_width is not None and args.budget is None:
        # It stops an adaptive sweep early; alone it would quietly measure every config.
        raise ParadnnError(f"sweep --target-width {args.target_width:g}: needs --budget N (it stops "
                           "the adaptive sweep of at most N configs early); allowed: --target-width "
                           "with --budget, or neither")
    if args.dry_run:
        return show_plan(args.file, store=args.store,
                         run={k: v for k, v in from_flags(args).items() if RUN_SETTINGS[k].plan})
    if args.budget is not None or args.target_width is not None:
        from paradnn.cli.predict import (
            budget_sweep,  # the predict command's module, loaded only for --budget
        )

        return budget_sweep(args)
    started = datetime.datetime.now(datetime.timezone.utc)
    run = from_flags(args)
    run["cache_dir"] = None if args.no_cache else run.get("cache_dir", DEFAULT_CACHE)
    try:
        df = sweep(args.file, store=args.store, progress=not args.quiet, **run)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: what is kept, and how to go on (even with --quiet)
        count = _rows_since(args.store, started)
        last_words(f"paradnn sweep: stopped; {'the' if count is None else count} row(s) written to {args.store} "
                   "since this sweep started are kept (each committed as its config finished); the "
                   "same command measures the rest and skips the configs already stored")
        raise
    # "Measured now" is what this sweep committed itself (the sweeper lists those rows); of the
    # others, those stamped after it started were written meanwhile by another sweep sharing
    # the store, and the rest were already there and were skipped.
    mine = {tuple(pair) for pair in df.attrs.get("written", [])}
    now = meanwhile = df.iloc[0:0]
    if len(df):
        ours = pd.Series([(k, t) in mine for k, t in zip(df["key"], df["time_utc"])],
                         index=df.index, dtype=bool)
        now, meanwhile = df[ours], df[~ours & _stamped_since(df["time_utc"], started)]
    before = len(df) - len(now) - len(meanwhile)

    def summary(frame) -> str:
        counts = frame["status"].value_counts().to_dict() if len(frame) else {}
        return ", ".join(f"{s} {n}" for s, n in sorted(counts.items())) or "none"

    retries = now[now.apply(is_retry, axis=1)] if len(now) else now
    stable = int(retries["stable"].eq(True).sum()) if len(retries) else 0
    print(f"{args.store}: {len(now)} measured now ({summary(now)}), "
          + (f"{len(meanwhile)} measured meanwhile by another sweep on this store "
             f"({summary(meanwhile)}), " if len(meanwhile) else "")
          + f"{before} already in the store; {len(df)} rows for this sweep ({summary(df)})"
          + (f"; {len(retries)} of them retries of unstable configs with a "
             f"{RETRY_BUDGET_FACTOR}x time budget, {stable} stable now" if len(retries) else "")
          + ("; `paradnn status` groups the failures" if len(df) and (df["status"] != "ok").any()
             else ""))
    missing = df.attrs.get("missing", [])
    if missing:
        # Never exit 0 with a config missing: a lost config is the environment's fault, not a
        # result, and a script checking the status must see it (printed even with --quiet).
        print(f"paradnn sweep: {len(missing)} config(s) missing (infrastructure faults; not "
              f"stored; run the sweep again to measure them): "
              + "; ".join(f"{name} [key {key}]" for name, key, _why in missing), file=sys.stderr)
        return 1
    return 0


def _stamped_since(times: pd.Series, started: datetime.datetime) -> pd.Series:
    """Which of ``times`` (rows' ``time_utc``) are at or after ``started``."""
    return pd.to_datetime(times, utc=True, format="ISO8601", errors="coerce") >= started


def _rows_since(store: str, started: datetime.datetime) -> int | None:
    """Rows of ``store`` stamped at or after ``started`` (every attempt; 0 without a store;
    None where the store cannot be read now: the stop must not end in another error). Reads
    the rows' times only (:func:`time_stamps`): after SIGTERM a scheduler waits only so long."""
    try:
        times = time_stamps(store)
    except (ParadnnError, OSError):
        return None
    return int(_stamped_since(times, started).sum())


def _status(args: argparse.Namespace) -> int:
    stores = [args.store] if isinstance(args.store, str) else list(args.store)
    df = load(stores)
    print(f"{', '.join(stores)}: {len(df)} rows")
    table = failures(df)  # with the unreadable rows of a damaged store, even if none is read
    if not len(df) and not len(table):
        print("nothing measured yet: `paradnn sweep sweeps/smoke.yaml` fills a store")
        return 0
    ok = int((df["status"] == "ok").sum()) if len(df) else 0
    predicted = int((df["status"] == "predicted").sum()) if len(df) else 0
    print(f"ok {ok}, failed {len(df) - ok - predicted}"
          + (f", predicted {predicted} (not measured: paradnn predict)" if predicted else ""))
    if not len(df):
        return _print_failures(table)

    def crosstab(index) -> str:
        table = pd.crosstab(index, df["status"])
        return "\n".join("  " + line for line in table.to_string().splitlines())

    print("\nrows by family and status:")
    print(crosstab(df["family"].fillna("?").rename("family")))
    platform = (df["device_platform"].fillna("?").astype(str) + "/"
                + df["device_kind"].fillna("?").astype(str)).rename("device_platform/device")
    print("\nrows by platform and status:")
    print(crosstab(platform))
    # Only the phase columns of the rows that have a breakdown: a dict per row of every column
    # took 4 s of a 40,000-row store's 11.
    phases = [c for c in (*(phase_metric(p) for p in PHASES), "phase_total_s") if c in df]
    has = df["phase_total_s"].notna() if "phase_total_s" in df else pd.Series(False, index=df.index)
    phased = df.loc[has, phases].to_dict("records")
    if phased:
        print(f"\nwhere the time went ({len(phased)} row(s) with a phase breakdown, "
              f"docs/metrics.md): {format_phase_totals(phase_totals(phased))}")
    _print_unstable(df, stores, args.recipes, args.force)
    return _print_failures(table)


def _print_failures(table: pd.DataFrame) -> int:
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


def _print_unstable(df: pd.DataFrame, stores: list[str], folder: str | None = None,
                    force: bool = False) -> None:
    """The ok rows whose timing missed its precision target, per family, and the sweep that
    measures them again (``paradnn.report.recipes.remeasure_unstable``), its file written into
    ``folder`` when given."""
    from paradnn.analysis.columns import unstable_mask
    from paradnn.report.recipes import REMEASURE_FILE, remeasure_unstable

    ok = df[df["status"] == "ok"]
    bad = unstable_mask(ok)
    if not bad.any():
        if "stable" in ok.columns:
            print(f"\nunstable: none of the {len(ok)} ok rows (every timing met its precision target)")
        return
    per_family = ok[bad]["family"].fillna("?").value_counts()
    retries = int(ok[bad].apply(is_retry, axis=1).sum())
    print(f"\nunstable: {int(bad.sum())} of {len(ok)} ok rows missed their precision target (stable "
          f"false; {', '.join(f'{f} {n}' for f, n in per_family.items())}"
          + (f"; {retries} of them a sweep's automatic retry with a {RETRY_BUDGET_FACTOR}x time "
             "budget" if retries else "")
          + "); the report draws them marked and leaves them out of regressions and speedup "
          "claims")
    again = remeasure_unstable(df, stores[0], folder or "")
    if again is None:
        return
    print(f"   why      {again['change']}")
    if again["sweep_file"] and folder:
        path = Path(folder) / REMEASURE_FILE
        write_output(path, lambda tmp: tmp.write_text(again["sweep_file"], encoding="utf-8"),
                     "status --recipes", stores, force)
        print(f"   file     written to {path} ({again['configs']} configs)")
    elif again["sweep_file"]:
        print(f"   file     write this as {REMEASURE_FILE} ({again['configs']} configs), or let "
              "`paradnn status --recipes DIR` write it:")
        print("\n".join("            " + line for line in again["sweep_file"].splitlines()))
    print(f"   next     {again['command']}")


def _merge(args: argparse.Namespace) -> int:
    added, present = merge(args.stores, args.output)
    print(f"{args.output}: {added} rows added, {present} already present (not duplicated)")
    return 0


def _export(args: argparse.Namespace) -> int:
    n = export(args.store, args.output, force=args.force, attempts=args.attempts)
    print(f"{args.output}: {n} rows")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a sweep file into a results store (resumable)",
                       description="Run every config of a YAML sweep file (docs/sweeps.md) into "
                       "a store. Configs already in the store are skipped.")
    p.add_argument("file", type=path_type("input", "sweep FILE"),
                   help="YAML sweep file, e.g. sweeps/smoke.yaml")
    # Checked while parsing (paradnn.store.check_store), as the --store of ops and the others:
    # a foreign, unopenable or read-only file, or one whose records table cannot take a row, is
    # one line before a worker starts or a config is measured.
    p.add_argument("--store", default=DEFAULT_STORE,
                   type=path_type("store", "sweep --store", then=check_store),
                   help="SQLite results store, created if missing (default: %(default)s)")
    # The run settings' flags (--executor, --repeat, --timeout, ...), declared once in
    # paradnn.grids.runsettings; None: the file's value, else the setting's default.
    add_flags(p, typed=typed, options={"cache_dir": {
        "type": path_type("cache", "sweep --cache-dir"), "metavar": "CACHE_DIR"}})
    p.add_argument("--no-cache", action="store_true", help="disable the compilation cache")
    p.add_argument("--budget", type=typed(parse_int, "budget"), default=None, metavar="N",
                   help="measure at most N configs, chosen adaptively for `paradnn predict` "
                   "(a space-filling start, then the widest prediction intervals), then predict "
                   "the rest into the store (docs/prediction.md; default: measure every config)")
    p.add_argument("--target-width", type=typed(parse_number, "target-width"), default=None,
                   metavar="W", help="with --budget: stop early once every 90%% interval is at "
                   "most W wide, relative to its prediction (0.2 = 20%%)")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    p.add_argument("--dry-run", action="store_true",
                   help="run nothing: print the plan (configs, parameters, FLOPs, predicted "
                   "memory and oom, estimated time), as `paradnn plan FILE` does")
    p.set_defaults(func=_sweep)

    p = sub.add_parser("status", help="counts of a store's rows; failures grouped by reason, "
                       "with an example config and the next command to run")
    p.add_argument("store", nargs="*", default=[DEFAULT_STORE], type=path_type("input", "status STORE"),
                   help="one or more stores (default: %(default)s)")
    p.add_argument("--recipes", metavar="DIR", default=None, type=path_type("folder", "status --recipes"),
                   help="write the sweep file that measures the unstable runs again into DIR (the "
                   "command printed names it there); default: print it to write yourself")
    p.add_argument("--force", action="store_true",
                   help="with --recipes: replace a file there that paradnn did not write")
    p.set_defaults(func=_status)

    p = sub.add_parser("merge", help="combine stores without duplicates")
    p.add_argument("stores", nargs="+", type=path_type("input", "merge STORE"), help="input stores")
    p.add_argument("-o", "--output", required=True, type=path_type("store", "merge -o"),
                   help="output store (created, or a paradnn store extended; never an input)")
    p.set_defaults(func=_merge)

    p = sub.add_parser("export", help="write a store's rows to CSV or Parquet")
    p.add_argument("store", nargs="*", default=[DEFAULT_STORE], type=path_type("input", "export STORE"),
                   help="one or more stores (default: %(default)s)")
    p.add_argument("-o", "--output", required=True, metavar="FILE.csv",
                   type=path_type("output", "export -o", EXPORT_SUFFIXES),
                   help="file.csv or file.parquet (never a store; replaced only if paradnn "
                   "wrote it)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing output that paradnn did not write")
    p.add_argument("--attempts", action="store_true",
                   help="every row, the attempts a newer attempt of the same config replaced "
                   "included (default: one row per config, as paradnn.load gives them)")
    p.set_defaults(func=_export)
