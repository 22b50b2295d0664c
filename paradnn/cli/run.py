"""`paradnn run`, `paradnn probe`, `paradnn list`, `paradnn maxbatch`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any, Callable

from paradnn.specs import CNN, DTYPES, FC, OPTIMIZERS, RNN, Real, Workload
from paradnn.units import parse_bytes, si

# family -> (spec class, help); flags are the spec's field names.
FAMILIES: dict[str, tuple[type, str]] = {
    "fc": (FC, "fully connected: --layers --nodes --input --output"),
    "cnn": (CNN, "ResNet-v1 CNN: --block --blocks --filters --image --output"),
    "rnn": (RNN, "recurrent LM: --cell --layers --embed --length --vocab"),
    "real": (Real, "a real model: --model [--image] [--length]"),
}
_CHOICES = {"block": "residual|bottleneck", "cell": "rnn|lstm|gru"}


def add_spec_subparsers(parser: argparse.ArgumentParser, handler: Callable, settings: bool = True) -> None:
    """Add ``fc|cnn|rnn|real`` sub-subcommands whose flags are the spec's fields, plus
    --batch --dtype --optimizer --devices (and the measurement settings when ``settings``)."""
    sub = parser.add_subparsers(dest="family", required=True, metavar="{fc,cnn,rnn,real}")
    for family, (cls, help_text) in FAMILIES.items():
        p = sub.add_parser(family, help=help_text, description=help_text)
        for f in dataclasses.fields(cls):
            required = f.default is dataclasses.MISSING
            # Values stay strings here: the spec validates them and names what is allowed.
            p.add_argument(f"--{f.name}", required=required, metavar=_CHOICES.get(f.name, "N" if f.name != "model" else "NAME"),
                           default=None if required else f.default)
        p.add_argument("--batch", default=None, metavar="N", help="global batch in examples")
        p.add_argument("--dtype", default="float32", metavar="|".join(DTYPES))
        p.add_argument("--optimizer", default=None, metavar="|".join(OPTIMIZERS))
        p.add_argument("--devices", default=1, metavar="N", help="data-parallel devices")
        p.add_argument("--memory-limit", default=None, metavar="SIZE",
                       help="treat configs above this (e.g. 2GB) as out of memory")
        p.add_argument("--json", action="store_true", help="print exactly one JSON object")
        if settings:
            from paradnn.measure import MeasureSettings

            for f in dataclasses.fields(MeasureSettings):
                p.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=None, metavar="X",
                               help=f"measurement setting (default {f.default})")
        p.set_defaults(func=handler)


def workload_from_args(args: argparse.Namespace) -> Workload:
    """The Workload named by parsed spec flags (raises SpecError on bad values)."""
    cls = FAMILIES[args.family][0]
    spec = cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})
    batch = args.batch
    if batch is None:
        from paradnn.runner import DEFAULT_BATCH

        batch = DEFAULT_BATCH.get(args.family) or _real_default_batch(spec)
    return Workload(spec, batch, args.dtype, args.optimizer, args.devices)


def _real_default_batch(spec: Real) -> int:
    from paradnn.models import registry

    return registry.get(spec.model).default_batch


def settings_from_args(args: argparse.Namespace):
    from paradnn.errors import SpecError
    from paradnn.measure import MeasureSettings

    values: dict[str, Any] = {}
    for f in dataclasses.fields(MeasureSettings):
        raw = getattr(args, f.name, None)
        if raw is None:
            continue
        try:
            values[f.name] = type(f.default)(float(raw)) if type(f.default) is int and float(raw).is_integer() \
                else type(f.default)(raw)
        except ValueError:
            raise SpecError(f.name, raw, f"a {type(f.default).__name__}") from None
    return MeasureSettings(**values)


def _summary(record) -> str:
    d = record.to_dict()
    w = record.workload
    spec = ", ".join(f"{k}={v}" for k, v in w.items() if k not in ("family",) and v is not None)
    lines = [f"{w['family']}: {spec}", f"status: {record.status}" + (f" ({record.error})" if record.error else "")]
    if record.status != "ok":
        return "\n".join(lines)
    peak_note = "spec sheet" if d["peak_source"] == "spec" else "measured by paradnn probe"
    lines += [
        f"throughput        {d['examples_per_sec']:.4g} examples/s",
        f"step time         {d['step_time_s'] * 1e3:.4g} ms median (p10 {d['step_time_p10_s'] * 1e3:.4g}, "
        f"p90 {d['step_time_p90_s'] * 1e3:.4g} ms, cv {d['step_time_cv']:.2%}, {d['timed_calls']} calls x "
        f"{d['steps_per_call']} steps)",
        f"FLOPs per step    {si(d['flops_per_step'], 'FLOP')} (XLA cost analysis), "
        f"{si(d['model_flops_per_step'], 'FLOP')} (analytic)",
        f"bytes per step    {si(d['bytes_per_step'], 'B')} (XLA cost analysis)",
        f"achieved          {si(d['flops_per_sec'], 'FLOP/s')}; utilization {d['flops_utilization']:.1%} of "
        f"{si(d['peak_flops'], 'FLOP/s')} per device x {w['devices']} ({peak_note})",
        f"intensity         {d['arithmetic_intensity']:.3g} FLOP/B; peak bandwidth "
        f"{si(d['peak_bytes_per_sec'], 'B/s')} ({peak_note})",
        f"parameters        {d['params']:,}",
        f"memory per device {si(d['memory_peak_bytes'], 'B')} peak (args {si(d['memory_argument_bytes'], 'B')}, "
        f"temp {si(d['memory_temp_bytes'], 'B')}; XLA memory analysis)",
        f"compile           {d['compile_s']:.3g} s",
        f"platform          {d['backend']} / {d['device_kind']} ({d['cpu_model']}), jax {d['jax_version']}",
    ]
    return "\n".join(lines)


def _cmd_run(args: argparse.Namespace) -> int:
    from paradnn.runner import run_workload

    workload = workload_from_args(args)
    settings = settings_from_args(args)
    limit = parse_bytes(args.memory_limit) if args.memory_limit else None
    record = run_workload(workload, settings, limit)
    if args.json:
        print(json.dumps(record.to_dict(), default=str))
    else:
        print(_summary(record))
    return 0 if record.status == "ok" else 1


def _cmd_probe(args: argparse.Namespace) -> int:
    from paradnn.hardware import probe

    result = probe(refresh=args.refresh)
    if args.json:
        print(json.dumps(result, default=str))
        return 0
    print(f"device     {result['backend']} / {result['device_kind']} ({result['cpu_model']})")
    for dtype, value in result["peak_flops"].items():
        print(f"GEMM peak  {dtype:9s} {si(value, 'FLOP/s')} (measured)")
    print(f"bandwidth  {si(result['peak_bytes_per_sec'], 'B/s')} (measured)")
    if result.get("spec"):
        print(f"spec peaks {result['spec']}")
    print(f"method     {result['method']}; measured {result['measured_utc']}")
    return 0


def _families_table() -> list[dict[str, Any]]:
    from paradnn.grids import PAPER
    from paradnn.runner import DEFAULT_BATCH

    rows = []
    for family, (cls, help_text) in FAMILIES.items():
        if family == "real":
            continue
        params = []
        for f in dataclasses.fields(cls):
            params.append({"name": f.name, "paper_range": _jsonable(PAPER.get(family, {}).get(f.name))})
        rows.append({"family": family, "description": help_text, "parameters": params,
                     "paper_batch": _jsonable(PAPER.get(family, {}).get("batch")),
                     "default_batch": DEFAULT_BATCH[family]})
    return rows


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    try:
        return list(value)
    except TypeError:
        return str(value)


def _cmd_list(args: argparse.Namespace) -> int:
    if args.what == "models":
        from paradnn.models.zoo.catalog import catalog

        rows = catalog()
        if args.json:
            print(json.dumps(rows))
        else:
            for r in rows:
                print(f"{r['name']:14s} {r['params']:>13,} params  image {r['default_image'] or '-':>4}  "
                      f"length {r['default_length'] or '-':>4}  batch {r['default_batch']:>5}  {r['description']}")
        return 0
    rows = _families_table()
    rows.append({"family": "real", "description": FAMILIES["real"][1],
                 "parameters": [{"name": "model", "paper_range": "see `paradnn list models`"}]})
    if args.json:
        print(json.dumps(rows))
        return 0
    print("Options for every family: --batch N --dtype " + "|".join(DTYPES) + " --optimizer "
          + "|".join(OPTIMIZERS) + " (default: rmsprop for fc, cnn and rnn; a real model's own "
          "reference optimizer, e.g. momentum for resnet50, adam for bert_base, sgd for lstm_lm: "
          "docs/models.md) --devices N")
    for r in rows:
        print(f"\n{r['family']}: {r['description']}" + (f"; default batch {r['default_batch']}, paper batch "
                                                         f"{r['paper_batch']}" if 'default_batch' in r else ""))
        for p in r["parameters"]:
            print(f"  --{p['name']:8s} paper values: {p['paper_range']}")
    return 0


def _cmd_maxbatch(args: argparse.Namespace) -> int:
    from paradnn.maxbatch import max_batch

    workload = workload_from_args(args)
    limit = parse_bytes(args.memory_limit) if args.memory_limit else None
    result = max_batch(workload.spec, dtype=workload.dtype, optimizer=workload.optimizer,
                       devices=workload.devices, memory_limit_bytes=limit)
    if args.json:
        print(json.dumps(result, default=str))
        return 0
    print(f"memory limit   {si(result['memory_limit_bytes'], 'B')} per device ({result['limit_source']})")
    for p in result["probes"]:
        verdict = "fits" if p["fits"] else "does not fit"
        print(f"batch {p['batch']:>7}  {verdict:12s} {p['reason']}")
    if result["batch"] is None:
        print("largest batch  none: even the smallest batch does not fit")
        return 1
    trial = result.get("trial_status")
    examples = result.get("trial_examples_per_sec")
    print(f"largest batch  {result['batch']} (power of two; compiled memory analysis"
          + (f", trial run {trial}" + (f" at {examples:.4g} examples/s" if examples else "") if trial else "") + ")")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="measure one training workload", description="Measure one training workload.")
    add_spec_subparsers(p, _cmd_run)
    p = sub.add_parser("probe", help="measure GEMM FLOPS and memory bandwidth of this device")
    p.add_argument("--json", action="store_true")
    p.add_argument("--refresh", action="store_true", help="measure again instead of reading the cache")
    p.set_defaults(func=_cmd_probe)
    p = sub.add_parser("list", help="model families and their parameters, or real models")
    p.add_argument("what", nargs="?", choices=["families", "models"], default="families")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_list)
    p = sub.add_parser("maxbatch", help="largest power-of-two batch that fits on the device")
    add_spec_subparsers(p, _cmd_maxbatch, settings=False)


if __name__ == "__main__":  # pragma: no cover
    from paradnn.cli import main

    sys.exit(main())
