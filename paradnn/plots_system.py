"""The old name of :mod:`paradnn.plots.system`, kept so that users' code that imports it keeps
working; new code imports the figures from :mod:`paradnn.plots`."""

from paradnn.plots.system import scaling, bandwidth, ops_roofline  # noqa: F401
