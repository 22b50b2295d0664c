"""Presets: the ParaDnn paper's Table 2 as data, and the ``smoke``, ``small`` and ``paper``
grids of every family (each family's registry entry holds its own, see
:mod:`paradnn.families`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paradnn.errors import SpecError
from paradnn.families import RegistryView
from paradnn.grids.product import grid
from paradnn.workload import Workload

# Table 2 of the ParaDnn paper (Wang, Wei and Brooks), as each family's registry entry holds it.
# Bounds are inclusive; a geometric range stops at the last value not above the maximum (RNN
# vocab 2..1024 x4 ends at 512).
PAPER: Mapping[str, dict[str, list[Any]]] = RegistryView(lambda f: f.paper)

#: Values the paper held fixed for its heat maps (Figure 7 instead fixes FC layers at 64).
PAPER_FIXED: Mapping[str, dict[str, Any]] = RegistryView(lambda f: f.paper_fixed)

# Presets: family -> axes. "smoke" runs in seconds on a laptop CPU, "small" in minutes,
# "paper" is the full Table 2 product (thousands of models, days on an accelerator).
PRESETS: dict[str, Mapping[str, dict[str, Any]]] = {
    "smoke": RegistryView(lambda f: f.presets.get("smoke")),
    "small": RegistryView(lambda f: f.presets.get("small")),
    "paper": PAPER,
}



def preset(name: str, family: str | None = None) -> list[Workload]:
    """The workloads of preset ``name`` (smoke, small, paper) for one family or all three."""
    if name not in PRESETS:
        raise SpecError("preset", name, "one of " + ", ".join(PRESETS))
    families = [family] if family is not None else list(PRESETS[name])
    out: list[Workload] = []
    for fam in families:
        if fam not in PRESETS[name]:
            raise SpecError("family", fam, "one of " + ", ".join(PRESETS[name]))
        out.extend(grid(fam, **PRESETS[name][fam]))
    return out
