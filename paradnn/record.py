"""One run of one workload on one platform, as a flat, versioned row.

``Record.to_dict()`` is the row the store keeps and ``paradnn.load`` returns: one key per field,
no nesting. Spec fields keep their names (``layers``, ``nodes``, ...), metrics keep the names of
``METRICS``, platform and software fields keep the names below. Never rename a field without a
store migration (``paradnn.store.migrate_row``); add new ones and bump ``SCHEMA_VERSION`` when a
field's name or meaning changes.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as _dt
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from paradnn import families, frameworks, gpuclocks, hostmem
from paradnn.measure import PROTOCOL_FIELDS, UNKEYED_SETTINGS
from paradnn.metrics import (  # noqa: F401 - the metrics' vocabulary, read from here too
    LEDGER_PARTS,
    MEMORY_PARTS,
    METRICS,
    ONLY_SOME_METRICS,
    PHASES,
    format_phase_totals,
    ledger_metric,
    phase_metric,
    phase_totals,
)
from paradnn.units import si
from paradnn.workload import Workload, short_name, stable_hash

# 2: device platform field `backend` -> `device_platform`, plus `framework`.
# 3: the key covers a record's own framework only: its software fields (no other framework's
#    versions, no None placeholders for them) and its options (no other framework's settings).
# 4: the option matmul_precision (every built-in framework); rows before it ran at each
#    framework's default precision and read as matmul_precision "default" (SETTINGS_ADDED).
# 5: the protocol settings stop_rule and ci_target (the timed phase stops on the precision of
#    the median, not the spread of calls); rows before it stopped by the spread and read as
#    stop_rule "cv" (their ci_target was not used: the value the setting had when it came).
# 6: PyTorch's option cpu_allocator (glibc malloc kept freed memory for reuse on a CPU); rows
#    before it ran with the system's malloc and read as cpu_allocator "system".
# 7: PyTorch's option memory_format; rows before it ran image models in NCHW: memory_format "contiguous".
SCHEMA_VERSION = 7
#: Settings added after the first schema: schema version -> {setting: the value rows of earlier
#: versions ran with}. Migration (``paradnn.store.migrate_row``) fills in a protocol setting on
#: every row and a framework option where the row's framework declares it, so that an old row
#: keys as the same config run now with those values.
SETTINGS_ADDED: dict[int, dict[str, Any]] = {4: {"matmul_precision": "default"},
                                             5: {"stop_rule": "cv", "ci_target": 0.02},
                                             6: {"cpu_allocator": "system"}, 7: {"memory_format": "contiguous"}}

#: A predicted row (paradnn.predictor) is not a measurement: no analysis or figure of measured
#: rows uses it (they take ``ok`` rows), and it never counts as a config's record on resume.
PREDICTED = "predicted"
STATUSES = ("ok", "oom", "error", "timeout", "crashed", PREDICTED)


class Flag(NamedTuple):
    """One code of a record's ``warnings``: its kind (a :data:`WARNING_KINDS` key) and what it
    means, with the likely cause."""

    kind: str
    text: str


#: The kinds of warning, by what they mean for a number: kind -> what a reader should do.
WARNING_KINDS: dict[str, str] = {
    "physics": "an impossible value (above a bound no run can pass, or counts that disagree): "
               "the run's numbers are not to be published until the cause is found",
    "provenance": "where a number's denominator came from, or what the host did while it was "
                  "measured: the number stands, and is read with this note",
    "precision": "the timing missed its precision target: the number is less precise than asked",
}

#: The checks a measured record can fail: code -> :class:`Flag` (kind, meaning and likely
#: cause). A record lists the codes it fails in ``warnings``; analyses honour them by kind
#: (only ``physics`` marks a figure's cell or point as not to be published).
WARNINGS: dict[str, Flag] = {
    "utilization_above_1": Flag("physics", (
        "achieved FLOP/s above the device peak (a vendor peak or a quiet measured probe), which "
        "is impossible: the peak is too low (a measured CPU peak that missed the machine's "
        "fastest library) or the FLOP count includes work that was not done")),
    "above_roof": Flag("physics", (
        "the point lies above its roofline min(peak FLOP/s, intensity x peak bandwidth), both "
        "from a vendor table or a quiet probe: the bandwidth peak is too low, or XLA's "
        "bytes-accessed count misses reuse in caches")),
    "flops_mismatch": Flag("physics", (
        "executed FLOPs below 0.8x the analytic (useful) matmul count, or above 1.25x the useful "
        "count plus the analytic estimate of the optimizer's and element-wise work: XLA "
        "executes extra work (e.g. XLA:CPU rewrites depthwise weight gradients as dense "
        "convolutions) or the analytic count misses operations; model_flops_utilization, from "
        "useful FLOPs, is the one to quote")),
    "above_ceiling": Flag("physics", (
        "ceiling_utilization or model_ceiling_utilization above 1: the run beat the best GEMM "
        "this host measured (the measured ceiling), which is impossible: the probe missed a "
        "faster library or kernel, or the FLOP count includes work that was not done (where "
        "the ceiling is the peak, as on a CPU, utilization_above_1 comes with it)")),
    "peak_below_ceiling": Flag("physics", (
        "the vendor peak the utilization divides by is below the GEMM rate measured on this "
        "device (ceiling_flops > peak_flops), which is impossible: the peak table entry is "
        "wrong for this device (another form factor or clocks) or the device kind matched the "
        "wrong entry; paradnn probe names the entry")),
    "nominal_peak": Flag("provenance", (
        "no quiet probe of this host's peak is on record, so utilization divides by the CPU's "
        "nominal peak (cores x clock x vector lanes x FMA units, peak_method says which): a "
        "stable, named denominator, not a measurement; paradnn probe --refresh on a quiet host "
        "gives runs measured after it a measured peak")),
    "above_nominal_peak": Flag("provenance", (
        "achieved FLOP/s above the nominal peak it divides by: the nominal is computed from the "
        "clock the host reports, which boost clocks exceed (a virtual machine may report its "
        "base clock only), so this is no impossibility; a quiet probe (paradnn probe --refresh) "
        "gives a measured bound")),
    "roof_under_load": Flag("provenance", (
        "the roofline's bandwidth comes from a probe taken while other processes were busy (a "
        "lower bound of the host's bandwidth), and the point lies above intensity x that "
        "bandwidth: not judged as a physics error; a quiet probe gives a bound that is")),
    "page_faults": Flag("provenance", (
        "the measuring process had 4 KiB pages (host_huge_pages none) and spent at least "
        f"{hostmem.PAGE_FAULT_KERNEL_SHARE:.0%} of its CPU time in the kernel, at "
        f"{hostmem.PAGE_FAULTS_PER_STEP:,} or more "
        "minor page faults per step: each step faulted its temporaries in afresh, which huge "
        "pages for malloc avoid (on the project's 2-core host large CPU models ran 1.17-1.20x "
        "faster with them); measure with paradnn's commands or a sweep (their processes ask "
        "for huge pages), or start Python with GLIBC_TUNABLES=glibc.malloc.hugetlb=1")),
    "contended": Flag("provenance", (
        "other processes kept CPU cores (or the device) busy during the timed calls "
        "(host_other_busy_cores, device_other_processes): the step time is this platform's "
        "under that load, slower than on a quiet host; measure again on a quiet host to "
        "publish the platform's own figure")),
    "clocks_limited": Flag("provenance", (
        f"the GPU's power limit or temperature held its clocks down for {gpuclocks.LIMITED_SHARE:.0%} or more "
        "of the timed window (NVML): the board's sustained rate at its limit, below the boost clock's")),
    "peak_spread_above_target": Flag("provenance", (
        "the peak this utilization divides by spread more than the probe's default contention "
        "threshold (10%) over its own repetitions: a probe accepted under a raised "
        "PARADNN_PROBE_MAX_CV; the utilization is no more precise than that spread; re-probe on "
        "a quiet host (paradnn probe --refresh)")),
    "no_quiet_peak": Flag("provenance", (
        "no usable peak for this run: only contended probes of this host are on record and no "
        "nominal peak could be computed (or, on an accelerator, no vendor entry and no quiet "
        "probe), so no utilization was computed; run paradnn probe --refresh on a quiet host")),
    "ledger_faster_than_roof": Flag("physics", (
        "in the time ledger, operations ran faster than their compute bound (FLOPs / peak) by "
        "more than 5% of the step time: the peak is too low for them (a nominal or measured "
        "peak below the host's fastest library) or the operations' FLOP counts include work "
        "that was not done")),
    "ledger_counts_disagree": Flag("physics", (
        "in the time ledger, the analytic (useful) FLOPs exceed those the profiled operations "
        "executed by more than 5% of the step time (extra work negative) although every "
        "counted operation appeared in the profile: one of the two counts is wrong")),
    "flops_count_changed": Flag("physics", (
        "the analytic FLOP count (model_flops_per_step) of this run was made by an older rule "
        "than others read with it: its family's flops_count_rule is older than the newest among "
        "the family's rows, or its count differs from that of a later run of the same "
        "workload, framework and family implementation. A paradnn revision changed how the "
        "family is counted (paradnn_revision names each row's), so the rows' utilizations use "
        "two conventions and are not comparable; raised "
        "where rows are read together (the report, the figures), not stored. Measure the "
        "config again with this paradnn (into a new store: a resumed sweep keeps a row whose "
        "key it has) and leave the older row out")),
    "unstable": Flag("precision", (
        "the timed calls missed the precision target of the stopping rule within the time "
        "budget (stable false: step_time_ci_halfwidth above ci_target, or step_time_cv above "
        "cv_target under stop_rule cv): the step time's interval is wider than asked; measure "
        "again with a longer time_budget_s (paradnn status writes the sweep file)")),
}


#: Codes raised where rows are read together (``paradnn.analysis.columns.warning_lists``), from
#: what several rows say, never by :func:`record_warnings` and never stored.
READ_WARNINGS: tuple[str, ...] = ("flops_count_changed",)


def warning_kind(code: str) -> str | None:
    """The kind (:data:`WARNING_KINDS`) of warning ``code``; None for a code this version does
    not know (a row written by a newer paradnn)."""
    flag = WARNINGS.get(code)
    return flag.kind if flag is not None else None


#: Tolerance of ``flops_mismatch``: useful over executed FLOPs must lie in this range, once the
#: executed side is granted the analytic estimate of its non-matmul work (:func:`flops_mismatch`).
FLOPS_RATIO_RANGE = (0.8, 1.25)


def flops_mismatch(metrics: dict[str, Any]) -> bool:
    """Whether a record's executed FLOPs disagree with the analytic count, comparing like with
    like: the analytic matmul/convolution count ``m`` (``model_flops_per_step``) explains an
    executed count ``x`` from ``m / 1.25`` (a framework that counts fewer products) up to
    ``(m + e) / 0.8``, where ``e`` (``elementwise_flops_per_step``) estimates the optimizer's
    and element-wise work that XLA counts and torch's matmul counter does not. In terms of
    ``useful_flops_ratio`` ``r = m / x``: flagged when ``r > 1.25`` or ``r < 0.8 * m / (m + e)``.
    Without ``e`` (rows of older versions, zoo models at other sizes) ``e = 0``: the plain
    ratio range."""
    ratio = metrics.get("useful_flops_ratio")
    if ratio is None:
        return False
    useful, extra = metrics.get("model_flops_per_step"), metrics.get("elementwise_flops_per_step")
    share = useful / (useful + extra) if useful and extra and useful > 0 and extra > 0 else 1.0
    return not FLOPS_RATIO_RANGE[0] * share <= ratio <= FLOPS_RATIO_RANGE[1]


#: Sources of a peak that bound what a run can reach (a vendor datasheet, a quiet probe): only
#: these make a point above them a physics error; a nominal or loaded figure is a note.
TRUSTED_SOURCES = ("spec", "measured")


def record_warnings(metrics: Mapping[str, Any], devices: int = 1,
                    peak_spread_limit: float | None = None) -> list[str]:
    """The :data:`WARNINGS` codes that a measured record's metrics raise (empty if none), of
    every kind; peaks in ``metrics`` are per device, achieved FLOP/s over all ``devices``;
    ``peak_spread_limit`` (1: the probe's default contention threshold on its GEMM's spread,
    ``paradnn.hardware.PROBE_MAX_CV``) is what the peak's own spread is held to: a probe above
    it was accepted only under a raised ``PARADNN_PROBE_MAX_CV``.
    A bound that is not trusted (:data:`TRUSTED_SOURCES`: a nominal peak, a bandwidth from a
    loaded probe) raises a provenance note where a trusted one would raise a physics error."""
    codes = []
    source = metrics.get("peak_source")
    trusted_peak = source in TRUSTED_SOURCES
    if source == "none":
        codes.append("no_quiet_peak")
    if source == "nominal":
        codes.append("nominal_peak")
    spread = metrics.get("peak_spread")
    if peak_spread_limit is not None and spread is not None and spread > peak_spread_limit:
        codes.append("peak_spread_above_target")
    utilizations = (metrics.get("flops_utilization"), metrics.get("model_flops_utilization"))
    if any(u is not None and u > 1.0 for u in utilizations):
        codes.append("utilization_above_1" if trusted_peak else "above_nominal_peak")
    against_ceiling = (metrics.get("ceiling_utilization"), metrics.get("model_ceiling_utilization"))
    if any(u is not None and u > 1.0 for u in against_ceiling):
        codes.append("above_ceiling")
    ceiling = metrics.get("ceiling_flops")
    if (source == "spec" and ceiling is not None
            and metrics.get("peak_flops") is not None and ceiling > metrics["peak_flops"]):
        codes.append("peak_below_ceiling")
    intensity, bandwidth = metrics.get("arithmetic_intensity"), metrics.get("peak_bytes_per_sec")
    peak, achieved = metrics.get("peak_flops"), metrics.get("flops_per_sec")
    if None not in (intensity, bandwidth, achieved):
        trusted_bandwidth = metrics.get("peak_bytes_source", source) in TRUSTED_SOURCES
        roof = [intensity * bandwidth] if trusted_bandwidth else []
        if trusted_peak and peak is not None:
            roof.append(peak)
        if roof and achieved > min(roof) * devices:
            codes.append("above_roof")
        elif not trusted_bandwidth and achieved > intensity * bandwidth * devices:
            codes.append("roof_under_load")
    if flops_mismatch(metrics):
        codes.append("flops_mismatch")
    codes += ledger_warnings(metrics, trusted_peak)
    if hostmem.faulted_in_each_step(metrics):
        codes.append("page_faults")
    if metrics.get("contended"):
        codes.append("contended")
    if gpuclocks.held_down(metrics):
        codes.append("clocks_limited")
    if metrics.get("stable") is False:
        codes.append("unstable")
    return codes


#: Fraction of the step time by which a time-ledger figure may break a bound before it is
#: flagged: per-operation times come from a profile of other steps than the timed ones.
LEDGER_SLACK = 0.05


def ledger_warnings(metrics: Mapping[str, Any], trusted_peak: bool) -> list[str]:
    """The time ledger's :data:`WARNINGS` codes: operations beating a trusted compute bound
    (a nominal peak is no bound: boost clocks pass it), and an analytic count above the
    executed one where every counted operation was profiled."""
    step = metrics.get("step_time_s")
    if not metrics.get("ledger_split") or not step:
        return []
    codes = []
    faster = metrics.get("ledger_faster_than_roof_s")
    if trusted_peak and faster is not None and faster < -LEDGER_SLACK * step:
        codes.append("ledger_faster_than_roof")
    extra, matched = metrics.get(ledger_metric("extra")), metrics.get("ledger_flops_matched")
    if (extra is not None and extra < -LEDGER_SLACK * step
            and matched is not None and matched >= 0.99):
        codes.append("ledger_counts_disagree")
    return codes


def peak_and_ceiling(m: Mapping[str, Any]) -> str:
    """What a record's utilizations divide by, in words with units and sources, from its
    ``peak_flops``, ``peak_source``, ``peak_method``, ``peak_id``, ``ceiling_flops`` and
    ``ceiling_id`` (a record's metrics, a stored row; absent or NaN values are unknown), e.g.
    ``peak 989 TFLOP/s (spec: vendor table: NVIDIA H100 80GB HBM3), ceiling 795 TFLOP/s
    (measured, probe 1a2b3c4d5e6f)``; on a CPU ``peak 199 GFLOP/s (measured, probe ...),
    ceiling: the same probe``. A row written before ceilings were recorded says so."""
    def value(name: str) -> Any:
        v = m.get(name)
        return None if v is None or (isinstance(v, float) and v != v) else v

    def one(flops: Any, source: Any, method: Any, id_: Any) -> str:
        if flops is None:
            return "n/a (no usable probe on record)"
        if source == "spec":
            return f"{si(flops, 'FLOP/s')} (spec: {method})"
        return f"{si(flops, 'FLOP/s')} (measured" + (f", probe {id_})" if id_ else ")")

    peak = one(value("peak_flops"), value("peak_source"), value("peak_method"), value("peak_id"))
    if not value("ceiling_method"):  # every record since ceilings exist says how it got one
        return f"peak {peak}, ceiling not recorded"
    if value("ceiling_id") == value("peak_id"):
        return f"peak {peak}, ceiling: the same probe"
    return f"peak {peak}, ceiling {one(value('ceiling_flops'), 'measured', None, value('ceiling_id'))}"


def is_retry(row: Mapping[str, Any]) -> bool:
    """Whether a stored row (a record's ``to_dict()``, a DataFrame row) is a new attempt at a
    config whose earlier row missed its precision target: it names that row (``retry_of``: its
    ``time_utc``), or, for rows written before ``retry_of`` existed, it is a sweep's automatic
    retry: it ran with a longer time budget (``time_budget_used_s``) than its settings name
    (``time_budget_s``, the one the sweep asked for)."""
    if isinstance(row.get("retry_of"), str) and row.get("retry_of"):
        return True
    try:
        return float(row.get("time_budget_used_s")) > float(row.get("time_budget_s")) * (1 + 1e-9)
    except (TypeError, ValueError):
        return False  # not recorded (older rows, predicted rows): not a retry


def unstable_ok(row: Mapping[str, Any]) -> bool:
    """An ok row whose timing missed its precision target (``stable`` false; unknown is not)."""
    stable = row.get("stable")
    return row.get("status") == "ok" and isinstance(stable, (bool, int, float)) and stable == 0


def superseded(rows: Sequence[Mapping[str, Any]]) -> set[int]:
    """The positions in ``rows`` (stored rows) of the attempts a later attempt replaced: a
    config (a record ``key``) measured again because its row missed its precision target keeps
    one row, the newer. A retry names the row it replaces (``retry_of``: that row's
    ``time_utc``, or ``key@time_utc`` where a remeasurement under other settings replaced a row
    of another key); a retry of an older version (:func:`is_retry` without ``retry_of``)
    replaces the newest earlier unstable ok row of its key that nothing replaced yet. Rows a
    config was asked to have several of (``repeat``) are not attempts of each other: each
    stays."""
    by_key: dict[Any, list[int]] = {}
    at: dict[tuple[str, str], int] = {}
    for i, row in enumerate(rows):
        by_key.setdefault(row.get("key"), []).append(i)
        at[(str(row.get("key")), str(row.get("time_utc")))] = i
    out: set[int] = set()
    for row in rows:
        named = row.get("retry_of")
        if isinstance(named, str) and "@" in named:
            key, _, when = named.rpartition("@")
            if (key, when) in at:
                out.add(at[(key, when)])
    for positions in by_key.values():
        if len(positions) < 2:
            continue
        order = sorted(positions, key=lambda i: str(rows[i].get("time_utc")))
        when = {str(rows[i].get("time_utc")): i for i in order}
        for n, i in enumerate(order):
            row = rows[i]
            if not is_retry(row):
                continue
            named = row.get("retry_of")
            if isinstance(named, str) and "@" in named:
                continue  # named above
            if isinstance(named, str) and named in when:
                out.add(when[named])
                continue
            earlier = [j for j in order[:n] if j not in out and not is_retry(rows[j]) and unstable_ok(rows[j])]
            if earlier:
                out.add(earlier[-1])
    return out


def warning_codes(value: Any, kind: str | None = None) -> list[str]:
    """The codes of a row's ``warnings`` field (comma-separated; None, NaN or "" for none),
    only those of ``kind`` (a :data:`WARNING_KINDS` key) when given."""
    if not isinstance(value, str) or not value:
        return []
    return [code for code in value.split(",") if code and (kind is None or warning_kind(code) == kind)]

PLATFORM_FIELDS = ("device_platform", "device_kind", "device_count", "host", "cpu_model")
#: Software fields of every record whatever its framework (``paradnn.hardware.software_info``
#: and ``Backend.software_info``'s ``framework_version``); ``paradnn_revision`` is recorded too
#: but left out of the key.
CORE_SOFTWARE_FIELDS = ("paradnn_version", "framework_version", "python_version")


#: Software field of the records made where a plugin replaced a built-in framework or family
#: (``frameworks.register(..., replaces=True)``, ``families.register(..., replaces=True)``): which
#: ones, and the module that registered each (``framework jax: mylab.fastjax; family fc:
#: mylab.fc``). Part of the key (another implementation is another config), and absent where
#: nothing was replaced, so that rows of the built-ins keep the keys they always had and old
#: stores resume. A family replaced in a process marks the records of every family there: a
#: record's software is its framework's (:func:`paradnn.runner.context`), not its family's.
REPLACED_BY = "replaced_by"


def replaced_by(framework: str) -> dict[str, str]:
    """``{REPLACED_BY: text}`` for the records of ``framework`` made in this process, or ``{}``
    where no plugin replaced ``framework`` or any built-in family."""
    parts = []
    module = frameworks.replaced_by(framework)
    if module is not None:
        parts.append(f"framework {framework}: {module}")
    parts += [f"family {name}: {module}" for name, module in families.replaced().items()]
    return {REPLACED_BY: "; ".join(parts)} if parts else {}


def _software_columns() -> tuple[str, ...]:
    versions = [f for name in frameworks.names() for f in frameworks.meta(name).version_fields]
    return tuple(dict.fromkeys(("paradnn_version", "framework_version", *versions, "python_version")))


#: The software columns every stored row has (None where its framework does not set them): the
#: core fields and every registered framework's ``FrameworkInfo.version_fields``, read at each
#: use. A framework's other software fields are columns of its own rows.
SOFTWARE_FIELDS = families.FieldsView(_software_columns)


def record_key(workload: dict[str, Any], platform: dict[str, Any], software: dict[str, Any],
               settings: dict[str, Any]) -> str:
    """The identity of a run for resume and deduplication: workload + platform + software +
    settings (16 hex digits, :func:`paradnn.workload.stable_hash`).

    ``host`` is left out so that the same run on two identical machines dedups as one
    configuration measured twice is not lost: ``merge`` keys rows on ``key`` + ``time_utc``.
    ``paradnn_revision`` (the source commit, "+dirty" after any edit) is left out too, so a
    sweep resumes across commits and edits of paradnn; every row still stores it. So are the
    settings that do not change the timed calls (``measure.UNKEYED_SETTINGS``: ``ledger``). Options of
    frameworks other than the workload's are left out of the settings (a settings dict of
    every framework's options, as a sweep predicts keys with, gives the record's key).
    """
    platform = {k: v for k, v in platform.items() if k != "host"}
    software = {k: v for k, v in software.items() if k != "paradnn_revision"}
    settings = {k: v for k, v in settings.items() if k not in UNKEYED_SETTINGS}
    framework = workload.get("framework")
    if framework in frameworks.names():
        others = set(frameworks.option_names()) - set(frameworks.option_names(framework))
        settings = {k: v for k, v in settings.items() if k not in others}
    return stable_hash([workload, platform, software, settings])


def row_key(row: Mapping[str, Any], settings: bool = True) -> str | None:
    """The key the current schema gives a stored row (a flat ``Record.to_dict()``), rebuilt
    from its columns: the workload's fields, the platform, the core software fields and those
    of its framework (``FrameworkInfo.software_fields``), the protocol settings and its
    framework's options (without them when ``settings`` is False: the identity of the
    computation on its platform and software, whatever the protocol, :func:`record_key` with
    ``{}`` for the settings). None for a row whose family or framework is not registered here,
    or that is not a model's (operator, collective and infeed rows have no framework)."""
    framework, family = row.get("framework"), row.get("family")
    if framework not in frameworks.names() or family not in families.names():
        return None
    fields = ("family", *families.get(family).fields(), "batch", "dtype", "optimizer", "devices", "framework")
    if any(f not in row for f in fields):
        return None
    software_names = (*CORE_SOFTWARE_FIELDS, *frameworks.meta(framework).software_fields)
    setting_names = (*PROTOCOL_FIELDS, *frameworks.option_names(framework))
    software = {f: row[f] for f in software_names if f in row}
    # Keyed only where set: a table of rows (a store's frame) has the column as NaN or None on
    # the rows of built-ins, whose records never had the field.
    if isinstance(row.get(REPLACED_BY), str) and row[REPLACED_BY]:
        software[REPLACED_BY] = row[REPLACED_BY]
    return record_key({f: row[f] for f in fields},
                      {f: row.get(f) for f in PLATFORM_FIELDS},
                      software,
                      {f: row[f] for f in setting_names if f in row} if settings else {})


