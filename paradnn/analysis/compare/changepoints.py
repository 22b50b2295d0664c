"""Change points over a history of versions of one config: binary segmentation with the tests of
:func:`~paradnn.analysis.compare.stats.compare_samples` (:func:`change_points`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from paradnn.analysis.compare.stats import LEVEL, Estimate, Side, compare_samples, side_noise
from paradnn.analysis.compare.verdicts import DEFAULT_ALPHA


def pool(sides: Sequence[Side]) -> Side:
    """One :class:`Side` of several (their runs together; samples only if every one has them)."""
    runs = None if any(s.run_samples is None for s in sides) else \
        tuple(r for s in sides for r in s.run_samples)
    return Side(runs, *(np.concatenate([getattr(s, name) for s in sides])
                        for name in ("medians", "ci_low", "ci_high", "cvs")))


@dataclass(frozen=True)
class Step:
    """A change point of one config's history: the first version after it (``index``), the
    ratio of the segment after it over the segment before (x, step time) with its interval,
    ``p`` (Bonferroni-corrected over the candidate splits of its segment) and the ``noise``
    floor of the versions around it (relative)."""

    index: int
    ratio: float
    ci_low: float
    ci_high: float
    p: float
    noise: float
    method: str


def change_points(versions: Sequence[Side], alpha: float = DEFAULT_ALPHA,
                  level: float = LEVEL) -> list[Step]:
    """Change points of one config measured at successive ``versions`` (oldest first), by
    binary segmentation: in a segment, every split into "before" and "after" is tested
    (:func:`compare_samples` on the pooled runs of each part); the split with the smallest
    p-value is a change point when that p, times the number of splits tried (Bonferroni), is
    below ``alpha`` and the change exceeds the noise floor of the versions around it (the
    largest own spread of one version, so a step between versions is not taken for noise);
    each part is then segmented again. This is asv's step detection idea with the tests of
    :func:`compare_samples`; steps across configs are corrected together by the caller."""
    steps: list[Step] = []
    own = [side_noise(v) for v in versions]

    def segment(s: int, e: int) -> None:
        if e - s < 2:
            return
        best: tuple[float, float, int, Estimate] | None = None
        for t in range(s + 1, e):
            est = compare_samples(pool(versions[s:t]), pool(versions[t:e]), level)
            if not np.isfinite(est.p):
                continue
            rank = (est.p, -abs(math.log(est.ratio)))
            if best is None or rank < best[:2]:
                best = (*rank, t, est)
        if best is None:
            return
        p, _, t, est = best
        p = min(1.0, p * (e - s - 1))
        floor = max((v for v in own[s:e] if np.isfinite(v)), default=0.0)
        if p < alpha and abs(math.log(est.ratio)) > math.log1p(floor):
            steps.append(Step(t, est.ratio, est.ci_low, est.ci_high, p, floor, est.method))
            segment(s, t)
            segment(t, e)

    segment(0, len(versions))
    return sorted(steps, key=lambda st: st.index)
