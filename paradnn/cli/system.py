"""`paradnn ops`, `paradnn collectives`, `paradnn scaling`: the system experiments.

Thin commands over :mod:`paradnn.experiments.ops`, :mod:`paradnn.experiments.collectives` and :mod:`paradnn.experiments.scaling`:
parse, call the library, print a table with units (or ``--json``), ``--store`` to keep rows.
``--simulate-devices`` makes a CPU host show N devices (the framework's ``simulate_host_devices``:
JAX's ``--xla_force_host_platform_device_count``, set before JAX starts its backend); every row
measured so says ``simulated_devices`` and such timings are not a multi-device measurement.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from paradnn import frameworks
from paradnn.errors import SpecError
from paradnn.outputs import path_type
from paradnn.store import check_store
from paradnn.units import parse_int, si

SIMULATED_NOTE = ("paradnn: note: devices are simulated on one CPU host (--xla_force_host_platform_"
                  "device_count): all share the same cores and memory; these timings are NOT a "
                  "multi-device measurement")


def parse_int_list(text: str, parameter: str, minimum: int = 1, maximum: int = 65_536) -> list[int]:
    """``"1,2,4,8"`` -> [1, 2, 4, 8] (each an integer in range, ascending, no repeats)."""
    parts = [p for p in str(text).split(",") if p.strip()]
    if not parts:
        raise SpecError(parameter, text, f"comma-separated integers from {minimum} to {maximum}")
    return sorted({parse_int(p.strip(), parameter, minimum, maximum) for p in parts})


def _need_devices(count: int, simulate: bool, framework: str = frameworks.DEFAULT) -> bool:
    """Start ``framework``'s backend (simulating ``count`` CPU devices if asked) and check it has
    ``count`` devices; returns whether the devices are simulated."""
    from paradnn.experiments.collectives import MAX_SIMULATED_DEVICES

    if simulate and count > MAX_SIMULATED_DEVICES:
        raise SpecError("devices", count, f"at most {MAX_SIMULATED_DEVICES} simulated devices on one "
                        "CPU host (each is a thread sharing its cores and memory)")
    if simulate:
        frameworks.capability(framework, "simulate_host_devices", "simulate devices on a CPU host")(count)
    from paradnn.cli.run import check_backend
    from paradnn.experiments.collectives import simulated_devices

    platform, _ = check_backend(framework)
    if platform["device_count"] < count:
        hint = "" if simulate or platform["device_platform"] != "cpu" else " (add --simulate-devices on a CPU host)"
        raise SpecError("devices", count, f"at most {platform['device_count']} on backend "
                        f"{platform['device_platform']}{hint}")
    return simulated_devices(framework)


def _platform_kind(framework: str = frameworks.DEFAULT) -> str:
    """``"cpu"`` where ``framework`` runs on the host's CPU (devices simulated or one), else
    ``"accelerator"``: the key of the system experiments' platform-aware defaults."""
    from paradnn.runner import context

    return "cpu" if context(framework)[0]["device_platform"] == "cpu" else "accelerator"


def _platform_settings(args: argparse.Namespace, defaults: dict[str, Any], command: str, kind: str,
                       used: list[str] | None = None):
    """The MeasureSettings of the flags given, with ``defaults`` (MeasureSettings fields) for
    the flags not given; says on stderr which defaults were used (with ``used``, other
    defaults already chosen), so no number in the output comes from an unstated setting."""
    from paradnn.cli.run import settings_from_args

    chosen = {k: v for k, v in defaults.items() if getattr(args, k, None) is None}
    used = [*(used or []), *(f"--{k.replace('_', '-')} {v}" for k, v in chosen.items())]
    if used:
        print(f"paradnn: {command}: defaults for {'a CPU host' if kind == 'cpu' else 'accelerators'}: "
              f"{', '.join(used)} (give a flag to override)", file=sys.stderr)
    return settings_from_args(args).replace(**chosen)


def _add_settings(p: argparse.ArgumentParser) -> None:
    from paradnn.cli.run import add_settings_flags

    add_settings_flags(p)


def _add_common(p: argparse.ArgumentParser) -> None:
    # Checked while parsing (paradnn.store.check_store), so a damaged or foreign store is one
    # line before the measurement, not after it.
    p.add_argument("--store", default=None, metavar="PATH",
                   type=path_type("store", f"{p.prog.split()[-1]} --store", then=check_store), help="SQLite store to add the rows to (default: none; the rows are printed, not stored)")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")


