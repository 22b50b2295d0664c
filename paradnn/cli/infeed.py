"""`paradnn infeed`: one image model fed from synthetic device batches and from a host JPEG
pipeline at several worker counts (:mod:`paradnn.experiments.infeed`; the paper's Figure 5).

Prints a table with units (or ``--json``); ``--store`` keeps the rows (``family = "infeed"``),
``--plot`` saves the figure. On a CPU-only host the device is the host itself: the rows say
``device_is_host`` and the command says that such timings are not an accelerator measurement.
"""

from __future__ import annotations

import argparse
import json
import sys

from pathlib import Path

from paradnn.outputs import FIGURE_SUFFIXES, check_output, path_type, write_output
from paradnn.store import check_store
from paradnn.units import parse_int, parse_number


def _records(table) -> list[dict]:
    """The table's rows with missing values as None (JSON null, not NaN)."""
    return table.astype(object).where(table.notna(), None).to_dict(orient="records")


def _cmd_infeed(args: argparse.Namespace) -> int:
    from paradnn.experiments import infeed
    from paradnn.cli.run import check_backend, workload_from_args
    from paradnn.cli.system import sig_digits, percent, print_table, save_records

    workload = workload_from_args(args)
    if args.plot:  # before the measurement: never the store, never a file paradnn did not write
        check_output(args.plot, "infeed --plot", [args.store] if args.store else [], args.force)
    check_backend(workload.framework)
    result = infeed.run_infeed(workload, args.workers, args.steps, args.warmup_steps, args.data_dir,
                               args.files, args.jpeg_side, args.prefetch, args.delay_ms,
                               synthetic=not args.no_synthetic)
    save_records(result.records, args.store)
    rows = [r.to_dict() for r in result.records]
    ok = all(r["status"] == "ok" for r in rows)
    if args.plot and not result.table.empty:
        from paradnn.plots import DPI_2X
        from paradnn.plots import infeed as infeed_figure

        fig = infeed_figure(result.table)
        out = Path(args.plot)
        write_output(out, lambda tmp: fig.savefig(tmp, dpi=DPI_2X, format=out.suffix[1:].lower()),
                     "infeed --plot", [args.store] if args.store else [], args.force)
    if args.json:
        print(json.dumps({"device_is_host": result.device_is_host, "data_dir": result.data_dir,
                          "table": _records(result.table), "rows": rows}, default=str))
        return 0 if ok else 1
    if result.device_is_host:
        print(f"paradnn: note: {infeed.DEVICE_IS_HOST_NOTE}", file=sys.stderr)
    print_table(result.table.to_dict(orient="records"), [
        ("feed", "feed", str), ("workers", "workers", lambda v: "n/a" if v != v else str(int(v))),
        ("examples/s", "examples_per_sec", sig_digits()), ("step [s]", "step_time_s", sig_digits()),
        ("wait [s]", "infeed_wait_s", sig_digits()), ("infeed-bound", "infeed_bound_fraction", percent),
        ("synthetic speedup [x]", "synthetic_speedup", sig_digits())])
    first = rows[0] if rows else {}
    print(f"{first.get('timed_steps', args.steps)} timed steps per feed after {args.warmup_steps} "
          f"warm-up steps; batch {workload.batch}; examples/s = batch x steps / their wall time; "
          "step = median wall time of one step incl. its wait; wait = mean time the device waited "
          "for the next batch; infeed-bound = total wait / total step time; synthetic speedup = "
          "synthetic examples/s over the row's")
    print(f"JPEG files: {args.files} in {result.data_dir}")
    for r in rows:
        if r["status"] != "ok":
            print(f"paradnn: {r['feed']} workers={r['workers']}: {r['status']}: {r['error']}", file=sys.stderr)
    return 0 if ok else 1


def register(sub: argparse._SubParsersAction) -> None:
    from paradnn.cli import typed
    from paradnn.cli.run import add_spec_subparsers
    from paradnn.cli.system import parse_int_list

    p = sub.add_parser("infeed", help="synthetic vs host JPEG input pipeline: examples/s and the "
                       "infeed-bound fraction against host workers",
                       description="Train one image model from synthetic device batches and from "
                       "a tf.data pipeline (read, decode, random crop, flip, normalize) with "
                       "--workers host workers; report how long the device waits for input.")
    add_spec_subparsers(p, _cmd_infeed, settings=False)
    family_parsers = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices
    for fp in family_parsers.values():
        for action in [a for a in fp._actions if a.dest == "memory_limit"]:
            # The run's memory limit refuses configs before compiling; here the step is the one
            # `paradnn run` measures, so that check belongs there, not to a flag doing nothing.
            fp._remove_action(action)
            for group in fp._action_groups:
                if action in group._group_actions:
                    group._group_actions.remove(action)
            for option in action.option_strings:
                fp._option_string_actions.pop(option, None)
        fp.add_argument("--workers", default=[1, 2, 4], metavar="1,2,...",
                        type=typed(parse_int_list, "workers", 1, 256),
                        help="host worker counts of the pipeline (parallel decode calls and threads; default 1,2,4)")
        fp.add_argument("--steps", default=30, metavar="N", type=typed(parse_int, "steps", 1, 1_000_000),
                        help="timed training steps per feed")
        fp.add_argument("--warmup-steps", default=3, metavar="N",
                        type=typed(parse_int, "warmup_steps", 0, 1_000_000),
                        help="untimed steps per feed before timing (fill the pipeline)")
        fp.add_argument("--files", default=256, metavar="N", type=typed(parse_int, "files", 1, 1_000_000),
                        help="generated JPEG files the pipeline cycles through")
        fp.add_argument("--jpeg-side", default=None, metavar="PX", type=typed(parse_int, "jpeg_side", 8, 8192),
                        help="side of the generated JPEG files in pixels (default: the crop side x "
                        "256/224, e.g. 256 for 224)")
        fp.add_argument("--prefetch", default=2, metavar="N", type=typed(parse_int, "prefetch", 1, 1024),
                        help="batches the pipeline prefetches on the host")
        fp.add_argument("--delay-ms", default=0.0, metavar="MS",
                        type=typed(parse_number, "delay_ms", maximum=60_000.0, exclusive_minimum=False),
                        help="extra host time per image in milliseconds, a sleep in the map: makes "
                        "the pipeline slow on purpose")
        fp.add_argument("--data-dir", default=None, metavar="DIR",
                        type=path_type("cache", "infeed --data-dir"),
                        help="folder for the generated JPEG files, made once and reused (default: "
                        "paradnn-infeed in the temporary folder)")
        fp.add_argument("--no-synthetic", action="store_true", help="skip the synthetic feed")
        fp.add_argument("--store", default=None, metavar="PATH", type=path_type("store", "infeed --store", then=check_store), help="SQLite store to add the rows to (default: none; the rows are printed, not stored)")
        fp.add_argument("--plot", default=None, metavar="FILE.png",
                        type=path_type("output", "infeed --plot", FIGURE_SUFFIXES),
                        help="save the figure (like Fig 5) here: a .png, .svg or .pdf file (a "
                        "file paradnn did not write is kept unless --force)")
        fp.add_argument("--force", action="store_true",
                        help="replace an existing --plot file that paradnn did not write")
