"""`paradnn run`, `paradnn probe`, `paradnn list`, `paradnn maxbatch`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any, Callable

from paradnn import families, frameworks, progress
from paradnn.errors import ParadnnError
from paradnn.families.real import ZOO
from paradnn.sizes import OPTIMIZERS
from paradnn.units import precise_duration, si, significant
from paradnn.workload import DTYPES, Workload

#: Most data-parallel devices a workload may name (far above any single host).
MAX_DEVICES = 65_536


def _spec_field_type(fam: families.Family, name: str, default: Any):
    from paradnn.cli import typed
    from paradnn.units import parse_int

    if any(a.name == name and a.choices for a in fam.axes) or isinstance(default, (str, bool)):
        return str  # the spec validates choices and flags, naming what is allowed
    minimum = 0 if default == 0 else 1  # a real model's image/length: 0 = the model's own
    exact = typed(parse_int, name, minimum=minimum)

    def integer_or_word(text: str):
        # A word ("auto" for a Transformer's heads) goes to the spec, which accepts it or names
        # what is allowed; anything numeric must be an exact integer in range.
        return text if text.isalpha() and text.lower() not in ("inf", "nan") else exact(text)

    return integer_or_word


def add_spec_subparsers(parser: argparse.ArgumentParser, handler: Callable, settings: bool = True,
                        cache: bool = False) -> None:
    """Add ``fc|cnn|rnn|real`` sub-subcommands whose flags are the spec's fields, plus
    --batch --dtype --optimizer --devices (and the measurement settings when ``settings``,
    ``--no-cache`` when ``cache``: the command uses the compilation cache)."""
    from paradnn.cli import Parser, typed
    from paradnn.units import parse_bytes as _bytes
    from paradnn.units import parse_int

    names = families.names()
    sub = parser.add_subparsers(dest="family", required=True, metavar="{" + ",".join(names) + "}",
                                parser_class=Parser)
    for family in names:
        fam = families.get(family)
        p = sub.add_parser(family, help=fam.description, description=fam.description)
        axes = {a.name: a for a in fam.axes}
        for f in dataclasses.fields(fam.spec):
            required = f.default is dataclasses.MISSING
            axis = axes.get(f.name)
            metavar = "|".join(axis.choices) if axis and axis.choices and len(axis.choices) <= 4 else (
                "NAME" if axis and axis.choices else "N")
            p.add_argument(f"--{f.name}", required=required,
                           type=_spec_field_type(fam, f.name, None if required else f.default),
                           metavar=metavar, default=None if required else f.default,
                           help=(axis.help if axis else f.name) + ("" if required else
                                                                  f" (default {f.default})"))
        p.add_argument("--batch", default=None, metavar="N", type=typed(parse_int, "batch"),
                       help="global batch in examples, split over --devices (default: the "
                       "family's, e.g. 256 FC, 64 CNN/RNN, the model's own for real models)")
        # Only the frameworks that can build this family (its builders): the help must not
        # offer one the family refuses.
        usable = family_frameworks(fam)
        p.add_argument("--framework", default=frameworks.DEFAULT, choices=[*usable, "best"],
                       help="software that builds, compiles and runs the workload: "
                       + ", ".join(frameworks.meta(n).description or n for n in usable)
                       + (" (per model: `paradnn list models`)" if fam.frameworks is not None else "")
                       + f"; default {frameworks.DEFAULT}; best: the one a stored calibration found "
                       "fastest for the family on this platform (docs/frameworks.md)")
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
        if cache:
            p.add_argument("--no-cache", action="store_true",
                           help="do not use the persistent compilation cache (default: the one "
                           "sweeps use, $XDG_CACHE_HOME/paradnn/xla or ~/.cache/paradnn/xla)")
        if settings:
            add_settings_flags(p)
        p.set_defaults(func=handler)


def family_frameworks(fam: families.Family) -> list[str]:
    """The registered frameworks that can build some spec of ``fam`` (its builders), in the
    registry's order; all of them for a family that names none (its runs say what it refuses)."""
    usable = list(fam.framework_builders())
    return usable or list(frameworks.names())


