"""``paradnn.sweep``: run a grid of workloads into a store, resumably, without losing a config.

The package is named ``sweeper``, not ``sweep``: ``paradnn.sweep`` is the public function
``paradnn.sweep(...)`` (``paradnn/__init__.py`` loads it lazily from here), and a subpackage
``paradnn.sweep`` would shadow it. Each module does one job:

* :mod:`~paradnn.sweeper.config`: :class:`SweepConfig`, a sweep resolved and checked; its
  run-setting fields are declared once in :mod:`paradnn.grids.runsettings`.
* :mod:`~paradnn.sweeper.loop`: :func:`sweep`, the loop: the platform check, resume keys,
  handing configs to the executor, the end summary.
* :mod:`~paradnn.sweeper.state`: what a run keeps (resume counts, its tally) and the commit of
  each record the moment it exists.
* :mod:`~paradnn.sweeper.retry`: the automatic retry of unstable configs.
* :mod:`~paradnn.sweeper.stacks`: a sweep at the platform's best stack (``best_stack``).
* :mod:`~paradnn.sweeper.estimates`: the one estimate of a retry's cost (also ``paradnn plan``'s).
* :mod:`~paradnn.sweeper.display`: the progress line and its time estimates.
"""

from __future__ import annotations

from paradnn.record import is_retry
from paradnn.sweeper.config import (
                                    DEFAULT_CACHE,
                                    DEFAULT_RETRY_UNSTABLE_S,
                                    DEFAULT_TIMEOUT_S,
                                    RETRY_BUDGET_FACTOR,
                                    SweepConfig,
                                    default_retry_unstable_s,
)
from paradnn.sweeper.display import Progress, progress_estimates
from paradnn.sweeper.estimates import expected_retries, retry_budget_s, retry_estimate_s, retry_would_help
from paradnn.sweeper.loop import check_platform, sweep
from paradnn.sweeper.retry import QUIET_WAIT_S, retry_unstable, wait_for_quiet

__all__ = ["sweep", "SweepConfig", "DEFAULT_TIMEOUT_S", "DEFAULT_CACHE",
           "DEFAULT_RETRY_UNSTABLE_S", "RETRY_BUDGET_FACTOR", "is_retry", "check_platform",
           "default_retry_unstable_s", "Progress", "progress_estimates", "expected_retries",
           "retry_budget_s", "retry_estimate_s", "retry_would_help", "QUIET_WAIT_S",
           "retry_unstable", "wait_for_quiet"]
