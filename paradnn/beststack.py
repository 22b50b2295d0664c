"""The platform at its best stack: the framework setting ``best``.

``framework="best"`` (``paradnn run --framework best``) measures a workload with the installed
framework that trains its family fastest on this platform, never silently: JAX/XLA stays the
default and the reference, and ``best`` is the user's explicit choice. Which framework wins is
decided by a short measured **calibration**: the workload asked for is timed under every
installed framework that can build it, each in a child process of its own (TensorFlow and
PyTorch must not share a process), in interleaved rounds (``jax, tensorflow, torch, jax, ...``)
so that a host whose load changes during the calibration slows every candidate alike; each
candidate's best round counts. The reference framework is kept unless another is faster by more
than :data:`MARGIN` (a closer result is noise on a busy host, and the reference is what numbers
are compared with).

The calibration is stored and reused: ``$PARADNN_CACHE/best_stack.json`` (next to the probe
cache, :data:`paradnn.hardware.CACHE_PATH`), keyed by the platform (host, CPU model and
affinity, device platform, kind and count as the reference framework sees them), the family,
the installed versions of paradnn and every candidate framework, the candidates' options and the
reference framework's software fields (for JAX: what each ``xla_preset`` means, so a preset
whose meaning changed calibrates again): a new jaxlib or torch, another host or device, or other
options calibrate again. ``refresh=True`` (``--refresh-best``) always does.

Every record of a ``best`` run carries two metrics beside its measurement: ``framework_choice``
(``"best"``) and ``best_calibration``, the calibration it came from as JSON text (its id and
time, the config timed, each candidate's examples/s or why it could not run, the winner and the
rule). The record's own ``framework`` names the framework that ran, so its key and its
comparisons are those of a plain run of that framework.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

from paradnn import families, hostmem
from paradnn import frameworks as registry  # "frameworks" is also a parameter here (the candidates)
from paradnn.errors import InfrastructureError, SpecError
from paradnn.settings import one_of

#: The framework setting that asks for the platform's best stack.
BEST = "best"
#: The relative speed another framework must exceed the reference's by to be chosen (0.03: 3%
#: faster); within it the reference (``paradnn.frameworks.DEFAULT``) is kept.
MARGIN = 0.03
#: Calibration rounds: each candidate is timed this many times, interleaved with the others.
ROUNDS = 2
#: Seconds of warm-up and timed calls per candidate and round (the timing protocol's
#: ``time_budget_s`` of the calibration's runs; a workload's own run keeps the user's settings).
CALIBRATION_BUDGET_S = 2.0
#: Seconds one child may take (start, compile, time, exit) before it counts as failed.
CHILD_TIMEOUT_S = 600.0
#: Python distributions whose versions change a framework's speed (part of the cache key).
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "jax": ("jax", "jaxlib"), "tensorflow": ("tensorflow",), "torch": ("torch",)}


def cache_path() -> Path:
    """The calibration cache: ``best_stack.json`` in the probe cache's folder."""
    from paradnn.hardware import CACHE_PATH

    return CACHE_PATH.parent / "best_stack.json"


def candidates(workload_or_spec: Any) -> list[str]:
    """The registered frameworks that can build ``workload_or_spec`` (a Workload or a model
    spec), the reference (``paradnn.frameworks.DEFAULT``) first. Whether each is installed is found by
    its calibration child (importing them all here could clash)."""
    spec = getattr(workload_or_spec, "spec", workload_or_spec)
    usable = families.of(spec).frameworks_for(spec)
    names = [n for n in registry.names() if n in usable]
    return sorted(names, key=lambda n: n != registry.DEFAULT)


