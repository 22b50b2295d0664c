"""One function per figure kind; each takes an analysis output (or a results DataFrame) and
returns a matplotlib Figure one report page wide.

Figures are built with the object-oriented API on an Agg canvas: no pyplot state, no display
needed, safe in threads and headless jobs. In Jupyter, a returned Figure displays itself; save
one with ``fig.savefig("f.png", dpi=plots.DPI_2X)``. Every axis label carries its unit.

The modules: :mod:`~paradnn.plots.style` (page width, fonts, colours, markers, axis helpers),
then one per kind of figure: :mod:`~paradnn.plots.heatmaps`, :mod:`~paradnn.plots.sensitivities`,
:mod:`~paradnn.plots.rooflines` (model and operation level), :mod:`~paradnn.plots.speedups`,
:mod:`~paradnn.plots.ranges` (per family), :mod:`~paradnn.plots.saturations`,
:mod:`~paradnn.plots.resources` (memory, energy, utilization), :mod:`~paradnn.plots.infeeds`,
:mod:`~paradnn.plots.system` (scaling, collectives, ops), :mod:`~paradnn.plots.compare`
(the ratio heat map of ``paradnn compare``), :mod:`~paradnn.plots.ledger` (the time ledger) and
:mod:`~paradnn.plots.prediction` (predicted
against measured, the heat map completed by predictions). Every figure function is
importable from here.

>>> import paradnn
>>> from paradnn import analysis, plots
>>> fig = plots.heatmap(analysis.heatmap(df, "batch", "nodes", "flops_utilization", panels=True))
"""

from paradnn.plots.compare import compare_heatmap
from paradnn.plots.heatmaps import heatmap
from paradnn.plots.prediction import completed_heatmap, predicted_vs_measured
from paradnn.plots.infeeds import infeed
from paradnn.plots.ledger import ledger_bars, ledger_maps, ledger_sensitivity
from paradnn.plots.ranges import family_ranges, params_range, utilization_comparison
from paradnn.plots.resources import (
    ENERGY_METRICS, MAX_BARS, MEMORY_PARTS, UTILIZATION_METRICS, energy, memory_breakdown, memory_unit,
    model_names, utilization, utilization_left_out,
)
from paradnn.plots.rooflines import no_roof_reason, op_breakdown, op_roofline, roofline
from paradnn.plots.saturations import saturation
from paradnn.plots.sensitivities import sensitivity
from paradnn.plots.speedups import speedup, speedup_by_config
from paradnn.plots.style import (
    CELL_FONT_PT, DPI_1X, DPI_2X, DTYPE_COLORS, framework_mark,
    MIN_FONT_PT, PAGE_WIDTH_IN, STYLE, WARNING_COLOR, PlotFigure,
)
from paradnn.plots.system import bandwidth, ops_roofline, scaling
# The number formats of every figure live with the other formatters; named here too because
# users' code called them plots.compact and plots.si.
from paradnn.units import compact, si

__all__ = [
    "heatmap", "sensitivity", "roofline", "op_roofline", "no_roof_reason", "op_breakdown", "speedup",
    "speedup_by_config", "family_ranges", "params_range", "utilization_comparison", "saturation",
    "memory_breakdown", "energy", "utilization", "utilization_left_out", "model_names", "infeed", "scaling", "bandwidth",
    "ops_roofline", "ledger_bars", "ledger_maps", "ledger_sensitivity", "compare_heatmap", "predicted_vs_measured", "completed_heatmap", "compact", "si",
    "MEMORY_PARTS", "ENERGY_METRICS", "UTILIZATION_METRICS", "MAX_BARS", "memory_unit",
    "PAGE_WIDTH_IN", "DPI_1X", "DPI_2X", "MIN_FONT_PT", "CELL_FONT_PT", "STYLE", "PlotFigure",
    "DTYPE_COLORS", "framework_mark", "WARNING_COLOR",
]
