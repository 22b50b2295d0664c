"""The pieces of a report's plan: a section of figures and tables an analysis supports, and an
analysis a store cannot support with the recipe that fills it. Plain data: the sections build
them (:mod:`paradnn.report.sections`), the recipes fill them in (:mod:`paradnn.report.recipes`)
and the page renders them (:mod:`paradnn.report.html`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from paradnn.units import duration


@dataclass
class Item:
    """One figure (or none) of a section, its caption and the table behind it."""

    caption: str
    # A Figure, or a function making it: figures are drawn only when the page is rendered, so
    # deciding what a store supports (plan, supported) stays cheap.
    figure: object | None = None
    table: pd.DataFrame | None = None

    def make_figure(self):
        """The figure (drawn now if it was deferred), or None."""
        return self.figure() if callable(self.figure) else self.figure


@dataclass
class Section:
    """An analysis the store supports: a stable id (``heatmap:fc``), a title and its items."""

    id: str  # stable name, e.g. "heatmap:fc"
    title: str
    items: list[Item] = field(default_factory=list)


@dataclass
class Unsupported:
    """An analysis the store cannot support: what it needs, and how to get it."""

    id: str
    title: str
    needs: str
    command: str = ""  # the exact command(s) to run, shell syntax
    sweep_file: str = ""  # a sweep file (YAML) the command runs, named in ``command``; or ""
    file_name: str = ""  # the sweep file's name (the report writes it under its recipes folder)
    change: str = ""  # a change to an existing sweep file, in words, when that is the way
    configs: int = 0  # configurations the command measures
    seconds: float = float("nan")  # estimated time of the command on the store's platform
    basis: str = ""  # what the estimate rests on

    @property
    def estimate(self) -> str:
        """``about 6m00s for 12 configs (median ...)``, or "" when the recipe measures nothing."""
        if not self.configs:
            return ""
        n = f"{self.configs} config" + ("s" if self.configs != 1 else "")
        return f"about {duration(self.seconds)} for {n} ({self.basis})"


class Missing(Exception):
    """Raised by a section builder when the store cannot support its analysis: ``needs`` (what
    data it needs, in words) and ``hint``, the keys the recipes read to say how to get it
    (``grid``: a family; ``smoke``, ``probe``, ``batches``, ``framework``, ``energy``,
    ``profile``, ``compare``, ``prediction``: True; ``unstable``: runs left out)."""

    def __init__(self, needs: str, hint: dict[str, Any] | None = None):
        super().__init__(needs)
        self.hint = hint or {}