def add_settings_flags(p: argparse.ArgumentParser) -> None:
    """One flag per setting: the timing protocol's (``MeasureSettings``) and every registered
    framework's options (``FrameworkInfo.options``: ``--xla-preset``, ``--torch-compile``...),
    each parsed and range-checked by its field's metadata. Unset flags are None, leaving the
    setting's own default (shown in the help)."""
    from paradnn.cli import typed
    from paradnn.measure import PROTOCOL_FIELDS, SETTING_HELP, MeasureSettings, parse_setting

    def escaped(text: str) -> str:  # argparse %-formats help: "95% interval" must not be "% i"
        return text.replace("%", "%%")

    defaults = {f.name: f.default for f in dataclasses.fields(MeasureSettings)}
    for name in PROTOCOL_FIELDS:
        default = "auto" if defaults[name] is None else defaults[name]
        # A yes/no setting is a switch (`--ledger`) that also takes a value (`--ledger no`).
        switch = {"nargs": "?", "const": True} if isinstance(defaults[name], bool) else {}
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None, metavar="X",
                       type=typed(parse_setting, name), **switch,
                       help=escaped(f"measurement setting: {SETTING_HELP[name]} (default {default})"))
    # One paragraph per option however many frameworks declare it: option_help names them and
    # says what they share once, then only where they differ.
    for name in frameworks.option_fields():
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None, metavar="X",
                       type=typed(parse_setting, name),
                       help=escaped(f"framework option {frameworks.option_help(name)} "
                                    f"(default {frameworks.option_default(name)})"))


def workload_from_args(args: argparse.Namespace) -> Workload:
    """The Workload named by parsed spec flags (raises SpecError on bad values)."""
    fam = families.get(args.family)
    spec = fam.spec(**{f.name: getattr(args, f.name) for f in dataclasses.fields(fam.spec)})
    batch = args.batch if args.batch is not None else fam.default_batch(spec)
    # best: the reference framework until the calibration chooses (paradnn.beststack).
    framework = frameworks.DEFAULT if args.framework == "best" else args.framework
    return Workload(spec, batch, args.dtype, args.optimizer, args.devices, framework)


def settings_from_args(args: argparse.Namespace):
    """The MeasureSettings of the settings flags that were given (:func:`add_settings_flags`)."""
    from paradnn.measure import SETTINGS_FIELDS, MeasureSettings

    # The flags were parsed and range-checked by argparse (measure.parse_setting).
    values: dict[str, Any] = {name: getattr(args, name) for name in SETTINGS_FIELDS
                              if getattr(args, name, None) is not None}
    if getattr(args, "framework", None) != "best":  # best: each option applies to its own framework
        check_options(values, getattr(args, "framework", None) or frameworks.DEFAULT)
    return MeasureSettings(**values)


def check_options(values: dict[str, Any], framework: str) -> None:
    """Refuse a framework option (``--torch-compile``, ``--xla-preset``...) that ``framework``, the
    one the command runs, does not declare: it would be accepted and have no effect. ParadnnError
    naming the option, its value, the framework(s) it belongs to and the options ``framework``
    takes. ``values``: setting name -> value, as given."""
    declared = frameworks.option_fields()
    own = frameworks.option_names(framework)
    for name, value in values.items():
        if name in declared and name not in own:
            owners = ", ".join(fw for fw, _ in declared[name])
            allowed = ", ".join(f"--{o.replace('_', '-')}" for o in own) or "none"
            raise ParadnnError(f"--{name.replace('_', '-')} {value}: an option of {owners}, not of "
                               f"{framework} (the framework this command runs); allowed with "
                               f"--framework {framework}: {allowed}")


