"""A self-contained HTML report of a results store: every analysis the data supports.

>>> import paradnn
>>> from paradnn.report import write_report
>>> write_report(paradnn.load("results.db"), "report/")   # doctest: +SKIP
PosixPath('report/index.html')

The pipeline, one module per job: :mod:`~paradnn.report.sections` decides which analyses a
DataFrame supports and builds them from :mod:`paradnn.analysis` and :mod:`paradnn.plots` calls
(:func:`plan`, :func:`supported`); :mod:`~paradnn.report.recipes` writes, for each analysis
the data cannot support, the command or sweep file that supplies it and its estimated time on
the store's platform; :mod:`~paradnn.report.warnings` lists the runs with physics warnings;
:mod:`~paradnn.report.html` renders the plan as one HTML file with the figures embedded as
base64 PNG (:func:`write_report`, :func:`render_html`). Runs that missed their precision target
(``stable`` False) are marked in every figure and left out of regressions and speedup
summaries; runs with physics warnings are marked and listed in a Warnings section.
"""

from paradnn.report.html import MAX_TABLE_ROWS, MAX_WARNING_ROWS, render_html, write_report
from paradnn.report.parts import Item, Missing, Section, Unsupported
from paradnn.report.recipes import SMOKE_SWEEP, SUGGESTED_GRIDS, recipe
from paradnn.report.rows import GENERATED
from paradnn.report.sections import TITLES, plan, supported
from paradnn.report.warnings import warnings_table

__all__ = [
    "write_report", "render_html", "plan", "supported", "warnings_table", "recipe",
    "Item", "Section", "Unsupported", "Missing", "TITLES", "GENERATED", "SUGGESTED_GRIDS",
    "SMOKE_SWEEP", "MAX_TABLE_ROWS", "MAX_WARNING_ROWS",
]
