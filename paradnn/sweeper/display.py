"""The sweep's progress line (:class:`Progress`) and the time estimates it rests on."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import IO, Any

import pandas as pd

from paradnn import progress as progress_lines
from paradnn.analysis.cost import estimate
from paradnn.record import STATUSES, Record
from paradnn.sweeper.estimates import retry_estimate_s, retry_would_help
from paradnn.units import duration
from paradnn.workload import Workload

__all__ = ["Progress", "progress_estimates"]


class Progress:
    """A one-line progress bar on a stream (stderr): done/total, counts by status, elapsed,
    ETA and the config running now.

    A line is written at once when the sweep starts (configs to measure, configs already in
    the store, and the estimated time). The bar is :class:`paradnn.progress.Bar` (tqdm): on a
    terminal redrawn in place, in Jupyter a widget; otherwise one line is written per started
    and per finished config, so logs of long sweeps show the history.

    ETA: with ``estimates`` (workload key -> estimated seconds of one measurement, from
    :func:`paradnn.analysis.cost.estimate`, the estimator ``paradnn plan`` uses) and ``planned`` (the
    measurements to make per workload key, repeats included, or a list of one key per measurement), the estimates of the measurements left, scaled by how long the
    finished ones took against their estimates; without them, the mean time per finished
    config times the configs left. With ``retry_bound_s`` (the sweep's ``retry_unstable_s``)
    and ``retry_budget_s`` (a retry's time budget), the line adds the automatic retries the
    finished configs call for (:func:`retry_would_help`), extrapolated to all configs and at
    most the bound: ``ETA 3m (+ retries ~40s)``.
    """

    def __init__(self, total: int, skipped: int, stream: IO[str] | None,
                 estimates: dict[str, float] | None = None,
                 planned: dict[str, int] | list[str] | None = None,
                 calibration: str | None = None, retry_bound_s: float = 0.0,
                 retry_budget_s: float = 0.0, frameworks: Collection[str] = ()):
        self.total, self.skipped, self.stream = total, skipped, stream
        self.bar = progress_lines.Bar(stream)  # the one progress display (tqdm)
        # The sweep's frameworks: a config is named with its framework where that tells configs
        # apart (progress_lines.config_name).
        self.frameworks = frozenset(frameworks)
        self.retry_bound_s, self.retry_budget_s = retry_bound_s, retry_budget_s
        self.retry_called_s = 0.0  # estimated seconds of the retries the finished configs call for
        self.counts = {s: 0 for s in STATUSES}
        self.done = 0
        self.missing = 0  # configs left unrecorded by infrastructure faults (Progress.miss)
        self.start = time.monotonic()
        self.estimates = dict(estimates or {})
        self.pending: dict[str, int] = {}
        if isinstance(planned, dict):
            self.pending.update(planned)
        else:
            for key in planned or []:
                self.pending[key] = self.pending.get(key, 0) + 1
        self.estimated_done = 0.0  # estimated seconds of the finished measurements
        self.running: str | None = None
        if stream is not None:
            total_s = self._remaining_estimate()
            estimate = ("" if not total else
                        f"; estimated {duration(total_s)} ({calibration})" if total_s is not None
                        else f"; no time estimate yet ({calibration})" if calibration else "")
            stream.write(f"paradnn sweep: {total} config(s) to measure, {skipped} already in the "
                         f"store (skipped: resume; --repeat N measures again){estimate}\n")
            stream.flush()

    @staticmethod
    def announce(stream: IO[str] | None, configs: int, source: str) -> None:
        """The first line, before the executor starts (a child process takes seconds)."""
        if stream is not None:
            where = "the grid" if source == "<grid>" else source
            stream.write(f"paradnn sweep: {configs} config(s) in {where}; starting the "
                         "executor and checking the store\n")
            stream.flush()

    def _remaining_estimate(self) -> float | None:
        """Estimated seconds of the measurements not finished, None without estimates."""
        if not self.estimates or not self.pending:
            return None
        known = [self.estimates[k] for k in self.pending if k in self.estimates]
        if not known:
            return None
        mean = sum(known) / len(known)  # for the few keys the time model could not estimate
        return sum(self.estimates.get(k, mean) * n for k, n in self.pending.items())

    def eta(self) -> float | None:
        """Estimated seconds left, None when nothing can be said yet."""
        elapsed = time.monotonic() - self.start
        remaining = self._remaining_estimate()
        if remaining is not None:
            if self.done and self.estimated_done > 0:
                remaining *= elapsed / self.estimated_done  # this host today vs the model
            return remaining
        if not self.done:
            return None
        return elapsed / self.done * (self.total - self.done)

    def retries_s(self) -> float:
        """Expected seconds of the automatic retries after the last config: those the finished
        configs call for, scaled to all configs, at most ``retry_bound_s``."""
        if not self.done or self.retry_bound_s <= 0:
            return 0.0
        return min(self.retry_bound_s, self.retry_called_s * max(self.total, self.done) / self.done)

    def text(self) -> str:
        """What the bar says beside the count: statuses, elapsed time, ETA, the config running."""
        elapsed = time.monotonic() - self.start
        eta = self.eta()
        counts = " ".join(f"{s} {n}" for s, n in self.counts.items() if n or s in ("ok", "oom",
                                                                                 "error"))
        if self.missing:
            counts += f" missing {self.missing}"
        running = f" | running {self.running}" if self.running else ""
        retries = self.retries_s()
        return (f"{counts} | elapsed {duration(elapsed)} ETA "
                f"{'?' if eta is None else duration(eta)}"
                f"{f' (+ retries ~{duration(retries)})' if retries > 0 else ''}{running}")

    def line(self) -> str:
        """The progress line as a log shows it: ``[###...] done/total | counts | ... ``."""
        return progress_lines.render(self.done, self.total, self.text())

    def begin(self, workload: Workload) -> None:
        """A config is handed to the executor: name it on the line."""
        self.running = progress_lines.config_name(workload, self.frameworks)
        self._draw()

    def _finish_key(self, key: str | None) -> None:
        if key is not None and self.pending.get(key):
            self.pending[key] -= 1
            if not self.pending[key]:
                del self.pending[key]
            self.estimated_done += self.estimates.get(key, 0.0)

    def update(self, record: Record | None) -> None:
        if record is not None:
            self.done += 1
            self.counts[record.status] = self.counts.get(record.status, 0) + 1
            self._finish_key(record.workload_key)
            if self.retry_bound_s > 0 and record.status == "ok":
                row = record.to_dict()
                if retry_would_help(row):
                    self.retry_called_s += retry_estimate_s(row, self.retry_budget_s)
            self.running = None
        self._draw()

    def miss(self) -> None:
        """A config an infrastructure fault left unrecorded: done here, counted as missing,
        and still in the total (it was not measured elsewhere, unlike a skipped one)."""
        self.done += 1
        self.missing += 1
        self.running = None
        self._draw()

    def skip(self, workload: Workload | None = None) -> None:
        """A config another sweep on the same store measured: one less to do here."""
        self.total -= 1
        if workload is not None and self.pending.get(workload.key):
            self.pending[workload.key] -= 1
            if not self.pending[workload.key]:
                del self.pending[workload.key]
        self._draw()

    def _draw(self) -> None:
        self.bar.show(self.done, self.total, self.text())

    def note(self, text: str) -> None:
        """Write ``text`` as a line of its own (a heartbeat); on a terminal the progress line
        is drawn again below it."""
        self.bar.note(text)

    def close(self) -> None:
        self.bar.close()


def progress_estimates(workloads: list[Workload], frame: pd.DataFrame, platform: dict[str, Any],
                       settings: Any, label: str = "the store") -> tuple[dict[str, float], str]:
    """Estimated seconds of one measurement of each workload (workload key -> s) from the store
    rows ``frame`` of ``platform``, for the progress line, and the sentence saying what the
    estimate rests on (``label`` names the store): :func:`paradnn.analysis.cost.estimate`, the
    estimator ``paradnn plan`` uses, so that both say the same for the same store and configs.
    Workloads without an estimate are left out (the progress line uses the mean of the others)."""
    if not len(frame) or not workloads:
        return {}, "no records of this platform in the store yet"
    est = estimate(frame, workloads, settings, platform, label=label)
    out = {w.key: float(s) for w, s in zip(workloads, est.table["wall_s"]) if s == s}
    return out, est.basis

