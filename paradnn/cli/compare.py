"""``paradnn compare``: regressions between two stores (or two selections of one), for people and
CI; the change points of one store's history (docs/compare.md).

Exit status: 0 no significant regression beyond ``--threshold`` in any config; 1 a regression; 2
a usage error (any ParadnnError, as every command); 3 inconclusive: no regression found, but in
some config one of the threshold's size could not have been detected (``--allow-inconclusive``
turns 3 into 0).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from paradnn.errors import ParadnnError
from paradnn.outputs import FIGURE_SUFFIXES, check_output, path_type, write_output


def _stores(text: str) -> list[str]:
    """A side's stores: one path, or several joined by commas (their rows pooled)."""
    return [p for p in (t.strip() for t in text.split(",")) if p]


def _emit(path: str, content: str, flag: str, inputs: list[str], force: bool) -> None:
    """``content`` to stdout (``-``) or to ``path`` through the output guard."""
    if path == "-":
        sys.stdout.write(content if content.endswith("\n") else content + "\n")
        return
    write_output(Path(path), lambda tmp: Path(tmp).write_text(content, encoding="utf-8"), flag,
                 inputs, force)


def _compare(args: argparse.Namespace) -> int:
    import paradnn.compare as C

    inputs = _stores(args.base) + (_stores(args.new) if args.new else [])
    for flag, path in (("--json", args.json), ("--markdown", args.markdown), ("--plot", args.plot)):
        if path and path != "-":  # before the stores are read and compared
            check_output(path, f"compare {flag}", inputs, args.force)
    if args.history or (args.new is None and not args.new_where):
        if args.base_where or args.plot:
            raise ParadnnError("compare --history: --base-where and --plot apply to two sides; "
                               "allowed for a history: --where COL=VALUE, --axis, --json, --markdown")
        h = C.history(_stores(args.base), where=args.where, axes=args.axis or C.HISTORY_AXES,
                      threshold=args.threshold, alpha=args.alpha)
        quiet = args.json == "-" or args.markdown == "-"
        if args.json:
            _emit(args.json, json.dumps(C.history_json(h, args.allow_inconclusive), indent=1),
                  "compare --json", inputs, args.force)
        if args.markdown:
            _emit(args.markdown, C.history_markdown(h), "compare --markdown", inputs, args.force)
        if not quiet:
            print(C.history_text(h))
        return h.exit_code(args.allow_inconclusive)
    if args.where:
        raise ParadnnError("compare: --where selects rows of a history; allowed with two sides: "
                           "--base-where and --new-where")
    result = C.compare(_stores(args.base), _stores(args.new) if args.new else None,
                       base_where=args.base_where, new_where=args.new_where, axis=args.axis,
                       threshold=args.threshold, alpha=args.alpha)
    if args.plot:
        from paradnn.plots.compare import compare_heatmap

        fig = compare_heatmap(result, x=args.x, y=args.y)
        out = Path(args.plot)  # its suffix was checked while parsing (FIGURE_SUFFIXES)
        write_output(out, lambda tmp: fig.savefig(tmp, dpi=args.dpi, format=out.suffix[1:].lower()),
                     "compare --plot", inputs, args.force)
    quiet = args.json == "-" or args.markdown == "-"
    if args.json:
        _emit(args.json, json.dumps(C.to_json(result, args.allow_inconclusive), indent=1), "compare --json",
              inputs, args.force)
    if args.markdown:
        _emit(args.markdown, C.markdown(result, rows=args.rows or 30), "compare --markdown", inputs,
              args.force)
    if not quiet:
        print(C.text(result, rows=args.rows))
        if args.plot:
            print(f"heat map: {args.plot}")
    return result.exit_code(args.allow_inconclusive)


