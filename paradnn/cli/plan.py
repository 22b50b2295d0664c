"""``paradnn plan SWEEP_OR_SPEC`` (and ``paradnn sweep FILE --dry-run``): a sweep before it runs.

Thin: :func:`paradnn.plan.plan` computes everything; this module parses flags and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from paradnn import families, frameworks
from paradnn.cli.run import add_spec_subparsers, settings_from_args, workload_from_args
from paradnn.grids.runsettings import add_flags, from_flags
from paradnn.outputs import check_output, path_type, write_output
from paradnn.plan import Plan, plan
from paradnn.progress import config_name
from paradnn.units import duration, parse_int, si

_EXAMPLES = """examples:
  paradnn plan sweeps/fc.yaml                      the paper's FC grid: count, sizes, oom, time
  paradnn plan sweeps/small.yaml --calibrate       time a few configs first, then estimate
  paradnn plan fc --layers 4 --nodes 1024 --input 2000 --output 1000 --batch 256
  paradnn plan sweeps/cnn.yaml --csv cnn_plan.csv  every config's row as CSV
  paradnn sweep sweeps/small.yaml --dry-run        the same as plan, from the sweep command
"""


def format_plan(result: Plan, rows: int = 10) -> str:
    """The plan as a few readable lines, then the ``rows`` longest configs to run."""
    s, t = result.summary, result.table
    fams = ", ".join(f"{f} {n:,}" for f, n in s["by_family"].items())
    where = s["source"] + (f" ({s['description']})" if s["description"] else "")
    unknown = ", ".join(f"{f} {n:,}" for f, n in s["memory_unknown_by_family"].items())
    memory_note = ("the backend's memory analysis of each compiled program"
                   if s["memory_method"] == "compiled"
                   else "analytic estimate: weights + optimizer state + gradients + batch + "
                        "activations (docs/sweeps.md)"
                        + (f"; unknown for {s['memory_unknown']:,} config(s) without an activation "
                           f"or batch estimate ({unknown}): their known parts, a floor, decide oom"
                           if s["memory_unknown"] else ""))
    params_note = ("counted without building the models: closed forms and the zoo's table"
                   + (f"; {s['counts_unknown']:,} unknown (a zoo model at another input size "
                      "and no stored record of it)" if s["counts_unknown"] else ""))
    by_fw = s.get("by_framework") or {}
    fw_names = set(by_fw)
    lines = [
        f"plan of {where} on {s['platform']}",
        f"configs          {s['configs']:,} ({fams}); repeat {s['repeat']}",
        f"                 {s['stored']:,} already in the store (skipped on resume), "
        f"{s['to_run']:,} to measure, {s['oom']:,} predicted oom",
        f"parameters       {si(s['params_min'], '')} .. {si(s['params_max'], '')} per config "
        f"({params_note})",
        f"FLOPs per step   {si(s['flops_min'], 'FLOP')} .. {si(s['flops_max'], 'FLOP')} "
        "(analytic: matmuls and convolutions, forward + backward)",
        (f"memory           up to {si(s['memory_max_bytes'], 'B')} per device; {memory_note}"
         if s["memory_unknown"] < s["configs"] else
         f"memory           unknown: no activation or batch estimate for any config ({unknown}); "
         f"their known parts (weights + optimizer state + gradients), up to "
         f"{si(s['memory_floor_max_bytes'], 'B')} per device, decide oom"),
        f"memory limit     {si(s['memory_limit_bytes'], 'B')}: {s['memory_limit_source']}",
    ]
    if len(by_fw) > 1 or set(by_fw) - {frameworks.DEFAULT}:
        skipped = s.get("frameworks_not_started") or []
        # After the configs' two lines: the frameworks, and those the plan did not start.
        lines.insert(3, f"frameworks       {', '.join(f'{f} {n:,}' for f, n in by_fw.items())}"
                     + (f" ({', '.join(skipped)} not started to plan: the store holds no record "
                        "of it, so all its configs are to measure)" if len(skipped) == 1 else
                        f" ({', '.join(skipped)} not started to plan: the store holds no record "
                        "of them, so all their configs are to measure)" if skipped else ""))
    if s.get("best_stack"):
        lines.insert(3, "frameworks       best stack: the sweep's first step chooses one per family by a "
                        "short measured calibration, stored and reused (docs/frameworks.md); the "
                        f"figures below are those of {frameworks.DEFAULT}")
    cal = s["calibration"]
    if s["wall_s"] is None:
        lines.append(f"estimated time   unknown: {cal['source']}")
    else:
        lines.append(f"estimated time   {duration(s['wall_s'])} wall for the configs to measure "
                     f"(compile {duration(s['compile_s'])}, timed steps "
                     f"{duration(s['timing_s'])}, retries {duration(s['retry_s'])}, the rest "
                     "per-config overhead)")
        share = s["retry_unstable_share"]
        lines.append(f"retries          automatic retries of unstable configs: at most "
                     f"{duration(s['retry_bound_s'])} (retry_unstable_s); "
                     + (f"{share:.0%} of the store's ok rows on this device missed their precision "
                        "target at their time budget (a timing that ended at max_calls is not "
                        "retried)" if share is not None else "no store rows to say how many configs "
                        "will miss their precision target, so none is counted"))
        lines.append(f"calibration      {cal['source']}")
        ranges = "; ".join(f"{f} {si(lo, 'FLOP')} .. {si(hi, 'FLOP')}"
                           for f, (lo, hi) in cal["flops_range"].items())
        if s["extrapolated"]:
            lines.append(f"                 {s['extrapolated']:,} of {s['to_run']:,} configs to "
                         f"measure lie outside the calibrated FLOPs ({ranges}) by more than 2x: "
                         "their estimate is an extrapolation"
                         + ("" if cal["method"] == "calibration run" else
                            "; --calibrate times configs of this sweep instead"))
    lines.append(f"planned in       {s['plan_s']:.1f} s")
    oom = t[t["predicted"] == "oom"]
    if len(oom):
        lines.append(f"\npredicted oom ({len(oom):,}; memory estimate > limit), e.g.:")
        for _, r in oom.sort_values("memory_bytes").head(min(rows, 3)).iterrows():
            lines.append(f"  {config_name(r.to_dict(), fw_names)}: {si(r['memory_bytes'], 'B')}")
    todo = t[t["predicted"] == "run"]
    if len(todo) and rows > 0:
        order = "wall_s" if s["wall_s"] is not None else "model_flops_per_step"
        lines.append(f"\nlargest configs to measure (by {'estimated wall time' if order == 'wall_s' else 'FLOPs per step'}):")
        lines.append(f"  {'params':>9} {'FLOP/step':>11} {'memory':>9} {'wall':>8}  config")
        for _, r in todo.sort_values(order, ascending=False).head(rows).iterrows():
            lines.append(f"  {si(r['params'], ''):>9} {si(r['model_flops_per_step'], 'FLOP'):>11} "
                         f"{si(r['memory_bytes'], 'B'):>9} {duration(r['wall_s']):>8}  "
                         f"{config_name(r.to_dict(), fw_names)}")
    if s["oom"] and s["memory_limit_source"].startswith("host memory"):
        lines.append("\nnote: on a CPU the sweep predicts no oom by itself; run it with "
                     f"--memory-limit {si(s['memory_limit_bytes'], 'B').replace(' ', '')} to "
                     "record these as oom instead of running them")
    return "\n".join(lines)


def show_plan(target: Any, *, store: str | None, run: dict[str, Any] | None = None,
              settings: Any = None, compile: bool = False, calibrate: bool = False,
              csv: str | None = None, as_json: bool = False, rows: int = 10,
              force: bool = False) -> int:
    """Plan ``target`` (sweep file path or workloads) with the run settings ``run`` (by name,
    :data:`paradnn.grids.runsettings.RUN_SETTINGS`) and print it; the CLI handlers' body.
    ``csv`` goes through the output guard (:mod:`paradnn.outputs`): never the store or the sweep
    file, never a file paradnn did not write unless ``force``; checked before planning."""
    inputs = [p for p in (store, target if isinstance(target, str) else None) if p]
    if csv:
        check_output(csv, "plan --csv", inputs, force)
    result = plan(target, store=store, settings=settings, compile=compile, calibrate=calibrate,
                  **(run or {}))
    if csv:
        write_output(csv, lambda tmp: result.table.to_csv(tmp, index=False), "plan --csv", inputs,
                     force)
    if as_json:
        print(json.dumps(result.summary, default=str))
    else:
        print(format_plan(result, rows))
        if csv:
            print(f"\nper-config table: {csv} ({len(result.table):,} rows)")
    return 0


def _options(defaults: bool) -> argparse.ArgumentParser:
    """The plan flags; with ``defaults`` False they are absent unless given (a second pass
    over the flags that follow SWEEP_OR_SPEC must not reset those given before it)."""
    from paradnn.cli import Parser, typed

    d = (lambda v: v) if defaults else (lambda v: argparse.SUPPRESS)
    p = Parser(add_help=False, prog="paradnn plan")
    p.add_argument("--store", default=d("results.db"), type=path_type("input", "plan --store"),
                   help="results store whose records mark "
                   "configs as done and calibrate the time estimate (default: results.db; "
                   "a missing store means none)")
    # The run settings a plan reads (--repeat, --memory-limit, ...), declared once in
    # paradnn.grids.runsettings: the same flags as `paradnn sweep`'s.
    add_flags(p, plan=True, default=d(None), typed=typed)
    p.add_argument("--compile", action="store_true", default=d(False),
                   help="compile every config for XLA's memory analysis instead of the analytic "
                   "estimate (seconds per config)")
    p.add_argument("--calibrate", action="store_true", default=d(False),
                   help="time 2 configs per family first (in a temporary store, minutes) and "
                   "calibrate the estimate on them instead of the store's records")
    p.add_argument("--csv", default=d(None), metavar="FILE.csv",
                   type=path_type("output", "plan --csv", (".csv",)),
                   help="write every config's row (parameters, FLOPs, memory in B, predicted "
                   "status, seconds) to FILE.csv (never the store; a file paradnn did not write "
                   "is kept unless --force)")
    p.add_argument("--force", action="store_true", default=d(False),
                   help="replace an existing --csv file that paradnn did not write")
    p.add_argument("--rows", type=typed(parse_int, "rows", minimum=0, maximum=1_000_000),
                   default=d(10), metavar="N",
                   help="configs listed in the printout, a count from 0 (default: 10)")
    p.add_argument("--json", action="store_true", default=d(False),
                   help="print the summary as one JSON object")
    return p


def _cmd_plan(args: argparse.Namespace) -> int:
    rest = list(args.rest)
    if args.target in families.names():
        from paradnn.cli import Parser  # the package's parser class (cli/__init__ imports this module)

        spec_parser = Parser(prog="paradnn plan")
        add_spec_subparsers(spec_parser, _cmd_plan)
        spec_args, rest = spec_parser.parse_known_args([args.target, *rest])
        workloads = [workload_from_args(spec_args)]
        settings = settings_from_args(spec_args)
        if spec_args.memory_limit is not None:
            args.memory_limit = spec_args.memory_limit
        args.json = args.json or spec_args.json
        target: Any = workloads
    else:
        target, settings = args.target, None
    if rest:
        extra = _options(defaults=False).parse_args(rest)
        for name, value in vars(extra).items():
            setattr(args, name, value)
    return show_plan(target, store=args.store, run=from_flags(args), settings=settings, compile=args.compile,
                     calibrate=args.calibrate, csv=args.csv, as_json=args.json, rows=args.rows,
                     force=args.force)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan", parents=[_options(defaults=True)],
        help="count, size, memory and time of a sweep (or one config) without running it",
        description=textwrap.fill(
            "Plan a sweep without running it: the number of configs, parameters, analytic "
            "FLOPs per step and predicted memory of each, the configs predicted to run out of "
            "memory, and the estimated wall time (compile + timing), calibrated on this "
            "platform's records in the store or, with --calibrate, on a short calibration run. "
            "Nothing is measured (except by --calibrate, into a temporary store) and the "
            "store is not written.", 88),
        epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="SWEEP_OR_SPEC",
                   help="a sweep file (YAML, docs/sweeps.md), or a family fc|cnn|rnn|real "
                   "followed by its flags as for `paradnn run` (e.g. fc --layers 4 --nodes 1024 "
                   "--input 2000 --output 1000 --batch 256)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=_cmd_plan)


if __name__ == "__main__":  # pragma: no cover
    from paradnn.cli import main

    sys.exit(main())