def _summary(record) -> str:
    from paradnn.measure import precision_text

    d = record.to_dict()
    w = record.workload
    spec = ", ".join(f"{k}={v}" for k, v in w.items() if k not in ("family",) and v is not None)
    lines = [f"{w['family']}: {spec}", f"status: {record.status}" + (f" ({record.error})" if record.error else "")]
    if record.status != "ok":
        return "\n".join(lines)
    t = precise_duration  # 20.4 µs, 2.51 ms, 25.1 s: never 2.506e+04 ms
    peak = f"{si(d['peak_flops'], 'FLOP/s')} per device x {w['devices']}"
    lines += [
        f"throughput        {significant(d['examples_per_sec'], 4)} examples/s",
        f"step time         {t(d['step_time_s'])} median (95% CI {t(d['step_time_ci_low_s'])} to "
        f"{t(d['step_time_ci_high_s'])}; p10 {t(d['step_time_p10_s'])}, p90 {t(d['step_time_p90_s'])})",
        f"precision         {precision_text(d)}; {d['timed_calls']} timed calls x "
        f"{d['steps_per_call_used']} steps after {d['warmup_calls_used']} warm-up calls ({d['warmup_elapsed_s']:.3g} s)",
        (f"utilization       {d['model_flops_utilization']:.1%} of {peak} ({d['peak_source']} peak) from useful "
         "FLOPs (analytic count)"
         + (f"; {d['flops_utilization']:.1%} from executed FLOPs ({d['flops_source']})"
            if d.get("flops_utilization") is not None else "")
         if d.get("model_flops_utilization") is not None
         else f"utilization       not computed (no usable peak: {d.get('peak_method')})"),
        f"FLOPs per step    {si(d['model_flops_per_step'], 'FLOP')} useful (analytic), "
        + (f"{si(d['flops_per_step'], 'FLOP')} executed ({d['flops_source']}), ratio {d['useful_flops_ratio']:.3g}"
           if d.get("flops_per_step") else f"executed not counted ({d['flops_source']})"),
        f"peak              {peak} ({d['peak_source']}; {d['peak_method']}"
        + (f"; spread cv {d['peak_spread']:.1%}" if d.get("peak_spread") else "") + ")",
        f"parameters        {d['params']:,}",
        f"compile           {d['compile_s']:.3g} s",
        f"platform          {d['device_platform']} / {d['device_kind']} ({d['cpu_model']}), "
        f"{d['framework']} {d['framework_version']}",
    ]
    if d.get("flops_per_sec") is not None:
        lines.insert(-4, f"achieved          {si(d['flops_per_sec'], 'FLOP/s')} executed")
    if d.get("bytes_per_step"):
        lines.insert(-3, f"bytes per step    {si(d['bytes_per_step'], 'B')} ({d['flops_source']}); intensity "
                     f"{d['arithmetic_intensity']:.3g} FLOP/B; peak bandwidth "
                     f"{si(d['peak_bytes_per_sec'], 'B/s')} ({d.get('peak_bytes_source') or d['peak_source']})")
    if d.get("memory_peak_bytes") is not None:
        lines.insert(-2, f"memory per device {si(d['memory_peak_bytes'], 'B')} peak (args "
                     f"{si(d['memory_argument_bytes'], 'B')}, temp {si(d['memory_temp_bytes'], 'B')}; "
                     "compiled memory analysis)")
    lines.insert(next(i for i, line in enumerate(lines) if line.startswith("peak ")) + 1, _ceiling_line(d))
    return "\n".join(lines + _meter_lines(d))


def _ceiling_line(d: dict[str, Any]) -> str:
    """The measured ceiling beside the peak (docs/metrics.md, "Peak and ceiling"): on a CPU the
    peak's own probe, on a device with a vendor peak its probe and the utilization against it."""
    if d.get("ceiling_id") == d.get("peak_id"):
        return "ceiling           the peak's own probe" + ("" if d.get("ceiling_flops") else " (none)")
    if d.get("ceiling_flops") is None:
        return f"ceiling           none ({d.get('ceiling_method')})"
    used = d.get("model_ceiling_utilization")
    return (f"ceiling           {si(d['ceiling_flops'], 'FLOP/s')} per device ({d['ceiling_method']})"
            + (f"; utilization {used:.1%} of it from useful FLOPs" if used is not None else ""))