def versions(frameworks: list[str]) -> dict[str, str | None]:
    """Installed versions of paradnn and of ``frameworks``' distributions (None: not
    installed), read from package metadata without importing any framework."""
    out: dict[str, str | None] = {}
    for dist in ("paradnn", *(d for f in frameworks for d in DISTRIBUTIONS.get(f, ()))):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def platform_key(platform: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a platform (``paradnn.runner.context``'s) that make a calibration apply."""
    return {k: platform.get(k) for k in ("host", "cpu_model", "device_platform", "device_kind", "device_count")}


def cache_key(platform: Mapping[str, Any], family: str, frameworks: list[str],
              options: Mapping[str, Mapping[str, Any]] | None = None,
              reference_software: Mapping[str, Any] | None = None) -> str:
    """The calibration cache key: platform, family, candidate frameworks, their versions,
    ``options`` (framework -> its options as the candidates ran: a calibration under another
    torch_compile mode or cpu_allocator is another calibration) and ``reference_software`` (the
    reference framework's ``FrameworkInfo.software_fields`` as its runs report them: what its
    options mean, e.g. JAX's ``xla_compile_options``)."""
    text = json.dumps({"platform": platform_key(platform), "family": family, "frameworks": frameworks,
                       "versions": versions(frameworks), "options": options or {},
                       "reference_software": reference_software or {}}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@contextmanager
def _locked() -> Iterator[None]:
    # Two calibrations at once would each time the other's load; the second one waits and
    # then finds the first one's result.
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_suffix(".lock"), "a")
    except OSError as exc:
        raise InfrastructureError(f"the best-stack calibration cache folder {path.parent} cannot be written "
                                  f"({exc}); set PARADNN_CACHE to a writable folder") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read() -> dict[str, Any]:
    try:
        cache = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


def cached(key: str) -> dict[str, Any] | None:
    """The stored calibration under ``key``, or None."""
    entry = _read().get(key)
    return entry if isinstance(entry, dict) else None


def time_in_child(workload: Any, settings: Any) -> dict[str, Any]:
    """Measure ``workload`` (a Workload) with ``settings`` (MeasureSettings, the workload's
    framework's options only) in a fresh Python process; returns ``status``,
    ``examples_per_sec`` (examples/s, None unless ok), ``error`` and the child's ``platform``
    and ``framework_version``. A child that cannot start its framework or crashes is a
    ``status`` "error" with the reason, never an exception."""
    request = json.dumps({"workload": workload.to_dict(), "settings": settings.to_dict(workload.framework)})
    try:
        done = subprocess.run([sys.executable, "-m", "paradnn.beststack"], input=request, capture_output=True,
                              text=True, timeout=CHILD_TIMEOUT_S,
                              env={**os.environ, **hostmem.child_env(os.environ)})
    except subprocess.TimeoutExpired:
        return {"status": "error", "examples_per_sec": None, "error": f"timed out after {CHILD_TIMEOUT_S:g} s"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = " ".join((done.stderr or "").split()[-40:])
        return {"status": "error", "examples_per_sec": None, "error": f"exit {done.returncode}: {tail}"}
    return json.loads(lines[-1])


def _child_main() -> int:
    # The calibration child: one workload in (JSON on stdin), one line of JSON out.
    from paradnn.measure import MeasureSettings
    from paradnn.workload import Workload, spec_from_dict

    request = json.loads(sys.stdin.read())
    w = dict(request["workload"])
    fields = ("batch", "dtype", "optimizer", "devices", "framework")
    rest = {k: w.pop(k) for k in fields}
    workload = Workload(spec_from_dict(w), **rest)
    why = registry.available(workload.framework)
    if why is not None:
        print(json.dumps({"status": "unavailable", "examples_per_sec": None, "error": why}))
        return 0
    from paradnn.runner import run_workload

    record = run_workload(workload, MeasureSettings(**request["settings"]))
    print(json.dumps({"status": record.status, "error": record.error,
                      "examples_per_sec": record.metrics.get("examples_per_sec"),
                      "platform": platform_key(record.platform),
                      "framework_version": record.software.get("framework_version")}, default=str))
    return 0


def calibrate(workload: Any, settings: Any = None, refresh: bool = False, rounds: int = ROUNDS,
              frameworks: list[str] | None = None, budget_s: float = CALIBRATION_BUDGET_S) -> dict[str, Any]:
    """The calibration that chooses the best stack for ``workload``'s family on this platform:
    the stored one for this platform, family and versions, or (none stored, or ``refresh``) a
    new one, measured and stored. ``workload`` is a Workload (its framework is ignored: every
    candidate builds it); ``settings`` a MeasureSettings whose options apply to their own
    framework; ``budget_s`` the time budget (s) of each candidate's run per round; ``rounds``
    interleaved rounds (at least 1); ``frameworks`` the candidates (default :func:`candidates`).

    Returns ``id``, ``key``, ``measured_utc``, ``family``, ``platform``, ``versions``, ``options``,
    ``workload`` (the config timed), ``rounds``, ``examples_per_sec`` (framework -> its best
    round, examples/s, None where it could not run), ``errors`` (framework -> why not),
    ``chosen`` and ``rule``."""
    import dataclasses

    from paradnn.measure import MeasureSettings
    from paradnn.runner import context

    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise SpecError("rounds", rounds, "an integer >= 1")
    if not isinstance(budget_s, (int, float)) or isinstance(budget_s, bool) or not budget_s > 0:
        raise SpecError("budget_s", budget_s, "a number of seconds > 0")
    names = list(frameworks) if frameworks is not None else candidates(workload)
    for name in names:
        if name not in registry.names():
            raise SpecError("frameworks", name, one_of(registry.names(), "a registered framework"))
    if registry.DEFAULT not in names:
        raise SpecError("frameworks", names, f"a list that includes the reference framework {registry.DEFAULT}")
    platform, software = context(registry.DEFAULT)
    settings = (settings or MeasureSettings()).replace(time_budget_s=budget_s)
    options = {name: settings.options_for(name).to_dict() for name in names}
    meaning = {f: software.get(f) for f in registry.meta(registry.DEFAULT).software_fields}
    key = cache_key(platform, workload.family, names, options, meaning)
    with _locked():
        hit = None if refresh else cached(key)
        if hit is not None:
            return hit
        runs: dict[str, list[float]] = {n: [] for n in names}
        errors: dict[str, str] = {}
        for _ in range(rounds):
            for name in names:
                if name in errors:
                    continue
                result = time_in_child(dataclasses.replace(workload, framework=name), settings)
                if result.get("status") != "ok":
                    errors[name] = f"{result.get('status')}: {result.get('error')}"
                elif name != registry.DEFAULT and result.get("platform") != platform_key(platform):
                    # Another device (a CPU-only torch beside a GPU jax) is another platform.
                    errors[name] = (f"runs on another platform ({result.get('platform')}) than "
                                    f"{registry.DEFAULT} ({platform_key(platform)})")
                else:
                    runs[name].append(float(result["examples_per_sec"]))
        best = {n: (max(v) if v else None) for n, v in runs.items()}
        chosen, rule = choose(best)
        entry = {"id": key + "-" + datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"),
                 "key": key, "measured_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                 "family": workload.family, "platform": platform_key(platform), "versions": versions(names),
                 "workload": {k: v for k, v in workload.to_dict().items() if k != "framework"},
                 "options": options, "rounds": rounds, "time_budget_s": budget_s,
                 "examples_per_sec": best, "errors": errors, "chosen": chosen, "rule": rule}
        cache = _read()
        cache[key] = entry
        path = cache_path()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cache, indent=1, sort_keys=True, default=str))
        tmp.replace(path)
        return entry


def choose(examples_per_sec: Mapping[str, float | None]) -> tuple[str, str]:
    """(framework, rule) from each candidate's examples/s (None: could not run): the fastest,
    unless it beats the reference (``paradnn.frameworks.DEFAULT``) by no more than :data:`MARGIN`, then
    the reference. A reference that could not run leaves the fastest other."""
    ran = {n: v for n, v in examples_per_sec.items() if v}
    if not ran:
        raise InfrastructureError("best stack: no framework could run the calibration workload: "
                                  + ", ".join(examples_per_sec) + " all failed")
    fastest = max(ran, key=lambda n: ran[n])
    ref = ran.get(registry.DEFAULT)
    if ref is None:
        return fastest, f"fastest of those that ran ({registry.DEFAULT} could not)"
    if fastest != registry.DEFAULT and ran[fastest] > ref * (1 + MARGIN):
        return fastest, (f"fastest: {ran[fastest] / ref:.3f}x {registry.DEFAULT} (more than the "
                         f"{MARGIN:.0%} margin)")
    return registry.DEFAULT, (f"{registry.DEFAULT} (the reference): no other framework faster by more "
                              f"than {MARGIN:.0%}")


def resolve(workload: Any, settings: Any = None, refresh: bool = False) -> tuple[Any, dict[str, Any]]:
    """(the workload with the chosen framework, the calibration that chose it) for a
    ``workload`` asked to run at the best stack (its own ``framework`` is ignored)."""
    import dataclasses

    calibration = calibrate(workload, settings, refresh=refresh)
    return dataclasses.replace(workload, framework=calibration["chosen"]), calibration


def record_metrics(calibration: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics a record of a ``best`` run carries: ``framework_choice`` ("best") and
    ``best_calibration`` (the calibration, JSON text)."""
    return {"framework_choice": BEST,
            "best_calibration": json.dumps(calibration, sort_keys=True, separators=(",", ":"), default=str)}


def run_best(workload: Any, settings: Any = None, memory_limit_bytes: int | None = None,
             refresh: bool = False) -> Any:
    """Measure ``workload`` at the best stack: :func:`resolve`, then
    :func:`paradnn.runner.run_workload` with the chosen framework; its record carries
    :func:`record_metrics`. Options in ``settings`` apply to their own framework only."""
    chosen, calibration = resolve(workload, settings, refresh=refresh)
    return run_resolved(chosen, calibration, settings, memory_limit_bytes)


def run_resolved(chosen: Any, calibration: Mapping[str, Any], settings: Any = None,
                 memory_limit_bytes: int | None = None) -> Any:
    """Measure ``chosen`` (the workload :func:`resolve` gave, with its framework) and add
    :func:`record_metrics` of ``calibration`` to its record: the second half of
    :func:`run_best`, for a caller that does something between the two (the CLI sets up the
    chosen framework's compilation cache)."""
    from paradnn.measure import MeasureSettings
    from paradnn.runner import run_workload

    settings = settings or MeasureSettings()
    own = set(registry.option_names(chosen.framework))
    settings = MeasureSettings(options=tuple((k, v) for k, v in settings.options if k in own),
                               **{f: getattr(settings, f) for f in _protocol()})
    record = run_workload(chosen, settings, memory_limit_bytes)
    return record.with_metrics(record_metrics(calibration))


def _protocol() -> tuple[str, ...]:
    from paradnn.measure import PROTOCOL_FIELDS

    return PROTOCOL_FIELDS


__all__ = ["BEST", "CALIBRATION_BUDGET_S", "MARGIN", "ROUNDS", "cache_key", "cache_path", "cached", "calibrate",
           "candidates", "choose", "record_metrics", "resolve", "run_best", "run_resolved", "time_in_child", "versions"]


if __name__ == "__main__":
    sys.exit(_child_main())
