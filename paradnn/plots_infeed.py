"""The old name of :mod:`paradnn.plots.infeeds`, kept so that users' code that imports it keeps
working; new code imports the figures from :mod:`paradnn.plots`."""

from paradnn.plots.infeeds import infeed  # noqa: F401
