"""``paradnn report``, ``paradnn plot`` and ``paradnn profile``: thin wrappers over
:mod:`paradnn.report`, :mod:`paradnn.analysis` / :mod:`paradnn.plots` and :mod:`paradnn.experiments.profile`.

    paradnn report results.db [more.db ...] -o report/
    paradnn plot heatmap results.db -o fc.png --where family=fc --x batch --y nodes   # --help: kinds
    paradnn plot speedup tpu.db gpu.db -o speedup.png        # A = first store, B = second
    paradnn profile -o ops/ fc --layers 4 --nodes 256 --input 2000 --output 1000 --batch 128
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from paradnn.cli import DEFAULT_STORE, typed
from paradnn.cli.run import check_backend, add_spec_subparsers, workload_from_args
from paradnn.errors import ParadnnError
from paradnn.outputs import FIGURE_SUFFIXES, check_output, path_type, write_output
from paradnn.store import load
from paradnn.units import parse_int, parse_number

# The report, the analyses, the figures and the profiler are imported by the commands that use
# them, not here: every `paradnn` command imports this module to register its subcommands, and
# importing the report pipeline (matplotlib, the analyses) added 2.5-3.1 s to each of them (3
# interleaved rounds on a 2-core host).

# kind -> (what it draws, an example command, the flags that apply). One place: the choices,
# the dispatch check and `paradnn plot --help` all read it.
PLOT_KINDS: dict[str, tuple[str, str, str]] = {
    "heatmap": ("a metric over two hyperparameters, one panel per value of the others and per "
                "dtype/platform (ParaDnn Fig 2a-c, 7)",
                "paradnn plot heatmap results.db -o fc.png --where family=fc --x batch --y nodes",
                "--x --y (required), --value, --fixed COL=VALUE (fewer panels)"),
    "sensitivity": ("standardized regression weights with bootstrap CIs (Fig 2d-f)",
                    "paradnn plot sensitivity results.db -o s.png --where family=fc "
                    "--features layers,nodes,batch --log2",
                    "--features (required), --target, --log2, --interactions, --bootstrap, --seed"),
    "roofline": ("achieved FLOP/s against arithmetic intensity, one roof per dtype (Fig 3a, 3c)",
                 "paradnn plot roofline results.db -o roof.png",
                 "--color-by (default dtype), --peak-flops, --peak-bytes-per-sec"),
    "speedup": ("speedup of A over B per workload against its size (Fig 8-10)",
                "paradnn plot speedup results.db -o bf16.png --a dtype=bfloat16 --b dtype=float32",
                "two stores (A, B), or --a COL=VALUE --b COL=VALUE; --color-by (default batch)"),
    "params": ("trainable parameters per family and real model (Fig 1)",
               "paradnn plot params results.db -o params.png", "none"),
    "utilization": ("utilization ranges per family and platform (Fig 11 bottom)",
                    "paradnn plot utilization results.db -o util.png", "none"),
    "saturation": ("throughput against batch relative to each model's best, saturation batch "
                   "marked (TBD benchmark suite)",
                   "paradnn plot saturation results.db -o sat.png --where family=fc",
                   "--threshold (default 0.9)"),
}


def _plot_epilog() -> str:
    lines = ["kinds (flags that apply; --where, -o and --dpi apply to all):"]
    for kind, (what, example, flags) in PLOT_KINDS.items():
        lines += [f"  {kind}: {what}", f"      flags: {flags}", f"      e.g. {example}"]
    return "\n".join(lines)


def _value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _pairs(items: list[str] | None, flag: str) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            shown = item if len(item) <= 80 else item[:77] + "..."
            raise ParadnnError(f"{flag} {shown!r}: allowed: COLUMN=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = _value(v.strip())
    return out


def _where(df: pd.DataFrame, conditions: dict, flag: str = "--where") -> pd.DataFrame:
    for k, v in conditions.items():
        if k not in df.columns:
            raise ParadnnError(f"{flag} {k}={v!r}: no column {k!r}; allowed: {sorted(df.columns)}")
        df = df[df[k] == v]
        if df.empty:
            raise ParadnnError(f"{flag} {k}={v!r}: no rows match")
    return df


def _load(paths: list[str]) -> list[pd.DataFrame]:
    return [load(p) for p in paths]


#: Columns an ops CSV (``paradnn profile -o DIR``'s ops.csv) must have, all numeric but
#: ``category``; and the attributes (its ops.json, or --ops-attr) that must be positive numbers.
OPS_COLUMNS = ("category", "time_s", "time_fraction", "flops", "bytes", "flops_per_sec",
               "arithmetic_intensity")
OPS_NUMERIC_ATTRS = ("peak_flops", "peak_bytes_per_sec")


def read_ops(path: Path, attr_items: list[str] | None) -> pd.DataFrame:
    """The per-operation profile of ``report --ops``: ``path`` (an ops.csv of ``paradnn
    profile``), its ops.json beside it and the --ops-attr pairs, checked: ParadnnError naming
    the file or the pair and what is allowed for a file that is not such a CSV (binary,
    malformed, columns missing or not numeric), a damaged ops.json, or a peak that is not a
    positive finite number."""
    allowed = "ops.csv of `paradnn profile -o DIR`"
    if not path.is_file():
        raise ParadnnError(f"--ops {path}: no such file; allowed: {allowed}")
    try:
        ops = pd.read_csv(path)
    except (UnicodeDecodeError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        reason = " ".join(str(exc).split())[:200]
        raise ParadnnError(f"--ops {path}: not a CSV file ({type(exc).__name__}: {reason}); allowed: {allowed}") from None
    missing = [c for c in OPS_COLUMNS if c not in ops.columns]
    if missing:
        raise ParadnnError(f"--ops {path}: column {missing[0]!r} missing ({len(ops.columns)} columns "
                           f"found); allowed: {allowed}, with columns {', '.join(OPS_COLUMNS)}")
    for column in OPS_COLUMNS[1:]:
        values = pd.to_numeric(ops[column], errors="coerce")
        if values.isna().any() and not ops[column].isna().all():
            raise ParadnnError(f"--ops {path}: column {column!r} holds values that are not numbers; "
                               f"allowed: {allowed}")
        ops[column] = values
    meta = path.with_suffix(".json")
    if meta.is_file():
        try:
            attrs = json.loads(meta.read_text())
        except (UnicodeDecodeError, ValueError) as exc:
            raise ParadnnError(f"--ops {path}: its {meta.name} is not JSON ({type(exc).__name__}); "
                               "allowed: the ops.json `paradnn profile` writes, or none") from None
        if not isinstance(attrs, dict):
            raise ParadnnError(f"--ops {path}: its {meta.name} is not a JSON object; allowed: the "
                               "ops.json `paradnn profile` writes, or none")
        ops.attrs.update(attrs)
    ops.attrs.update(_pairs(attr_items, "--ops-attr"))
    for name in OPS_NUMERIC_ATTRS:
        if ops.attrs.get(name) is not None:
            ops.attrs[name] = parse_number(ops.attrs[name], f"--ops-attr {name}",
                                           unit="FLOP/s" if name == "peak_flops" else "B/s")
    return ops


def _report(args: argparse.Namespace) -> int:
    out_dir = Path(args.output)  # checked before the (possibly long) load and analyses
    if out_dir.exists() and not out_dir.is_dir():
        raise ParadnnError(f"report -o {out_dir}: exists and is not a directory; allowed: a folder")
    check_output(out_dir / "index.html", "report -o", args.stores, args.force)
    df = load(args.stores)  # several stores: one frame, rows present in two kept once
    ops = read_ops(Path(args.ops), args.ops_attr) if args.ops else None
    path = _write_report_guarded(df, Path(args.output), args, ops)
    print(path)
    return 0


def _write_report_guarded(df: pd.DataFrame, out_dir: Path, args: argparse.Namespace, ops) -> Path:
    """write_report into a temporary folder beside ``out_dir``, then move index.html and the
    recipes' sweep files (``recipes/``) through the output guard: never over an input, never
    over a file paradnn did not write."""
    from paradnn.report import write_report  # see the note on imports above
    from paradnn.report.html import RECIPES_DIR

    page = out_dir / "index.html"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".paradnn-report-", dir=out_dir))
    except OSError as exc:
        raise ParadnnError(f"report -o {out_dir}: cannot write there: {exc.strerror or exc}") from None
    try:
        built = write_report(df, staging, ops=ops, title=args.title, store=args.stores, named_dir=out_dir)
        recipes = sorted((staging / RECIPES_DIR).glob("*.yaml"))
        for recipe in recipes:  # before the page: the page names them
            write_output(out_dir / RECIPES_DIR / recipe.name, lambda tmp, src=recipe: os.replace(src, tmp),
                         "report -o", args.stores, args.force)
        return write_output(page, lambda tmp: os.replace(built, tmp), "report -o", args.stores,
                            args.force)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _plot(args: argparse.Namespace) -> int:
    from paradnn import analysis as A  # see the note on imports above
    from paradnn import plots as P

    out = Path(args.output)  # its suffix was checked while parsing (FIGURE_SUFFIXES)
    check_output(out, "plot -o", args.stores, args.force)  # before any analysis runs
    frames = [_where(f, _pairs(args.where, "--where")) for f in _load(args.stores)]
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    kind = args.kind
    try:
        fig, left_out = _figure(A, P, args, kind, frames, df)
    except ParadnnError as exc:
        # An analysis that found too little to draw says so; where it had left unstable runs
        # out, that is likely why, and the flag that draws them is named.
        unstable = _unstable_runs(df) if kind in UNSTABLE_KINDS and not args.include_unstable else 0
        if not unstable or "--include-unstable" in str(exc):  # none, or the message says it
            raise
        raise ParadnnError(f"{exc}: {unstable} ok run(s) of the store(s) missed their precision "
                           "target (stable false) and were left out; --include-unstable draws "
                           "them (marked), or measure them again (`paradnn status` prints the "
                           "recipe)") from None
    if left_out:
        print(f"paradnn: note: plot {kind}: {left_out} run(s) that missed their precision target "
              "(stable false) left out; --include-unstable draws them (marked)", file=sys.stderr)
    out = Path(args.output)
    write_output(out, lambda tmp: fig.savefig(tmp, dpi=args.dpi, format=out.suffix[1:].lower()),
                 "plot -o", args.stores, args.force)
    print(out)
    return 0


#: The plot kinds that leave runs whose timing missed its precision target out unless
#: --include-unstable (the others draw them, marked).
UNSTABLE_KINDS = ("speedup", "sensitivity", "utilization")


def _unstable_runs(df: pd.DataFrame) -> int:
    """The ok rows of ``df`` whose timing missed its precision target (``stable`` false)."""
    from paradnn.analysis.columns import ok_rows, unstable_mask

    return int(unstable_mask(ok_rows(df)).sum())


def _figure(A, P, args: argparse.Namespace, kind: str, frames: list[pd.DataFrame],
            df: pd.DataFrame) -> tuple[Any, int]:
    """The figure of ``plot KIND`` and the runs its analysis left out as unstable (0 for the
    kinds that draw them marked). ParadnnError when there is nothing to draw."""
    include = args.include_unstable
    if kind == "heatmap":
        if not (args.x and args.y):
            raise ParadnnError("plot heatmap: --x and --y are required (two hyperparameters)")
        value = args.value or A.headline_utilization(df) or "examples_per_sec"
        return P.heatmap(A.heatmap(df, args.x, args.y, value, fixed=_pairs(args.fixed, "--fixed"),
                                   panels=True)), 0
    if kind == "sensitivity":
        if not args.features:
            raise ParadnnError("plot sensitivity: --features is required (comma-separated)")
        s = A.sensitivity(
            df, args.target or A.headline_utilization(df) or "examples_per_sec", args.features.split(","),
            interactions=args.interactions, log2=args.log2, bootstrap=args.bootstrap, seed=args.seed,
            include_unstable=include)
        return P.sensitivity(s), int(s.attrs.get("unstable_excluded", 0))
    if kind == "roofline":
        return P.roofline(A.roofline(df, args.peak_flops, args.peak_bytes_per_sec),
                          color_by=args.color_by or "dtype"), 0
    if kind == "speedup":
        if len(frames) == 2:
            sp = A.speedup(frames[0], frames[1], include_unstable=include)
            sp.attrs.update(a=args.stores[0], b=args.stores[1])
        elif args.a or args.b:
            sp = A.speedup(_where(df, _pairs(args.a, "--a"), "--a"),
                           _where(df, _pairs(args.b, "--b"), "--b"), include_unstable=include)
        else:
            comps = A.comparisons(df)
            if not comps:
                raise ParadnnError("plot speedup: the store holds no two platforms, dtypes or "
                                   "software versions with common workloads; allowed: two "
                                   "stores, or --a COL=VAL --b COL=VAL")
            sp = A.speedup_of(comps[0], include_unstable=include)
        left_out = int(sp.attrs.get("unstable_excluded", 0))
        if not len(sp) and left_out:
            raise ParadnnError(f"plot speedup: no workload measured on both sides with a timing "
                               f"that met its precision target: {left_out} run(s) that missed it "
                               "(stable false) were left out; --include-unstable draws them "
                               "(marked), or measure them again (`paradnn status` prints the recipe)")
        return P.speedup(sp, color_by=args.color_by or "batch"), left_out
    if kind == "params":
        return P.params_range(A.params_range(df)), 0
    if kind == "utilization":
        df = df.assign(platform=df.apply(A.platform_label, axis=1))
        value = A.headline_utilization(df)
        if value is None:
            raise ParadnnError("plot utilization: no run has model_flops_utilization or "
                               "flops_utilization")
        ranges = A.family_ranges(df, value, by="platform", include_unstable=include)
        return P.utilization_comparison(ranges), int(ranges.attrs.get("unstable_excluded", 0))
    # saturation
    return P.saturation(A.saturation(df, threshold=args.threshold)), 0


def _profile(args: argparse.Namespace) -> int:
    from paradnn import analysis as A  # see the note on imports above
    from paradnn.experiments.profile import capture, with_peaks

    names = ("ops.csv", "ops.json", "op_roofline.png", "op_breakdown.png")
    if args.out_dir:
        out = Path(args.out_dir)
        if out.exists() and not out.is_dir():
            raise ParadnnError(f"profile -o {out}: exists and is not a directory; allowed: a folder")
        for name in names:  # before the (slow) capture
            check_output(out / name, "profile -o", (), args.force)
    check_backend()
    workload = workload_from_args(args)
    ops = capture(workload, steps=args.steps, warmup=args.warmup,
                  memory_limit_bytes=args.memory_limit)
    if args.peak_flops and args.peak_bytes_per_sec:
        ops.attrs.update(peak_flops=args.peak_flops, peak_bytes_per_sec=args.peak_bytes_per_sec,
                         peak_source="given")
    else:
        with_peaks(ops, workload.dtype)
    peak_flops, peak_bw = ops.attrs["peak_flops"], ops.attrs["peak_bytes_per_sec"]
    # Without a usable peak (only contended probes of this host on record) there is no roof to
    # classify the operations against: the table and breakdown still stand, the roofline not.
    known = bool(peak_flops and peak_bw)
    orf = A.op_roofline(ops, peak_flops, peak_bw) if known else ops.iloc[0:0]
    top = A.top_ops(orf if len(orf) else ops, n=args.top)
    # Physics check of every operation that does FLOPs, however short, by the part of the roof
    # it passes (A.above_roof): above the compute peak is impossible; above the memory slope
    # only, XLA's byte count is more than the operation moved.
    above = A.above_roof(ops, peak_flops, peak_bw) if known else {"compute": [], "memory": []}
    ops.attrs.update(above_roof_ops=above["compute"] + above["memory"], above_compute_peak_ops=above["compute"],
                     above_memory_roof_ops=above["memory"])
    with pd.option_context("display.width", 160, "display.max_columns", 20,
                           "display.float_format", "{:.4g}".format):
        peaks = (f"{peak_flops:.4g} FLOP/s, {peak_bw:.4g} B/s ({ops.attrs['peak_source']})" if known else
                 f"unknown, so no op roofline ({ops.attrs.get('peak_method') or ops.attrs['peak_source']})")
        print(f"module {ops.attrs['module']} on {ops.attrs['device_kind']} ({ops.attrs['device_platform']}); "
              f"times per step (s), FLOP and B per step; peaks: {peaks}")
        print(A.op_breakdown(ops).to_string(index=False))
        print(top.to_string(index=False))
    print(f"note: {ops.attrs['note']}")
    from paradnn.report.rows import plural

    for part, names in above.items():
        if not names:
            continue
        if ops.attrs["approximate"]:
            why = "their times are approximate on CPU (operations run asynchronously)"
        elif part == "compute":
            why = "above the compute peak, impossible: their FLOP count or time is wrong"
        else:
            why = ("above the memory slope only: their bytes (XLA's bytes accessed, every operand and output "
                   "at full size) are more than they moved through device memory (an in-place update, an "
                   "operand still in the on-chip cache); an upper bound, not a physics error")
        print(f"warning: {plural(len(names), 'operation')} above the roof ({ops.attrs['peak_source']} peak), "
              f"{why}: {', '.join(names[:8])}" + (" ..." if len(names) > 8 else ""))
    if args.out_dir:
        from paradnn import plots as P  # see the note on imports above

        def put(name: str, write) -> None:
            write_output(out / name, write, "profile -o", (), args.force)

        put("ops.csv", lambda tmp: ops.to_csv(tmp, index=False))
        # The attributes (device, peaks, the CPU-approximation note) travel next to the table.
        put("ops.json", lambda tmp: tmp.write_text(json.dumps(ops.attrs, indent=1, default=str)))
        if len(orf):
            put("op_roofline.png", lambda tmp: P.op_roofline(orf).savefig(tmp, dpi=100, format="png"))
        put("op_breakdown.png",
            lambda tmp: P.op_breakdown(A.op_breakdown(ops)).savefig(tmp, dpi=100, format="png"))
        print(out)
    return 0


def register(subparsers) -> None:
    force_help = "replace an existing output file that paradnn did not write"
    p = subparsers.add_parser("report", help="HTML report of every analysis a store supports")
    p.add_argument("stores", nargs="*", metavar="STORE", default=[DEFAULT_STORE],
                   type=path_type("input", "report STORE"),
                   help="results store(s) to read (default: %(default)s)")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   type=path_type("folder", "report -o"),
                   help="folder for index.html (an index.html paradnn did not write is kept "
                   "unless --force)")
    p.add_argument("--force", action="store_true", help=force_help)
    p.add_argument("--title", default="paradnn report", help="page title")
    p.add_argument("--ops", metavar="CSV", type=path_type("input", "report --ops"), help="ops.csv of `paradnn profile -o DIR` (its ops.json "
                   "beside it gives the peaks and notes) for the op-level roofline")
    p.add_argument("--ops-attr", action="append", metavar="KEY=VALUE",
                   help="attributes of --ops, e.g. peak_flops=1e14 peak_bytes_per_sec=9e11")
    p.set_defaults(func=_report)

    p = subparsers.add_parser("plot", help="one figure of one analysis",
                              description="One figure of one analysis, written as PNG, SVG or PDF.",
                              epilog=_plot_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=list(PLOT_KINDS), help="the figure (see the list below)")
    p.add_argument("stores", nargs="*", metavar="STORE", default=[DEFAULT_STORE],
                   type=path_type("input", "plot STORE"),
                   help="results store(s) to read (default: %(default)s)")
    p.add_argument("-o", "--output", required=True, metavar="FILE.png",
                   type=path_type("output", "plot -o", FIGURE_SUFFIXES),
                   help="a .png, .svg or .pdf file (never a store)")
    p.add_argument("--force", action="store_true", help=force_help)
    p.add_argument("--where", action="append", metavar="COL=VALUE", help="keep rows where COL equals VALUE")
    p.add_argument("--x", help="heat map: the hyperparameter (column) along x")
    p.add_argument("--y", help="heat map: the hyperparameter (column) along y")
    p.add_argument("--value", help="metric of a heat map (default model_flops_utilization, "
                   "else flops_utilization)")
    p.add_argument("--fixed", action="append", metavar="COL=VALUE", help="heat map: fixed columns")
    p.add_argument("--target", help="sensitivity target metric (default model_flops_utilization, "
                   "else flops_utilization)")
    p.add_argument("--features", help="sensitivity features, comma-separated")
    p.add_argument("--interactions", action="store_true", help="sensitivity: pairwise terms")
    p.add_argument("--log2", action="store_true", help="sensitivity: regress on log2 features")
    p.add_argument("--bootstrap", type=typed(parse_int, "bootstrap", minimum=0, maximum=100_000),
                   default=200, metavar="N", help="sensitivity: bootstrap resamples, a count")
    p.add_argument("--seed", type=typed(parse_int, "seed", minimum=0, maximum=2**32 - 1), default=0,
                   metavar="N", help="sensitivity: bootstrap random seed")
    p.add_argument("--color-by", help="roofline/speedup colour column (default: dtype for the "
                   "roofline, batch for speedup)")
    p.add_argument("--peak-flops", type=typed(parse_number, "peak-flops", unit="FLOP/s"),
                   metavar="FLOP/S", help="roofline peak FLOP/s (default: the records')")
    p.add_argument("--peak-bytes-per-sec", type=typed(parse_number, "peak-bytes-per-sec", unit="B/s"),
                   metavar="B/S", help="roofline peak B/s (default: the records')")
    p.add_argument("--a", action="append", metavar="COL=VALUE", help="speedup numerator rows")
    p.add_argument("--b", action="append", metavar="COL=VALUE", help="speedup baseline rows")
    p.add_argument("--threshold", type=typed(parse_number, "threshold", maximum=1.0), default=0.9,
                   help="saturation: fraction of the best throughput, in (0, 1]")
    p.add_argument("--dpi", type=typed(parse_int, "dpi", maximum=2400), default=200,
                   help="resolution of raster figures in dots per inch (default 200: twice the "
                   "1x size of 1100 px wide figures)")
    p.add_argument("--include-unstable", action="store_true",
                   help="speedup, sensitivity, utilization: also use the runs whose timing "
                   "missed its precision target (stable false), drawn marked; without it they "
                   "are left out and the command says how many (heatmap, roofline and "
                   "saturation always draw them, marked)")
    p.set_defaults(func=_plot)

    p = subparsers.add_parser("profile", help="per-operation FLOPs, bytes and time of one config")
    # dest differs from --output: the FC and CNN spec flags have an --output (classes).
    p.add_argument("-o", "--out-dir", dest="out_dir", metavar="DIR",
                   type=path_type("folder", "profile -o"),
                   help="write ops.csv, ops.json and the figures here (files paradnn did not "
                   "write are kept unless --force)")
    p.add_argument("--force", action="store_true", help=force_help)
    p.add_argument("--steps", type=typed(parse_int, "steps", maximum=10_000), default=5,
                   help="profiled training steps, a count")
    p.add_argument("--warmup", type=typed(parse_int, "warmup", minimum=0, maximum=10_000), default=2,
                   help="training steps before profiling, a count")
    p.add_argument("--top", type=typed(parse_int, "top", maximum=100_000), default=15,
                   help="operations in the table, a count")
    p.add_argument("--peak-flops", type=typed(parse_number, "peak-flops", unit="FLOP/s"),
                   help="device peak FLOP/s (default: spec table or probe)")
    p.add_argument("--peak-bytes-per-sec", type=typed(parse_number, "peak-bytes-per-sec", unit="B/s"),
                   help="device peak B/s (default: spec table or probe)")
    add_spec_subparsers(p, _profile, settings=False)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m paradnn report|plot|profile ...")