def register(sub: argparse._SubParsersAction) -> None:
    from paradnn.analysis.compare import AXES, DEFAULT_ALPHA, DEFAULT_THRESHOLD
    from paradnn.cli import typed
    from paradnn.units import parse_int, parse_number

    p = sub.add_parser(
        "compare", help="regressions between two stores, config by config, and where they live "
        "(CI exit codes); or the change points of one store's history",
        description="Compare NEW against BASE config by config: the ratio of step times with a "
        "confidence interval, a Mann-Whitney test on the per-call times, Benjamini-Hochberg over "
        "the configs and each config's own noise floor; a sentence and a heat map say where in "
        "the hyperparameters the change lives. With one store (and no --new-where): the change "
        "points of each config over the store's revisions. Exit status: 0 no significant "
        "regression beyond --threshold, 1 a regression, 2 a usage error, 3 inconclusive (no "
        "regression found, but some config could not have shown one: too few calls or too much "
        "noise). Method and measurements: docs/compare.md.")
    p.add_argument("base", metavar="BASE", help="store(s) of the baseline, comma-separated to "
                   "pool several; alone: the store whose history is searched")
    p.add_argument("new", metavar="NEW", nargs="?", default=None,
                   help="store(s) of the new measurements, comma-separated (default: BASE itself, "
                   "with --new-where)")
    p.add_argument("--base-where", action="append", metavar="COL=VALUE",
                   help="select BASE rows, e.g. dtype=float32 (repeatable)")
    p.add_argument("--new-where", action="append", metavar="COL=VALUE",
                   help="select NEW rows, e.g. dtype=bfloat16 (repeatable)")
    p.add_argument("--where", action="append", metavar="COL=VALUE",
                   help="select the rows of a history (repeatable)")
    p.add_argument("--axis", metavar="AXIS[,AXIS]",
                   help="what differs between BASE and NEW: " + ", ".join(AXES) + " (default: "
                   "the one axis that differs, none for a repeat; refused when others differ "
                   "too); for --history the axes that make a version (default: revision,software)")
    p.add_argument("--threshold", type=typed(parse_number, "threshold", minimum=1.0,
                                             maximum=1000.0, exclusive_minimum=True),
                   default=DEFAULT_THRESHOLD, metavar="X",
                   help="smallest slowdown called a regression, NEW/BASE step time in x "
                   "(default: %(default)s, asv's factor)")
    p.add_argument("--alpha", type=typed(parse_number, "alpha", maximum=0.5,
                                         exclusive_minimum=True),
                   default=DEFAULT_ALPHA, metavar="Q",
                   help="false-discovery rate of the Benjamini-Hochberg correction, a fraction "
                   "(default: %(default)s)")
    p.add_argument("--allow-inconclusive", action="store_true",
                   help="exit 0 instead of 3 when no config regressed but some are inconclusive "
                   "(a job that reports rather than gates)")
    p.add_argument("--strict", action="store_true",
                   help="exit 3 when a config is inconclusive and none regressed: the default "
                   "now; accepted for scripts written before it was")
    p.add_argument("--history", action="store_true",
                   help="change points over the versions of the store(s) BASE")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   type=path_type("output", "compare --json", (".json",), stdout=True),
                   help="write the result as JSON to FILE (no FILE or -: to stdout instead of "
                   "the table)")
    p.add_argument("--markdown", metavar="FILE",
                   type=path_type("output", "compare --markdown", (".md", ".markdown", ".txt"),
                                  stdout=True),
                   help="write a Markdown summary a CI job can post to FILE (-: stdout)")
    p.add_argument("--plot", metavar="FILE.png",
                   type=path_type("output", "compare --plot", FIGURE_SUFFIXES),
                   help="heat map of the ratios over two hyperparameters, non-significant cells "
                   "hatched")
    p.add_argument("--x", help="heat map x column (default: the tree's or the most varied "
                   "hyperparameter)")
    p.add_argument("--y", help="heat map y column (default: batch, or the next hyperparameter)")
    p.add_argument("--dpi", type=typed(parse_int, "dpi", maximum=1200), default=120,
                   help="heat map resolution, dots per inch")
    p.add_argument("--rows", type=typed(parse_int, "rows", maximum=1_000_000), default=None,
                   metavar="N", help="configs listed in the table (default: all; Markdown: 30)")
    p.add_argument("--force", action="store_true",
                   help="replace output files that paradnn did not write")
    p.set_defaults(func=_compare)
