"""A sweep at the platform's best stack (the run setting ``best_stack``; ``framework: best`` in
a sweep file): before anything is measured, each family's framework is chosen by the
best-stack calibration (:mod:`paradnn.beststack`: measured once per platform, family and
versions, stored and reused), and every config of that family is measured with it. Every
record then names the framework that ran and carries the calibration that chose it
(``framework_choice``, ``best_calibration``), as a ``paradnn run --framework best`` record does.
"""

from __future__ import annotations

import dataclasses
from typing import IO, Any

from paradnn import beststack
from paradnn import frameworks as registry
from paradnn.errors import SpecError
from paradnn.record import FrozenDict, Record
from paradnn.sweeper.config import SweepConfig
from paradnn.workload import Workload, short_name


def resolve_best(config: SweepConfig, stream: IO[str] | None) -> SweepConfig:
    """``config`` with each config's framework chosen by its family's calibration and
    ``best_stack`` done: ``calibrations`` maps each config (its workload key) to the calibration that
    chose its framework. A config that names a framework other than the default is refused
    (SpecError): the calibration chooses. Unchanged when ``best_stack`` is off."""
    if not config.best_stack:
        return config
    named = [w for w in config.workloads if w.framework != registry.DEFAULT]
    if named:
        raise SpecError("best_stack", True, f"configs that leave framework at its default "
                        f"({registry.DEFAULT}): the calibration chooses it, and {short_name(named[0])} "
                        f"names {named[0].framework}")
    chosen: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    workloads, calibrations = [], {}
    for w in config.workloads:
        # One calibration per family and set of frameworks that can build the config (the
        # cache's own key): its first config is the one timed when none is stored.
        group = (w.family, tuple(beststack.candidates(w)))
        if group not in chosen:
            if stream is not None:
                stream.write(f"paradnn sweep: the best stack for {w.family} on this machine: "
                             f"{', '.join(group[1])} compared on {short_name(w)} (stored in "
                             f"{beststack.cache_path()}, measured now if not there)\n")
                stream.flush()
            chosen[group] = beststack.calibrate(w, config.settings)
            if stream is not None:
                c = chosen[group]
                stream.write(f"paradnn sweep: {w.family}: {c['chosen']} ({c['rule']}; calibration "
                             f"{c['id']})\n")
        calibration = chosen[group]
        w = dataclasses.replace(w, framework=calibration["chosen"])
        workloads.append(w)
        calibrations[w.key] = calibration
    return dataclasses.replace(config, workloads=tuple(workloads), best_stack=False,
                               calibrations=FrozenDict(calibrations))


def with_calibration(config: SweepConfig, workload: Workload, record: Record) -> Record:
    """``record`` (of ``workload``, one of ``config``'s) with the metrics of the calibration
    that chose its framework, where :func:`resolve_best` chose it."""
    calibration = config.calibrations.get(workload.key)
    return record if calibration is None else record.with_metrics(beststack.record_metrics(calibration))


__all__ = ["resolve_best", "with_calibration"]