def _meter_lines(d: dict[str, Any]) -> list[str]:
    """Memory breakdown, energy and utilization of a measured row, each with its source, or
    why it is missing (docs/metrics.md)."""
    from paradnn.record import MEMORY_PARTS

    lines = []
    parts = [(name, d.get(name)) for name in MEMORY_PARTS]
    if all(v is not None for _, v in parts):
        text = ", ".join(f"{name[len('memory_'):-len('_bytes')]} {si(v, 'B')}" for name, v in parts)
        lines.append(f"memory breakdown  {text} (per device; shapes, autodiff residuals, compiled total)")
    if d.get("memory_limit_bytes") is not None:
        source = {"given": "given", "device": "the device's, as the framework reports it"}.get(
            d.get("memory_limit_source"), d.get("memory_limit_source"))
        lines.append(f"memory limit      {si(d['memory_limit_bytes'], 'B')} per device ({source}): what "
                     "out-of-memory predictions were checked against")
    if d.get("energy_per_example_j") is not None:
        lines.append(f"energy            {d['energy_per_example_j']:.4g} J/example, {d['energy_per_step_j']:.4g} "
                     f"J/step, {d['power_w']:.4g} W average ({d['energy_source']}, measured over "
                     f"{d['meter_window_s']:.3g} s)")
    elif d.get("energy_source"):
        lines.append(f"energy            {d['energy_source']}: {d.get('energy_note') or 'no counter'}")
    host = d.get("host_cpu_utilization")
    busy = d.get("device_busy_fraction")
    other = d.get("host_other_busy_cores")
    lines.append("host load         CPU " + (f"{host:.0%} busy (/proc/stat, all cores)" if host is not None
                                            else "not measured (window too short for /proc/stat)")
                 + (f", {other:.2f} cores of it other processes'" if other is not None else "")
                 + ("; contended" if d.get("contended") else "")
                 + "; device " + (f"{busy:.0%} busy (profiler trace)" if busy is not None
                                  else f"busy fraction unknown: {d.get('device_busy_note') or 'not traced'}"))
    if d.get("ledger_source") or d.get("ledger_note"):
        from paradnn import ledger  # pandas: only for a run that took a ledger

        line = ledger.summary(d)
        lines.append(f"time ledger       {line} (docs/ledger.md)" if line else f"time ledger       {d['ledger_note']}")
    return lines


def warning_lines(record) -> list[str]:
    """One line per warning of the record, its kind first (physics, provenance, precision:
    ``paradnn.record.WARNING_KINDS``), physics first."""
    from paradnn.gpuclocks import clocks_text
    from paradnn.measure import precision_text
    from paradnn.record import WARNING_KINDS, WARNINGS

    if record.status != "ok":
        return []
    m = record.metrics
    order = list(WARNING_KINDS)
    lines = []
    for code in sorted(record.warnings, key=lambda c: order.index(WARNINGS[c].kind) if c in WARNINGS else len(order)):
        flag = WARNINGS.get(code)
        detail = ""
        if code == "contended" and m.get("host_other_busy_cores") is not None:
            detail = f" ({m['host_other_busy_cores']:.2f} CPU cores of other processes)"
        elif code == "unstable":
            detail = f" ({precision_text({**record.settings, **m})})"
        elif code == "clocks_limited":
            detail = f" ({clocks_text(m)})"
        text = flag.text if flag is not None else "unknown code"
        lines.append(f"paradnn: {flag.kind if flag else 'warning'} note: {code}{detail}: {text}"
                     if flag is not None and flag.kind != "physics"
                     else f"paradnn: warning: {code}{detail}: {text}")
    return lines


