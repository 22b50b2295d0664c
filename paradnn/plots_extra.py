"""The old name of :mod:`paradnn.plots.resources`, kept so that users' code that imports it keeps
working; new code imports the figures from :mod:`paradnn.plots`."""

from paradnn.plots.resources import (  # noqa: F401
    ENERGY_METRICS, MAX_BARS, MEMORY_PARTS, UTILIZATION_METRICS, energy, memory_breakdown,
    model_names, utilization,
)
