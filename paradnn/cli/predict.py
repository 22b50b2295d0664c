"""``paradnn predict``: predict configs that were not measured, and score the model on held-out
measurements (docs/prediction.md)."""

from __future__ import annotations

import argparse
import sys

from paradnn import predictor
from paradnn.analysis.prediction import CORRECTIONS, DEFAULT_CORRECTION, DEFAULT_LEVEL
from paradnn.cli import DEFAULT_STORE, typed
from paradnn.errors import ParadnnError
from paradnn.grids import load_sweep_file
from paradnn.outputs import check_output, path_type, write_output
from paradnn.sweeper import DEFAULT_CACHE
from paradnn.units import parse_int, parse_number
from paradnn.workload import short_name


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def _score_text(table) -> str:
    lines = []
    for group, rows in table.groupby("group", sort=False):
        lines.append(f"\n{group}: held-out error of examples/s (median and 90th percentile "
                     f"absolute percentage error) and coverage of the "
                     f"{rows.attrs.get('level', 0.9):.0%} intervals")
        lines.append(f"  {'scheme':<22} {'model':<18} {'configs':>7} {'median':>8} {'p90':>8} "
                     f"{'coverage':>9} {'width':>7}")
        for _, r in rows.iterrows():
            lines.append(f"  {r['scheme']:<22} {r['model']:<18} {r['configs']:>7} "
                         f"{_pct(r['median_ape']):>8} {_pct(r['p90_ape']):>8} "
                         f"{_pct(r['coverage']):>9} {r['median_relative_width']:>7.2f}")
    lines.append("\nwidth: median (high - low) / predicted step time of the intervals. "
                 "k-fold: configs held out at random; leave out AXIS: each value of the axis held "
                 "out in turn (extrapolation at its ends).")
    return "\n".join(lines)


def _predict(args: argparse.Namespace) -> int:
    if args.file is None and not args.score:
        raise ParadnnError("predict: name a sweep file to predict, or --score to score the "
                           "model on the store's measurements (or both)")
    train = args.train or None
    inputs = [args.store, *([args.file] if args.file else []), *(train or [])]
    if args.csv:  # refused before any fit or write, not after
        check_output(args.csv, "predict --csv", inputs, args.force)
    if args.score:
        table = predictor.score(args.store, train=train, family=args.family,
                                correction=args.correction, level=args.level,
                                include_unstable=args.include_unstable)
        where = f"fitted on {', '.join(train)}, scored on {args.store}" if train else args.store
        print(f"{where}: held-out scores, correction {args.correction}" + _score_text(table))
        for line in table.attrs.get("models", []):
            print(f"  model  {line}")
    if args.file is None:
        return 0
    pred = predictor.predict(args.file, store=args.store, train=train, family=args.family,
                             correction=args.correction, level=args.level,
                             write=not args.no_write, include_unstable=args.include_unstable)
    print(f"\n{args.file}: {len(pred)} configs predicted"
          + (" (cross-platform estimates)" if pred.attrs["cross_platform"] else ""))
    for line in pred.attrs["models"]:
        print(f"  model  {line}")
    for group, why in pred.attrs["skipped"].items():
        print(f"  not fitted  {group}: {why}")
    if pred.attrs["uncovered"]:
        print(f"  {pred.attrs['uncovered']} config(s) of the file have no fitted model (no "
              "measurements of their family and dtype)")
    level = f"{pred['prediction_level'].iloc[0]:.0%}"
    shown = pred.sort_values("predicted_examples_per_sec").head(args.show) if args.show else pred
    print(f"\n  {'predicted examples/s':>20} {level + ' interval':>27} {'measured':>10}  config")
    for _, r in shown.iterrows():
        measured = r["batch"] / r["measured_step_time_s"] if r["measured_step_time_s"] > 0 else None
        interval = f"[{r['predicted_examples_per_sec_low']:.4g}, {r['predicted_examples_per_sec_high']:.4g}]"
        flag = f"  OUT OF RANGE: {r['prediction_out_of_range']}" if r["prediction_out_of_range"] else ""
        print(f"  {r['predicted_examples_per_sec']:>20.4g} {interval:>27} "
              f"{'' if measured is None else f'{measured:.4g}':>10}  {short_name(r.to_dict())}{flag}")
    if args.show and len(pred) > args.show:
        print(f"  ... {len(pred) - args.show} more (slowest first; --show 0 lists all, --csv "
              "writes all)")
    out_of_range = int((pred["prediction_out_of_range"] != "").sum())
    if out_of_range:
        print(f"\n{out_of_range} config(s) lie outside the fitted range (FLOPs, parameters or a "
              "hyperparameter): their predictions extrapolate")
    if args.csv:
        write_output(args.csv, lambda tmp: pred.to_csv(tmp, index=False), "predict --csv",
                     inputs, args.force)
        print(f"{args.csv}: {len(pred)} rows")
    written = pred.attrs["written"]
    print(f"{args.store}: {written} predicted row(s) written (status predicted; measured-only "
          "analyses never use them)" if not args.no_write else
          f"{args.store}: nothing written (--no-write)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "predict", help="predict step time and throughput of configs not measured, with "
        "intervals; --score: held-out errors",
        description="Fit a roofline model with a learned correction to a store's ok and stable "
        "rows (one per platform, framework, dtype and family) and predict every config of a "
        "sweep file, with calibrated intervals; predictions are stored as rows of status "
        "predicted. --score reports the model's error on held-out measurements beside the "
        "pure roofline (docs/prediction.md).")
    p.add_argument("file", nargs="?", default=None, type=path_type("input", "predict FILE"),
                   help="YAML sweep file whose configs to predict (optional with --score)")
    p.add_argument("--store", default=DEFAULT_STORE, type=path_type("store", "predict --store"),
                   help="store to fit on and to write predictions to (default: %(default)s)")
    p.add_argument("--train", nargs="+", default=None, metavar="STORE",
                   type=path_type("input", "predict --train"),
                   help="fit on these stores instead; when --store holds measurements of "
                   "another platform, the predictions are cross-platform estimates for it "
                   "(default: --store)")
    p.add_argument("--family", default=None, help="only this family (default: every family)")
    p.add_argument("--correction", choices=tuple(CORRECTIONS), default=DEFAULT_CORRECTION,
                   help="learned correction on top of the roofline; none = the pure roofline")
    p.add_argument("--level", type=typed(parse_number, "level", maximum=0.999),
                   default=DEFAULT_LEVEL, metavar="P",
                   help="nominal coverage of the intervals, a fraction")
    p.add_argument("--score", action="store_true",
                   help="print held-out errors: k-fold by config and leave-one-value-out along "
                   "nodes, layers, batch (with --train: fit there, score every config of --store)")
    p.add_argument("--include-unstable", action="store_true",
                   help="fit on ok rows that missed their precision target too")
    p.add_argument("--no-write", action="store_true", help="print, do not store the predictions")
    p.add_argument("--show", type=typed(parse_int, "show", minimum=0), default=20, metavar="N",
                   help="configs listed, slowest first; 0 lists all")
    p.add_argument("--csv", default=None, metavar="FILE",
                   type=path_type("output", "predict --csv", (".csv",)),
                   help="write every prediction to FILE")
    p.add_argument("--force", action="store_true", help="replace an existing --csv file that "
                   "paradnn did not write")
    p.set_defaults(func=_predict)


