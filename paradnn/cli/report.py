"""``paradnn report``, ``paradnn plot`` and ``paradnn profile``: thin wrappers over
:mod:`paradnn.report`, :mod:`paradnn.analysis` / :mod:`paradnn.plots` and :mod:`paradnn.profile`.

    paradnn report results.db [more.db ...] -o report/
    paradnn plot heatmap results.db -o fc.png --where family=fc --x batch --y nodes   # --help: kinds
    paradnn plot speedup tpu.db gpu.db -o speedup.png        # A = first store, B = second
    paradnn profile -o ops/ fc --layers 4 --nodes 256 --input 2000 --output 1000 --batch 128
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from paradnn.errors import ParadnnError

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
            raise ParadnnError(f"{flag} {item!r}: allowed: COLUMN=VALUE")
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
    from paradnn.store import load

    return [load(p) for p in paths]


def _report(args: argparse.Namespace) -> int:
    from paradnn.report import write_report

    from paradnn.store import load

    df = load(args.stores)  # several stores: one frame, rows present in two kept once
    ops = None
    if args.ops:
        ops_path = Path(args.ops)
        if not ops_path.is_file():
            raise ParadnnError(f"--ops {ops_path}: no such file; allowed: ops.csv of `paradnn profile -o DIR`")
        ops = pd.read_csv(ops_path)
        meta = ops_path.with_suffix(".json")
        if meta.is_file():
            ops.attrs.update(json.loads(meta.read_text()))
        ops.attrs.update(_pairs(args.ops_attr, "--ops-attr"))
    path = write_report(df, args.output, ops=ops, title=args.title, store=args.stores)
    print(path)
    return 0


def _plot(args: argparse.Namespace) -> int:
    from paradnn import analysis as A
    from paradnn import plots as P

    frames = [_where(f, _pairs(args.where, "--where")) for f in _load(args.stores)]
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    kind = args.kind
    if kind == "heatmap":
        if not (args.x and args.y):
            raise ParadnnError("plot heatmap: --x and --y are required (two hyperparameters)")
        from paradnn.analysis._common import headline_utilization

        value = args.value or headline_utilization(df) or "examples_per_sec"
        fig = P.heatmap(A.heatmap(df, args.x, args.y, value, fixed=_pairs(args.fixed, "--fixed"),
                                  panels=True))
    elif kind == "sensitivity":
        if not args.features:
            raise ParadnnError("plot sensitivity: --features is required (comma-separated)")
        from paradnn.analysis._common import headline_utilization

        fig = P.sensitivity(A.sensitivity(
            df, args.target or headline_utilization(df) or "examples_per_sec", args.features.split(","),
            interactions=args.interactions, log2=args.log2, bootstrap=args.bootstrap, seed=args.seed))
    elif kind == "roofline":
        fig = P.roofline(A.roofline(df, args.peak_flops, args.peak_bytes_per_sec),
                         color_by=args.color_by or "dtype")
    elif kind == "speedup":
        if len(frames) == 2:
            sp = A.speedup(frames[0], frames[1])
            sp.attrs.update(a=args.stores[0], b=args.stores[1])
        elif args.a or args.b:
            sp = A.speedup(_where(df, _pairs(args.a, "--a"), "--a"), _where(df, _pairs(args.b, "--b"), "--b"))
        else:
            comps = A.comparisons(df)
            if not comps:
                raise ParadnnError("plot speedup: the store holds no two platforms, dtypes or "
                                   "software versions with common workloads; allowed: two "
                                   "stores, or --a COL=VAL --b COL=VAL")
            sp = A.speedup_of(comps[0])
        fig = P.speedup(sp, color_by=args.color_by or "batch")
    elif kind == "params":
        fig = P.params_range(A.params_range(df))
    elif kind == "utilization":
        from paradnn.analysis._common import headline_utilization, platform_label

        df = df.assign(platform=df.apply(platform_label, axis=1))
        value = headline_utilization(df)
        if value is None:
            raise ParadnnError("plot utilization: no run has model_flops_utilization or "
                               "flops_utilization")
        fig = P.utilization_comparison(A.family_ranges(df, value, by="platform"))
    else:  # saturation
        fig = P.saturation(A.saturation(df, threshold=args.threshold))
    out = Path(args.output)
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ParadnnError(f"plot -o {out}: allowed: a .png, .svg or .pdf file")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=args.dpi)
    print(out)
    return 0


def _profile(args: argparse.Namespace) -> int:
    from paradnn import analysis as A
    from paradnn.cli.run import workload_from_args
    from paradnn.profile import capture, with_peaks

    workload = workload_from_args(args)
    ops = capture(workload, steps=args.steps, warmup=args.warmup)
    if args.peak_flops and args.peak_bytes_per_sec:
        ops.attrs.update(peak_flops=args.peak_flops, peak_bytes_per_sec=args.peak_bytes_per_sec,
                         peak_source="given")
    else:
        with_peaks(ops, workload.dtype)
    orf = A.op_roofline(ops, ops.attrs["peak_flops"], ops.attrs["peak_bytes_per_sec"])
    top = A.top_ops(orf if len(orf) else ops, n=args.top)
    with pd.option_context("display.width", 160, "display.max_columns", 20,
                           "display.float_format", "{:.4g}".format):
        print(f"module {ops.attrs['module']} on {ops.attrs['device_kind']} ({ops.attrs['backend']}); "
              f"times per step (s), FLOP and B per step; peaks: {ops.attrs['peak_flops']:.4g} FLOP/s, "
              f"{ops.attrs['peak_bytes_per_sec']:.4g} B/s ({ops.attrs['peak_source']})")
        print(A.op_breakdown(ops).to_string(index=False))
        print(top.to_string(index=False))
    print(f"note: {ops.attrs['note']}")
    if args.out_dir:
        from paradnn import plots as P

        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        ops.to_csv(out / "ops.csv", index=False)
        # The attributes (device, peaks, the CPU-approximation note) travel next to the table.
        (out / "ops.json").write_text(json.dumps(ops.attrs, indent=1, default=str))
        if len(orf):
            P.op_roofline(orf).savefig(out / "op_roofline.png", dpi=100)
        P.op_breakdown(A.op_breakdown(ops)).savefig(out / "op_breakdown.png", dpi=100)
        print(out)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="HTML report of every analysis a store supports")
    p.add_argument("stores", nargs="+", metavar="STORE", help="results store(s) to read")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for index.html")
    p.add_argument("--title", default="paradnn report")
    p.add_argument("--ops", metavar="CSV", help="ops.csv of `paradnn profile -o DIR` (its ops.json "
                   "beside it gives the peaks and notes) for the op-level roofline")
    p.add_argument("--ops-attr", action="append", metavar="KEY=VALUE",
                   help="attributes of --ops, e.g. peak_flops=1e14 peak_bytes_per_sec=9e11")
    p.set_defaults(func=_report)

    p = subparsers.add_parser("plot", help="one figure of one analysis",
                              description="One figure of one analysis, written as PNG, SVG or PDF.",
                              epilog=_plot_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=list(PLOT_KINDS), help="the figure (see the list below)")
    p.add_argument("stores", nargs="+", metavar="STORE")
    p.add_argument("-o", "--output", required=True, metavar="FILE.png")
    p.add_argument("--where", action="append", metavar="COL=VALUE", help="keep rows where COL equals VALUE")
    p.add_argument("--x")
    p.add_argument("--y")
    p.add_argument("--value", help="metric of a heat map (default model_flops_utilization, "
                   "else flops_utilization)")
    p.add_argument("--fixed", action="append", metavar="COL=VALUE", help="heat map: fixed columns")
    p.add_argument("--target", help="sensitivity target metric (default model_flops_utilization, "
                   "else flops_utilization)")
    p.add_argument("--features", help="sensitivity features, comma-separated")
    p.add_argument("--interactions", action="store_true", help="sensitivity: pairwise terms")
    p.add_argument("--log2", action="store_true", help="sensitivity: regress on log2 features")
    p.add_argument("--bootstrap", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--color-by", help="roofline/speedup colour column (default: dtype for the "
                   "roofline, batch for speedup)")
    p.add_argument("--peak-flops", type=float, help="roofline peak FLOP/s (default: the records')")
    p.add_argument("--peak-bytes-per-sec", type=float, help="roofline peak B/s (default: the records')")
    p.add_argument("--a", action="append", metavar="COL=VALUE", help="speedup numerator rows")
    p.add_argument("--b", action="append", metavar="COL=VALUE", help="speedup baseline rows")
    p.add_argument("--threshold", type=float, default=0.9, help="saturation fraction of the best")
    p.add_argument("--dpi", type=int, default=200, help="resolution (default 200: twice the "
                   "1x size of 1100 px wide figures)")
    p.set_defaults(func=_plot)

    try:
        from paradnn.cli.run import add_spec_subparsers
    except ImportError:  # `paradnn run` not installed yet: no profile command
        return
    p = subparsers.add_parser("profile", help="per-operation FLOPs, bytes and time of one config")
    # dest differs from --output: the FC and CNN spec flags have an --output (classes).
    p.add_argument("-o", "--out-dir", dest="out_dir", metavar="DIR", help="write ops.csv and the figures here")
    p.add_argument("--steps", type=int, default=5, help="profiled steps")
    p.add_argument("--warmup", type=int, default=2, help="steps before profiling")
    p.add_argument("--top", type=int, default=15, help="operations in the table")
    p.add_argument("--peak-flops", type=float, help="device peak FLOP/s (default: spec table or probe)")
    p.add_argument("--peak-bytes-per-sec", type=float, help="device peak B/s")
    add_spec_subparsers(p, _profile, settings=False)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m paradnn report|plot|profile ...")
