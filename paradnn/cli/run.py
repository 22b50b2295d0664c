"""`paradnn run`, `paradnn probe`, `paradnn list`, `paradnn maxbatch`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any, Callable

from paradnn.specs import CNN, DTYPES, FC, OPTIMIZERS, RNN, Real, Workload
from paradnn.units import si

# family -> (spec class, help); flags are the spec's field names.
FAMILIES: dict[str, tuple[type, str]] = {
    "fc": (FC, "fully connected: --layers --nodes --input --output"),
    "cnn": (CNN, "ResNet-v1 CNN: --block --blocks --filters --image --output"),
    "rnn": (RNN, "recurrent LM: --cell --layers --embed --length --vocab"),
    "real": (Real, "a real model: --model [--image] [--length]"),
}
_CHOICES = {"block": "residual|bottleneck", "cell": "rnn|lstm|gru"}
# Spec field -> help with its unit. Integer fields are parsed as exact integers (never through
# a float); a real model's image/length accept 0 for "the model's own".
_FIELD_HELP = {
    "layers": "hidden layers (FC) or stacked recurrent cells (RNN), a count",
    "nodes": "units per hidden layer, a count",
    "input": "input features per example, a count",
    "output": "classes of the output layer, a count",
    "block": "block type of the ResNet groups",
    "blocks": "blocks per group, a count",
    "filters": "filters of the first group (x1, x2, x4, x8 for the four groups), a count",
    "image": "side of the square input image in pixels",
    "cell": "recurrent cell type",
    "embed": "embedding and hidden size, a count",
    "length": "sequence length in tokens",
    "vocab": "vocabulary size in tokens",
    "model": "name of a zoo model (`paradnn list models`)",
}
#: Most data-parallel devices a workload may name (far above any single host).
MAX_DEVICES = 65_536


def _spec_field_type(cls: type, name: str):
    from paradnn.cli import typed
    from paradnn.units import parse_int

    if name in ("block", "cell", "model"):
        return str
    minimum = 0 if cls is Real else 1  # Real: 0 = the model's default image/length
    return typed(parse_int, name, minimum=minimum)


def add_spec_subparsers(parser: argparse.ArgumentParser, handler: Callable, settings: bool = True) -> None:
    """Add ``fc|cnn|rnn|real`` sub-subcommands whose flags are the spec's fields, plus
    --batch --dtype --optimizer --devices (and the measurement settings when ``settings``)."""
    from paradnn.cli import _Parser, typed
    from paradnn.units import parse_bytes as _bytes, parse_int

    sub = parser.add_subparsers(dest="family", required=True, metavar="{fc,cnn,rnn,real}",
                                parser_class=_Parser)
    for family, (cls, help_text) in FAMILIES.items():
        p = sub.add_parser(family, help=help_text, description=help_text)
        for f in dataclasses.fields(cls):
            required = f.default is dataclasses.MISSING
            p.add_argument(f"--{f.name}", required=required, type=_spec_field_type(cls, f.name),
                           metavar=_CHOICES.get(f.name, "N" if f.name != "model" else "NAME"),
                           default=None if required else f.default,
                           help=_FIELD_HELP.get(f.name, f.name) + ("" if required else
                                                                  " (0: the model's own)"))
        p.add_argument("--batch", default=None, metavar="N", type=typed(parse_int, "batch"),
                       help="global batch in examples, split over --devices (default: 256 FC, "
                       "64 CNN/RNN, the model's own for real models)")
        p.add_argument("--dtype", default="float32", choices=DTYPES, help="compute dtype")
        p.add_argument("--optimizer", default=None, choices=OPTIMIZERS,
                       help="optimizer (default: rmsprop, a real model's own)")
        p.add_argument("--devices", default=1, metavar="N",
                       type=typed(parse_int, "devices", maximum=MAX_DEVICES),
                       help="data-parallel devices, a count")
        p.add_argument("--memory-limit", default=None, metavar="SIZE",
                       type=typed(_bytes),
                       help="memory of one device in bytes, e.g. 16GB or 512MiB: configs whose "
                       "weights+optimizer state or compiled peak exceed it are recorded oom "
                       "(default: the device's memory; the host's on a CPU)")
        p.add_argument("--json", action="store_true", help="print exactly one JSON object")
        if settings:
            from paradnn.measure import SETTING_HELP, MeasureSettings, parse_setting

            defaults = {f.name: f.default for f in dataclasses.fields(MeasureSettings)}
            for name, meaning in SETTING_HELP.items():
                # default None: unset flags leave the settings' own default (shown in the help).
                default = "auto" if defaults[name] is None else defaults[name]
                p.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None, metavar="X",
                               type=typed(parse_setting, name),
                               help=f"measurement setting: {meaning} (default {default})")
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
    from paradnn.measure import MeasureSettings

    # The flags were parsed and range-checked by argparse (measure.parse_setting).
    values: dict[str, Any] = {f.name: getattr(args, f.name) for f in dataclasses.fields(MeasureSettings)
                              if getattr(args, f.name, None) is not None}
    return MeasureSettings(**values)


def _summary(record) -> str:
    d = record.to_dict()
    w = record.workload
    spec = ", ".join(f"{k}={v}" for k, v in w.items() if k not in ("family",) and v is not None)
    lines = [f"{w['family']}: {spec}", f"status: {record.status}" + (f" ({record.error})" if record.error else "")]
    if record.status != "ok":
        return "\n".join(lines)
    ms = 1e3
    peak = f"{si(d['peak_flops'], 'FLOP/s')} per device x {w['devices']}"
    lines += [
        f"throughput        {d['examples_per_sec']:.4g} examples/s",
        f"step time         {d['step_time_s'] * ms:.4g} ms median (95% CI {d['step_time_ci_low_s'] * ms:.4g}-"
        f"{d['step_time_ci_high_s'] * ms:.4g} ms; p10 {d['step_time_p10_s'] * ms:.4g}, p90 "
        f"{d['step_time_p90_s'] * ms:.4g} ms)",
        f"precision         cv {d['step_time_cv']:.2%} (target {d['cv_target']:.2%}: "
        f"{'met' if d['stable'] else 'NOT met'}); {d['timed_calls']} timed calls x "
        f"{d['steps_per_call_used']} steps after {d['warmup_calls_used']} warm-up calls ({d['warmup_elapsed_s']:.3g} s)",
        f"utilization       {d['model_flops_utilization']:.1%} of {peak} from useful FLOPs (analytic count); "
        f"{d['flops_utilization']:.1%} from executed FLOPs (XLA cost analysis)",
        f"FLOPs per step    {si(d['model_flops_per_step'], 'FLOP')} useful (analytic), "
        f"{si(d['flops_per_step'], 'FLOP')} executed (XLA cost analysis), ratio {d['useful_flops_ratio']:.3g}",
        f"achieved          {si(d['flops_per_sec'], 'FLOP/s')} executed",
        f"peak              {peak} ({d['peak_source']}; {d['peak_method']})",
        f"bytes per step    {si(d['bytes_per_step'], 'B')} (XLA cost analysis); intensity "
        f"{d['arithmetic_intensity']:.3g} FLOP/B; peak bandwidth {si(d['peak_bytes_per_sec'], 'B/s')} "
        f"({d['peak_source']})",
        f"parameters        {d['params']:,}",
        f"memory per device {si(d['memory_peak_bytes'], 'B')} peak (args {si(d['memory_argument_bytes'], 'B')}, "
        f"temp {si(d['memory_temp_bytes'], 'B')}; XLA memory analysis)",
        f"compile           {d['compile_s']:.3g} s",
        f"platform          {d['backend']} / {d['device_kind']} ({d['cpu_model']}), jax {d['jax_version']}",
    ]
    return "\n".join(lines)


def warning_lines(record) -> list[str]:
    """One line per way the record missed its precision target or broke physics."""
    from paradnn.record import WARNINGS

    if record.status != "ok":
        return []
    m = record.metrics
    lines = []
    if not m.get("stable", True):
        lines.append(f"paradnn: warning: unstable: step time cv {m['step_time_cv']:.1%} above the "
                     f"{record.settings['cv_target']:.1%} target within the time budget; measure again "
                     "on a quiet host or raise --time-budget-s")
    lines += [f"paradnn: warning: {code}: {WARNINGS[code]}" for code in record.warnings]
    return lines


def _check_backend() -> None:
    """Start JAX's backend; one it cannot start (JAX_PLATFORMS naming an absent platform) is an
    InfrastructureError, i.e. one line and exit 2 rather than a traceback."""
    from paradnn.executors import local_context

    local_context()


def _cmd_run(args: argparse.Namespace) -> int:
    from paradnn.runner import run_workload

    _check_backend()
    workload = workload_from_args(args)
    settings = settings_from_args(args)
    record = run_workload(workload, settings, args.memory_limit)
    if args.json:
        print(json.dumps(record.to_dict(), default=str))
    else:
        print(_summary(record))
    for line in warning_lines(record):
        print(line, file=sys.stderr)
    return 0 if record.status == "ok" else 1


def _cmd_probe(args: argparse.Namespace) -> int:
    from paradnn.hardware import probe

    _check_backend()
    result = probe(refresh=args.refresh)
    if args.json:
        print(json.dumps(result, default=str))
        return 0
    print(f"device     {result['backend']} / {result['device_kind']} ({result['cpu_model']})")
    for dtype, value in result["peak_flops"].items():
        methods = ", ".join(f"{m} {si(v, 'FLOP/s')}" for m, v in result["gemm"][dtype].items())
        print(f"GEMM peak  {dtype:9s} {si(value, 'FLOP/s')} (measured; best: {result['best_method'][dtype]}; "
              f"spread cv {result['spread'][dtype]:.1%}; {methods})")
    nominal = result.get("nominal_flops")
    if nominal:
        print(f"nominal    float32 {si(nominal['float32'], 'FLOP/s')}, bfloat16 {si(nominal['bfloat16'], 'FLOP/s')} "
              f"({result['nominal_basis']}; not used for utilization)")
    print(f"bandwidth  {si(result['peak_bytes_per_sec'], 'B/s')} (measured; spread cv "
          f"{result['spread']['bandwidth']:.1%})")
    if result.get("spec"):
        print(f"spec peaks {result['spec']}")
    print(f"method     {result['method']}; measured {result['measured_utc']}")
    if result["contended"]:
        print(f"paradnn: warning: the host was busy (spread above cv {result['max_cv']:.0%}): this probe "
              "is not cached; run it again on a quiet host", file=sys.stderr)
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

    _check_backend()
    workload = workload_from_args(args)
    result = max_batch(workload.spec, dtype=workload.dtype, optimizer=workload.optimizer,
                       devices=workload.devices, memory_limit_bytes=args.memory_limit)
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
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.add_argument("--refresh", action="store_true", help="measure again instead of reading the cache")
    p.set_defaults(func=_cmd_probe)
    p = sub.add_parser("list", help="model families and their parameters, or real models")
    p.add_argument("what", nargs="?", choices=["families", "models"], default="families",
                   help="what to list")
    p.add_argument("--json", action="store_true", help="print exactly one JSON array")
    p.set_defaults(func=_cmd_list)
    p = sub.add_parser("maxbatch", help="largest power-of-two batch that fits on the device")
    add_spec_subparsers(p, _cmd_maxbatch, settings=False)


if __name__ == "__main__":  # pragma: no cover
    from paradnn.cli import main

    sys.exit(main())