def budget_sweep(args: argparse.Namespace) -> int:
    """``paradnn sweep FILE --budget N [--target-width W]``: the adaptive sweep."""
    if args.repeat not in (None, 1) or args.remeasure_unstable or args.retry_unstable_s:
        raise ParadnnError("--budget measures each chosen config once: --repeat, "
                           "--remeasure-unstable and --retry-unstable-s do not apply")
    if args.no_cache and args.cache_dir:
        raise ParadnnError("--cache-dir and --no-cache exclude each other")
    if args.budget is None:
        args.budget = len(load_sweep_file(args.file, args.max_configs).workloads)
    options = {k: v for k, v in {
        "executor": args.executor, "memory_limit_bytes": args.memory_limit,
        "timeout_s": args.timeout, "address": args.address}.items() if v is not None}
    options["cache_dir"] = None if args.no_cache else (args.cache_dir or DEFAULT_CACHE)
    df = predictor.adaptive_sweep(args.file, args.budget, store=args.store,
                                  target_width=args.target_width, progress=not args.quiet,
                                  **options)
    runs = df[df["status"] != "predicted"]
    counts = runs["status"].value_counts().to_dict()
    retried = len(runs) - runs["workload_key"].nunique()
    print(f"{args.store}: {runs['workload_key'].nunique()} config(s) measured ("
          + ", ".join(f"{s} {n}" for s, n in sorted(counts.items())) + " runs"
          + (f"; {retried} repeat(s) of runs that missed their precision target" if retried else "")
          + f"), {int((df['status'] == 'predicted').sum())} predicted row(s) (status predicted) "
          f"in {df['workload_key'].nunique()} configs of {args.file}; `paradnn predict --score "
          f"--store {args.store}` scores the model")
    missing = df.attrs.get("missing", [])
    if missing:
        # As a plain sweep (paradnn.cli.sweep): never exit 0 with a config missing.
        print(f"paradnn sweep --budget: {len(missing)} config(s) missing (infrastructure faults; "
              "not stored; run the sweep again to measure them): "
              + "; ".join(f"{name} [key {key}]" for name, key, _why in missing), file=sys.stderr)
        return 1
    return 0