def outcome_line(record) -> str:
    """The one stderr line that says how a run ended: ``ok`` with its throughput, or the
    status (``oom``, ``error``, ``timeout``, ``crashed``) with the record's reason (an oom's
    says the predicted or the compiled/measured bytes against the limit), on one line and at
    most 400 characters, whether or not the outcome is also recorded."""
    what = f"{record.workload.get('family')} on {record.workload.get('framework')}"
    if record.status == "ok":
        m = record.metrics
        return (f"paradnn: ok: {what} measured: {m['examples_per_sec']:.4g} examples/s, median step "
                f"{m['step_time_s'] * 1e3:.4g} ms")
    # The reason already says whether an oom was predicted (and from what) or happened.
    reason = " ".join(str(record.error or "no reason recorded").split())
    line = f"paradnn: {record.status}: {what}: {reason}"
    return line if len(line) <= 400 else line[:397] + "..."


def check_backend(framework: str = frameworks.DEFAULT) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start the framework's backend and return its (platform, software); one it cannot start
    (JAX_PLATFORMS naming an absent platform, a framework not installed) is one line and exit 2
    rather than a traceback."""
    from paradnn.executors import local_context

    return local_context(framework)


def _cmd_run(args: argparse.Namespace) -> int:
    workload = workload_from_args(args)
    settings = settings_from_args(args)
    if args.framework == "best":
        return _cmd_run_best(args, workload, settings)
    # A line before the framework starts (seconds of imports), then one every few seconds.
    spec = ", ".join(f"{k}={v}" for k, v in workload.spec.to_dict().items() if k != "family")
    print(f"paradnn: measuring {workload.family} ({spec}), batch {workload.batch}, {workload.dtype}, with "
          f"{workload.framework} (time budget "
          f"{settings.time_budget_s:g} s after compiling)", file=sys.stderr, flush=True)
    with progress.heartbeat("run"):
        progress.phase(f"starting {workload.framework}")
        from paradnn.runner import run_workload

        check_backend(workload.framework)
        from paradnn.executors import Caches, default_cache_dir

        # The compilation cache a sweep uses: a model run before compiles in a fraction of the
        # time (compile_s says which), as in a sweep.
        Caches(None if args.no_cache else default_cache_dir()).ensure(workload.framework)
        record = run_workload(workload, settings, args.memory_limit)
    if args.json:
        print(json.dumps(record.to_dict(), default=str))
    else:
        print(_summary(record))
    for line in warning_lines(record):
        print(line, file=sys.stderr)
    print(outcome_line(record), file=sys.stderr)
    return 0 if record.status == "ok" else 1


def _cmd_run_best(args: argparse.Namespace, workload: Workload, settings: Any) -> int:
    # --framework best: the calibration (stored, or measured now in child processes) picks the
    # framework, then the run is that framework's (paradnn.beststack).
    from paradnn import beststack

    print(f"paradnn: measuring {workload.family} at the best stack of this platform (calibration: "
          f"{beststack.cache_path()})", file=sys.stderr, flush=True)
    with progress.heartbeat("run"):
        progress.phase("calibrating the best stack")
        chosen, calibration = beststack.resolve(workload, settings)
        from paradnn.executors import Caches, default_cache_dir

        # The chosen framework's compilation cache, as a plain run of it uses.
        Caches(None if args.no_cache else default_cache_dir()).ensure(chosen.framework)
        record = beststack.run_resolved(chosen, calibration, settings, args.memory_limit)
    if args.json:
        print(json.dumps(record.to_dict(), default=str))
    else:
        print(_summary(record))
        calibration = json.loads(record.metrics["best_calibration"])
        timed = ", ".join(f"{k} {v:.4g}" if v else f"{k} -" for k, v in calibration["examples_per_sec"].items())
        print(f"best stack {calibration['chosen']}: {calibration['rule']} (calibration "
              f"{calibration['id']}, examples/s {timed})")
    for line in warning_lines(record):
        print(line, file=sys.stderr)
    print(outcome_line(record), file=sys.stderr)
    return 0 if record.status == "ok" else 1


def _cmd_probe(args: argparse.Namespace) -> int:
    from paradnn.hardware import PROBE_DTYPES, best_quiet, ceilings, on_record, peaks, probe, utilization_metrics
    from paradnn.record import peak_and_ceiling

    check_backend()
    result = probe(refresh=args.refresh)
    # The ceiling of each dtype (the best usable probe on record, which may be an earlier one
    # than this) and the peak utilization divides by, named by their sources.
    ceiling = ceilings(tuple(d for d in PROBE_DTYPES if d in result["peak_flops"]))
    peak = {d: peaks(result["device_kind"], d, result["device_platform"]) for d in ceiling}
    if args.json:
        print(json.dumps({**result, "ceilings": {d: c._asdict() for d, c in ceiling.items()},
                          "peaks": {d: p._asdict() for d, p in peak.items()}}, default=str))
        return 0
    print(f"device     {result['device_platform']} / {result['device_kind']} ({result['cpu_model']})")
    for dtype, value in result["peak_flops"].items():
        methods = ", ".join(f"{m} {si(v, 'FLOP/s')}" for m, v in result["gemm"][dtype].items())
        print(f"GEMM peak  {dtype:9s} {si(value, 'FLOP/s')} (measured; best: {result['best_method'][dtype]}; "
              f"spread cv {result['spread'][dtype]:.1%}; {methods})")
    nominal = result.get("nominal_flops")
    if nominal:
        print(f"nominal    float32 {si(nominal['float32'], 'FLOP/s')}, bfloat16 {si(nominal['bfloat16'], 'FLOP/s')} "
              f"({result['nominal_basis']}; the denominator only where no quiet probe is on record)")
    print(f"bandwidth  {si(result['peak_bytes_per_sec'], 'B/s')} (measured; spread cv "
          f"{result['spread']['bandwidth']:.1%})")
    for dtype, c in ceiling.items():
        print(f"peak/ceil  {dtype:9s} {peak_and_ceiling(utilization_metrics(peak[dtype], c, None, None))}")
    load = result.get("host_load") or {}
    other = load.get("other_busy_cores")
    print(f"method     {result['method']}; measured {result['measured_utc']} (probe {result.get('id')}"
          + (f"; other processes kept {other:.2f} of {load.get('cpus')} cores busy" if other is not None else "")
          + ")")
    if result.get("incomplete"):
        skipped = "; ".join(f"{d}: {', '.join(pairs)}" for d, pairs in result["incomplete"].items())
        print(f"skipped    past the GEMM budget of {result.get('budget_s', '?')} s (PARADNN_PROBE_BUDGET_S): "
              f"{skipped}; a probe with a larger budget measures them")
    entries = on_record()
    quiet = sum(not e.get("contended") for e in entries)
    used = best_quiet(entries, "float32")
    print(f"on record  {len(entries)} probes of this host and software ({quiet} quiet, {len(entries) - quiet} "
          "contended); utilization divides by "
          + (f"probe {used['id']} ({used['measured_utc']}, float32 {si(used['peak_flops']['float32'], 'FLOP/s')})"
             if used else "the nominal peak: no quiet probe on record"))
    if result.get("noisy_dtypes") and not result["contended"]:
        print(f"paradnn: warning: {'; '.join(result['noisy_dtypes'].values())}: this probe is not used for "
              f"{', '.join(result['noisy_dtypes'])} utilization (float32 and the others are)", file=sys.stderr)
    if result.get("impossible"):
        print(f"paradnn: warning: impossible probe: {'; '.join(result['impossible'].values())}; it is "
              "stored and never used for utilization", file=sys.stderr)
    if result.get("above_nominal"):
        print(f"paradnn: note: {'; '.join(result['above_nominal'].values())}", file=sys.stderr)
    if result.get("above_spec"):
        print(f"paradnn: warning: faster than the vendor's datasheet: {'; '.join(result['above_spec'].values())}",
              file=sys.stderr)
    if result["contended"]:
        print(f"paradnn: warning: the host was busy ({'; '.join(result.get('contended_reasons', []))}): this "
              "probe is stored as contended and never used for utilization; run it again on a quiet host "
              "(paradnn probe --refresh)", file=sys.stderr)
    return 0


def _families_table() -> list[dict[str, Any]]:
    rows = []
    for family in families.generated():
        fam = families.get(family)
        params = [{"name": a.name, "unit": a.unit, "paper_range": _jsonable(fam.paper.get(a.name))}
                  for a in fam.axes]
        example = fam.spec(**{k: v for k, v in fam.tiny[0].items() if k != "batch"}) if fam.tiny else None
        rows.append({"family": family, "description": fam.description, "parameters": params,
                     "paper_batch": _jsonable(fam.paper.get("batch")),
                     "default_batch": fam.default_batch(example) if example is not None else None,
                     "frameworks": list(fam.framework_builders())})
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
        if args.json:
            # The reference framework's catalog: parameters recounted from its shapes and each
            # model's task (seconds: every model is traced).
            rows = frameworks.capability(frameworks.DEFAULT, "model_catalog", "list the real models")()
            print(json.dumps(rows))
            return 0
        # The framework-neutral table (tests/test_families.py recounts its parameters with JAX):
        # no framework starts, so the listing takes well under a second instead of tracing the
        # whole zoo (12.7 s on a 2-core host).
        for name in sorted(ZOO):
            m = ZOO[name]
            # The training step's FLOPs per example (paradnn's count, what utilization divides)
            # beside the description's published forward GMAC, which counts padding taps too.
            print(f"{name:14s} {m.params:>13,} params  train {m.train_flops / 1e9:5.1f} GFLOP/example  "
                  f"image {m.default_image or '-':>4}  length {m.default_length or '-':>4}  "
                  f"batch {m.default_batch:>5}  {m.description}")
        return 0
    rows = _families_table()
    rows.append({"family": "real", "description": families.get("real").description,
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
        if r.get("frameworks"):
            print(f"  --framework {'|'.join(r['frameworks'])}")
        for p in r["parameters"]:
            print(f"  --{p['name']:8s} paper values: {p['paper_range']}")
    return 0


def _cmd_maxbatch(args: argparse.Namespace) -> int:
    from paradnn.experiments.maxbatch import max_batch

    workload = workload_from_args(args)
    check_backend(workload.framework)
    result = max_batch(workload.spec, dtype=workload.dtype, optimizer=workload.optimizer,
                       devices=workload.devices, memory_limit_bytes=args.memory_limit,
                       framework=workload.framework)
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
    add_spec_subparsers(p, _cmd_run, cache=True)
    p = sub.add_parser("probe", help="measure GEMM FLOPS and memory bandwidth of this device")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.add_argument("--refresh", action="store_true", help="measure again instead of reading the cache")
    p.set_defaults(func=_cmd_probe)
    p = sub.add_parser("list", help="model families and their parameters, or real models")
    p.add_argument("what", nargs="?", choices=["families", "models"], default="families",
                   help="what to list")
    p.add_argument("--json", action="store_true", help="print exactly one JSON array (models: "
                   "parameters recounted by the reference framework, and each model's task)")
    p.set_defaults(func=_cmd_list)
    p = sub.add_parser("maxbatch", help="largest power-of-two batch that fits on the device")
    add_spec_subparsers(p, _cmd_maxbatch, settings=False)


if __name__ == "__main__":  # pragma: no cover
    from paradnn.cli import main

    sys.exit(main())
