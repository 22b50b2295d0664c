"""The one estimate of what the automatic retry of unstable configs costs: which stored rows
call for a retry (:func:`retry_would_help`), a retry's time budget (:func:`retry_budget_s`) and
seconds (:func:`retry_estimate_s`), and what the retries add to a planned sweep
(:func:`expected_retries`). The sweep's retry loop, its progress line and ``paradnn plan`` all
read them here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from paradnn.grids.runsettings import RETRY_BUDGET_FACTOR
from paradnn.record import unstable_ok

__all__ = ["retry_budget_s", "retry_would_help", "retry_estimate_s", "expected_retries"]


def retry_budget_s(settings: Any) -> float:
    """The time budget (s) of an automatic retry under ``settings`` (a MeasureSettings):
    ``RETRY_BUDGET_FACTOR`` times its ``time_budget_s``, capped by the setting's own maximum
    (a day)."""
    return min(settings.time_budget_s * RETRY_BUDGET_FACTOR, max(settings.time_budget_s, 86_400.0))


def retry_would_help(row: Mapping[str, Any]) -> bool:
    """Whether the automatic retry would measure the config of stored row ``row`` again (before
    counting the time bound): an ok row whose timing missed its precision target and ended at
    its time budget on a quiet host. A timing that ended at ``max_calls`` is not retried: a
    longer budget would time the same calls again (a longer warm-up aside); nor is one measured
    while other processes kept the host busy (``contended``): its spread is the load's.
    ``paradnn plan`` and the progress line estimate the retries with it."""
    return (unstable_ok(row) and not _number(row.get("timed_calls")) >= _number(row.get("max_calls")) > 0
            and not row.get("contended"))


def _number(value: Any) -> float:
    """A stored number (seconds, a count), 0.0 where none was recorded."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    return value if value == value else 0.0


def retry_estimate_s(row: Mapping[str, Any], budget_s: float) -> float:
    """Seconds a retry of the config of stored row ``row`` should take: the row's own wall time
    (``phase_total_s``, else compile + timing) with its timing phase replaced by the longer
    budget (or by its own timing, when a slow model's minimum of calls outlasted the budget)."""
    timing = _number(row.get("timing_s"))
    wall = _number(row.get("phase_total_s")) or _number(row.get("compile_s")) + timing
    return max(wall - timing, 0.0) + max(budget_s, timing)


def expected_retries(rows: pd.DataFrame, todo: pd.DataFrame, bound_s: float) -> dict[str, Any]:
    """What the sweep's automatic retry of unstable configs should add to a plan:
    ``retry_bound_s`` (s, its ``retry_unstable_s``: ``bound_s``), ``retry_unstable_share`` (the
    share of the stored ok rows ``rows`` (of the plan's device kind) that the sweep would retry,
    :func:`retry_would_help`; None without rows) and ``retry_s`` (s): that share of the configs
    to measure ``todo`` (columns ``wall_s`` for all their measurements, ``to_measure`` and
    ``timing_s`` per measurement), each retried as :func:`retry_estimate_s` says (its wall time
    with its timing phase replaced by ``RETRY_BUDGET_FACTOR`` times its timing), at most the
    bound; 0 without a share or a time."""
    share = float(rows.apply(retry_would_help, axis=1).mean()) if len(rows) else None
    per_config = 0.0
    for wall, n, timing in zip(todo["wall_s"], todo["to_measure"], todo["timing_s"]):
        one = {"phase_total_s": wall / max(n, 1), "timing_s": timing}
        per_config += retry_estimate_s(one, RETRY_BUDGET_FACTOR * timing)
    expected = share * per_config if share and per_config == per_config else 0.0
    return {"retry_bound_s": bound_s, "retry_unstable_share": share, "retry_s": min(bound_s, expected)}
