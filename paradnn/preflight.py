"""The preflight floor under its old module name: it lives in :mod:`paradnn.sizes` now
(``sizes.floor_bytes``, ``sizes.predicted_oom``, and the optimizers' ``floor_slots`` in
``sizes.OPTIMIZERS``). Nothing is defined here; this module goes once nothing imports it.
"""

from __future__ import annotations

from types import MappingProxyType

from paradnn.sizes import F32_BYTES, OPTIMIZERS, floor_bytes, predicted_oom

#: ``optimizer -> floor_slots`` of ``sizes.OPTIMIZERS`` (a read-only view, not a second table).
OPTIMIZER_STATE_SLOTS = MappingProxyType({name: o.floor_slots for name, o in OPTIMIZERS.items()})
#: Bytes of a master weight and of an optimizer slot entry (``sizes.F32_BYTES``).
PARAM_BYTES = F32_BYTES

__all__ = ["OPTIMIZER_STATE_SLOTS", "PARAM_BYTES", "floor_bytes", "predicted_oom"]
