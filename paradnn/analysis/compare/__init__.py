"""Noise-aware comparison of two sets of records (being split into one module per job)."""

from paradnn.analysis.compare.frames import *  # noqa: F401,F403