class FrozenDict(dict):
    """A read-only dict: the mapping fields of a frozen :class:`Record` (and of other frozen
    values). It is a ``dict`` (``json.dumps``, ``isinstance(x, dict)``, ``{**x}`` and pandas
    work as before) whose mutating methods raise TypeError; it pickles as a plain dict rebuilt
    through the constructor, because records cross process pipes and Ray (an unpickler fills
    a dict subclass with ``__setitem__``, which would raise here)."""

    __slots__ = ()

    def _readonly(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a record's fields are read-only: Record.with_metrics(...) or "
                        "dataclasses.replace(record, ...) builds a changed copy")

    __setitem__ = __delitem__ = __ior__ = _readonly  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self  # immutable: a copy is the same value

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return type(self)({k: copy.deepcopy(v, memo) for k, v in self.items()})


#: The metrics a record's table in a notebook shows (:meth:`Record._repr_html_`), where it has them.
SUMMARY_METRICS = ("step_time_s", "examples_per_sec", "flops_per_sec", "flops_utilization",
                   "model_flops_utilization", "memory_peak_bytes")


def _frozen(value: Any) -> FrozenDict:
    return value if type(value) is FrozenDict else FrozenDict(value or {})


@dataclass(frozen=True)
class Record:
    """One run, a value: ``status`` is one of ``STATUSES``; metrics are absent (None) unless
    measured. Frozen, its mappings read-only (:class:`FrozenDict`) and ``warnings`` a tuple:
    a record is what was measured when it was made, so no later step patches it in place;
    :meth:`with_metrics` (or ``dataclasses.replace``) returns a changed copy."""

    status: str
    workload: Mapping[str, Any]  # Workload.to_dict(): family, hyperparameters, batch, dtype, ...
    platform: Mapping[str, Any]  # PLATFORM_FIELDS
    software: Mapping[str, Any]  # CORE_SOFTWARE_FIELDS + the framework's software_fields
    settings: Mapping[str, Any]  # MeasureSettings.to_dict(framework): protocol + its options
    metrics: Mapping[str, Any] = field(default_factory=FrozenDict)
    error: str | None = None
    tags: Mapping[str, Any] = field(default_factory=FrozenDict)  # model tags, e.g. kind=real
    warnings: tuple[str, ...] = ()  # WARNINGS codes this record fails
    time_utc: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat())
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        # Copies, so that a caller's dict changed later does not change the record; the only
        # writes to a frozen dataclass are these, in its own construction.
        for name in ("workload", "platform", "software", "settings", "metrics", "tags"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "warnings", tuple(self.warnings or ()))

    def with_metrics(self, updates: Mapping[str, Any] | None = None, /,
                     **more: Any) -> Record:
        """A copy of this record with its metrics updated by ``updates`` and ``more`` (later
        wins); every other field, ``time_utc`` included, is kept."""
        return dataclasses.replace(self, metrics={**self.metrics, **(updates or {}), **more})

    @property
    def workload_key(self) -> str:
        """Identity of the computation: spec + batch + dtype + optimizer + devices."""
        return stable_hash(self.workload)

    @property
    def key(self) -> str:
        """Identity for resume and deduplication: :func:`record_key` of the record's workload,
        platform, software and settings."""
        return record_key(self.workload, self.platform, self.software, self.settings)

    def to_dict(self) -> dict[str, Any]:
        """The flat row: identity, status, workload fields, platform, software, settings, metrics."""
        row: dict[str, Any] = {
            "key": self.key,
            "workload_key": self.workload_key,
            "status": self.status,
            "error": self.error,
            "time_utc": self.time_utc,
            "schema_version": self.schema_version,
            "kind": self.tags.get("kind", "generated"),
            "task": self.tags.get("task"),  # real models: vision, detection, translation, ...
            "warnings": ",".join(self.warnings),
        }
        row.update(self.workload)
        row.update(self.platform)
        row.update(self.software)
        row.update(self.settings)
        row.update({name: self.metrics.get(name) for name in METRICS})
        row.update({k: v for k, v in self.metrics.items() if k not in METRICS})
        return row

    def _repr_html_(self) -> str:
        """The record as a small HTML table, which Jupyter shows for a record: status, workload,
        framework, platform, the :data:`SUMMARY_METRICS` it has (with their units, from
        :data:`METRICS`), warnings, the error and when it ran. Every value is HTML-escaped."""
        platform = self.platform
        framework = self.workload.get("framework")
        version = self.software.get("framework_version")
        rows = [("status", self.status), ("workload", short_name(self.workload)),
                ("framework", f"{framework} {version}" if version else framework),
                ("platform", f"{platform.get('device_count')} x {platform.get('device_kind')} "
                             f"({platform.get('device_platform')})")]
        for name in SUMMARY_METRICS:
            value, unit = self.metrics.get(name), METRICS[name][0]
            if value is not None:
                rows.append((name, f"{value:.1%}" if unit == "1" else si(value, unit)))
        if self.warnings:
            rows.append(("warnings", ", ".join(self.warnings)))
        if self.error:
            rows.append(("error", self.error))
        rows.append(("time_utc", self.time_utc))
        body = "".join(f"<tr><th style=\"text-align:left\">{html.escape(str(k))}</th>"
                       f"<td style=\"text-align:left\">{html.escape(str(v))}</td></tr>" for k, v in rows)
        return f"<table><caption>paradnn Record {html.escape(self.key)}</caption>{body}</table>"

    @classmethod
    def failed(cls, workload: Workload, status: str, error: str, **context: Any) -> "Record":
        """A record for a run that did not produce metrics (oom, error, timeout, crashed)."""
        assert status in STATUSES and status not in ("ok", PREDICTED), status
        return cls(status=status, workload=workload.to_dict(), error=error, **context)