def save_records(records: list, path: str | None) -> None:
    """Adds ``records`` to the store at ``path`` (nothing when ``path`` is None)."""
    if path:
        from paradnn.store import Store

        with Store(path) as store:
            for rec in records:
                store.add(rec)


def print_table(rows: list[dict[str, Any]], columns: list[tuple[str, str, Callable[[Any], str]]]) -> None:
    """Columns: (header with unit, row key, format)."""
    cells = [[h for h, _, _ in columns]] + [[fmt(r.get(k)) if r.get(k) is not None else "n/a"
                                             for _, k, fmt in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def sig_digits(digits: int = 3) -> Callable[[Any], str]:
    """A table cell format: the number to ``digits`` significant digits."""
    return lambda v: f"{v:.{digits}g}"


def percent(v: Any) -> str:
    """A table cell format: a fraction as a percentage with one decimal."""
    return f"{v:.1%}"


# --------------------------------------------------------------------------------------------- ops

def _cmd_ops(args: argparse.Namespace) -> int:
    from paradnn.experiments import ops
    from paradnn.cli.run import settings_from_args

    shapes = [*args.matmul, *args.conv2d]
    if args.paper or not shapes:
        shapes = [*ops.PAPER_SHAPES, *shapes]
    settings = settings_from_args(args)
    dtypes = args.dtype or ["float32"]
    if args.threads:
        from paradnn.cli.run import check_backend

        check_backend()
        rows = ops.thread_scan(shapes, args.threads, dtypes, settings)
        if args.store:
            from paradnn.store import Store

            with Store(args.store) as store:
                store.add_rows(rows)
    else:
        from paradnn.cli.run import check_backend

        check_backend()
        records = ops.run_ops(shapes, dtypes, settings)
        save_records(records, args.store)
        rows = [r.to_dict() for r in records]
    if args.json:
        print(json.dumps({"rows": rows}, default=str))
        return 0 if all(r["status"] == "ok" for r in rows) else 1
    columns = [("op", "op_label", str), ("dtype", "dtype", str)]
    if args.threads:
        columns.append(("threads", "threads", str))
    columns += [("status", "status", str), ("time [s]", "step_time_s", sig_digits()),
                ("achieved [FLOP/s]", "flops_per_sec", lambda v: si(v, "FLOP/s")),
                ("of peak", "flops_utilization", percent),
                ("intensity [FLOP/B]", "arithmetic_intensity", sig_digits())]
    for r in rows:  # a failed op has no label in its metrics
        r["op_label"] = r.get("op_label") or r.get("op")
    print_table(rows, columns)
    first = next((r for r in rows if r["status"] == "ok"), None)
    if first:
        print(f"time: median of the timed calls (paradnn.measure protocol); FLOPs analytic; peak "
              f"{si(first['peak_flops'], 'FLOP/s')} for {first['dtype']} ({first['peak_source']}: "
              f"{first['peak_method']}); bytes from XLA cost analysis")
    from paradnn.record import WARNINGS, warning_codes

    for r in rows:
        if r["status"] != "ok":
            print(f"paradnn: {r['op_label']} {r['dtype']}: {r['status']}: {r['error']}", file=sys.stderr)
        for code in warning_codes(r.get("warnings")):
            print(f"paradnn: warning: {r['op_label']} {r['dtype']}: {code}: {WARNINGS[code].text}", file=sys.stderr)
    return 0 if all(r["status"] == "ok" for r in rows) else 1


# ------------------------------------------------------------------------------------- collectives

def _cmd_collectives(args: argparse.Namespace) -> int:
    from paradnn.experiments import collectives

    devices = args.devices
    if devices[0] < 2:
        raise SpecError("devices", ",".join(map(str, devices)), "device counts of at least 2")
    simulated = _need_devices(devices[-1], args.simulate_devices)
    kind = _platform_kind()
    sizes, used = args.sizes, []
    if sizes is None:
        sizes = collectives.parse_sizes(collectives.DEFAULT_SIZES[kind])
        used.append(f"--sizes {collectives.DEFAULT_SIZES[kind]}")
    # Every collective at every size and device count, before the first is measured (and before
    # the defaults line): a size all_gather cannot split is refused now, not after minutes.
    try:
        collectives.check_collectives(devices, sizes, args.collective or collectives.COLLECTIVES,
                                      args.dtype)
    except SpecError as exc:
        if args.sizes is not None:
            raise
        exc.args = (f"{exc} (a size of the default --sizes {collectives.DEFAULT_SIZES[kind]}; "
                    "give --sizes FROM..TO)",)
        raise
    settings = _platform_settings(args, collectives.DEFAULT_SETTINGS[kind], "collectives", kind, used)

    def progress(done: int, total: int, rec) -> None:
        w = rec.workload
        what = (f"{rec.metrics['step_time_s'] * 1e3:.3g} ms" if rec.status == "ok" else rec.status)
        print(f"paradnn: collectives {done}/{total}: {w['collective']} {si(w['size_bytes'], 'B')} over "
              f"{w['devices']} devices: {what}", file=sys.stderr, flush=True)

    records = collectives.run_collectives(devices, sizes, args.collective or collectives.COLLECTIVES,
                                          args.dtype, settings, progress=progress)
    save_records(records, args.store)
    rows = [r.to_dict() for r in records]
    ok = all(r["status"] == "ok" for r in rows)
    if args.json:
        print(json.dumps({"simulated_devices": simulated, "rows": rows}, default=str))
        return 0 if ok else 1
    if simulated:
        print(SIMULATED_NOTE, file=sys.stderr)
    print_table(rows, [
        ("collective", "collective", str), ("devices", "devices", str), ("status", "status", str),
        ("size [B]", "size_bytes", str), ("time [s]", "step_time_s", sig_digits()),
        ("algbw [B/s]", "algbw_bytes_per_sec", lambda v: si(v, "B/s")),
        ("busbw [B/s]", "busbw_bytes_per_sec", lambda v: si(v, "B/s")),
        ("simulated", "simulated_devices", str)])
    print("algbw = size / median time; busbw = algbw x 2(n-1)/n (all-reduce), (n-1)/n (all-gather, "
          "reduce-scatter), 1 (broadcast), as NCCL-tests")
    for r in rows:
        if r["status"] != "ok":
            print(f"paradnn: {r['collective']} {r['size_bytes']} B over {r['devices']} devices: "
                  f"{r['status']}: {' '.join(str(r['error']).split())[:300]}", file=sys.stderr)
    return 0 if ok else 1


# ----------------------------------------------------------------------------------------- scaling

def _cmd_scaling(args: argparse.Namespace) -> int:
    from paradnn.cli.run import workload_from_args
    from paradnn.experiments.scaling import DEFAULT_SETTINGS, run_scaling

    devices = args.devices
    if devices[0] != 1:
        raise SpecError("devices", ",".join(map(str, devices)), "a list that includes 1 (the baseline)")
    workload = workload_from_args(argparse.Namespace(**{**vars(args), "devices": 1}))
    per_device = workload.batch if args.mode in ("weak", "both") else None
    global_batch = None
    if args.mode in ("strong", "both"):
        global_batch = args.global_batch or workload.batch * devices[-1]
    simulated = _need_devices(devices[-1], args.simulate_devices, workload.framework)
    kind = _platform_kind(workload.framework)
    settings = _platform_settings(args, DEFAULT_SETTINGS[kind], "scaling", kind)
    result = run_scaling(workload.spec, devices, per_device, global_batch, workload.dtype,
                         workload.optimizer, settings, args.memory_limit, workload.framework)
    save_records(result.records, args.store)
    table = result.table
    if args.json:
        print(json.dumps({"simulated_devices": simulated, "serial_fraction": result.serial_fraction,
                          "failed": result.failed, "table": table.to_dict(orient="records"),
                          "rows": [r.to_dict() for r in result.records]}, default=str))
        return 1 if result.failed else 0
    if simulated:
        print(SIMULATED_NOTE, file=sys.stderr)
    print_table(table.to_dict(orient="records"), [
        ("mode", "mode", str), ("devices", "devices", str), ("global batch", "batch", str),
        ("step [s]", "step_time_s", sig_digits()), ("examples/s", "examples_per_sec", sig_digits()),
        ("per device [examples/s]", "per_device_examples_per_sec", sig_digits()),
        ("efficiency", "scaling_efficiency", percent), ("overhead share", "overhead_share", percent)])
    print("efficiency = X(d) / (d X(1)) of global examples/s; overhead share = 1 - t(compute-only) / "
          "t(d), compute-only = the same per-device batch on one device")
    if global_batch is not None:
        print(f"Amdahl serial fraction (least squares on strong-scaling step times): "
              f"{result.serial_fraction:.3g}")
    for line in result.failed:
        print(f"paradnn: left out: {line}", file=sys.stderr)
    return 1 if result.failed else 0


def register(sub: argparse._SubParsersAction) -> None:
    from paradnn.experiments import collectives, ops
    from paradnn.cli import typed
    from paradnn.cli.run import add_spec_subparsers

    p = sub.add_parser("ops", help="matmul and conv2d micro-benchmarks (FLOP/s, fraction of peak)",
                       description="Time matmul and conv2d alone: the paper's shapes (default) and "
                       "any given with --matmul / --conv2d.")
    p.add_argument("--matmul", action="append", default=[], metavar="MxNxK", type=typed(ops.parse_matmul),
                   help="a matmul shape MxNxK or BxMxNxK (repeatable)")
    p.add_argument("--conv2d", action="append", default=[], metavar="B,H,W,C:KH,KW,COUT:S",
                   type=typed(ops.parse_conv2d),
                   help="a conv2d: input B,H,W,C (NHWC), kernel KH,KW,COUT, stride S (repeatable)")
    p.add_argument("--paper", action="store_true",
                   help="also the paper's shapes when shapes are given (they run by default otherwise)")
    p.add_argument("--dtype", action="append", choices=ops.OP_DTYPES, default=None,
                   help="compute dtype (repeatable; default float32)")
    p.add_argument("--threads", default=None, metavar="1,2,...", type=typed(parse_int_list, "threads"),
                   help="CPU thread-count scan: each count in a child process limited to that many CPUs")
    _add_common(p)
    _add_settings(p)
    p.set_defaults(func=_cmd_ops)

    p = sub.add_parser("collectives", help="collective bandwidth vs message size (NCCL-tests busbw)",
                       description="All-reduce, all-gather, reduce-scatter and broadcast bandwidth.")
    p.add_argument("--devices", required=True, metavar="N[,N...]", type=typed(parse_int_list, "devices"),
                   help="device counts, each at least 2")
    p.add_argument("--sizes", default=None, metavar="FROM..TO|S,S",
                   type=typed(collectives.parse_sizes, "sizes"),
                   help="message sizes in bytes (kB/MB/GB decimal, KiB/MiB/GiB binary): FROM..TO "
                   f"doubles from FROM up to TO (default {collectives.DEFAULT_SIZES['accelerator']} "
                   f"on accelerators, {collectives.DEFAULT_SIZES['cpu']} with a "
                   f"{collectives.DEFAULT_SETTINGS['cpu']['time_budget_s']:g} s time budget on a CPU host)")
    p.add_argument("--collective", action="append", choices=collectives.COLLECTIVES, default=None,
                   help="collective to measure (repeatable; default all)")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                   help="element type of the buffers")
    p.add_argument("--simulate-devices", action="store_true",
                   help="on a CPU host: force the largest count of host devices (not a real "
                   "multi-device measurement)")
    _add_common(p)
    _add_settings(p)
    p.set_defaults(func=_cmd_collectives)

    p = sub.add_parser("scaling", help="weak and strong scaling of one workload over device counts",
                       description="Weak scaling (--batch per device) and strong scaling (global "
                       "--global-batch) of one workload over --devices.")
    add_spec_subparsers(p, _cmd_scaling)
    family_parsers = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices
    for fp in family_parsers.values():
        for action in fp._actions:
            # Here --devices is the list of device counts to scale over, not one count.
            if action.dest == "devices":
                action.type = typed(parse_int_list, "devices")
                action.default = [1, 2, 4, 8]
                action.metavar = "1,2,..."
                action.help = "device counts to scale over, including 1"
            elif action.dest == "batch":
                action.help = ("per-device batch of weak scaling, in examples (default: 256 FC, "
                               "64 CNN/RNN, the model's own for real models)")
        fp.add_argument("--global-batch", default=None, metavar="N", type=typed(parse_int, "global_batch"),
                        help="global batch of strong scaling, in examples (default: --batch x the "
                        "largest device count)")
        fp.add_argument("--mode", default="both", choices=("weak", "strong", "both"), help="scaling mode")
        fp.add_argument("--simulate-devices", action="store_true",
                        help="on a CPU host: force the largest count of host devices (not a real "
                        "multi-device measurement)")
        fp.add_argument("--store", default=None, metavar="PATH",
                        type=path_type("store", "scaling --store", then=check_store), help="SQLite store to add the rows to (default: none; the rows are printed, not stored)")
