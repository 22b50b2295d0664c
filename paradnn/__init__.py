"""paradnn: systematic benchmarking of deep-learning training platforms.

>>> import paradnn
>>> rec = paradnn.run(paradnn.FC(layers=4, nodes=256, input=2000, output=1000), batch=128)
>>> rec.metrics["examples_per_sec"]  # doctest: +SKIP

The public API is re-exported here and imported lazily, so ``import paradnn`` is cheap and the
analysis functions work without JAX.
"""

from __future__ import annotations

import importlib
from typing import Any

from paradnn.errors import ParadnnError, SpecError
from paradnn.families.cnn import CNN
from paradnn.families.fc import FC
from paradnn.families.real import Real
from paradnn.families.rnn import RNN
from paradnn.workload import Workload

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    "run": "paradnn.runner",
    "Transformer": "paradnn.families.transformer",
    "MeasureSettings": "paradnn.measure",
    "Record": "paradnn.record",
    "probe": "paradnn.hardware",
    "sweep": "paradnn.sweeper",
    "SweepConfig": "paradnn.sweeper",
    "predict": "paradnn.predictor",  # module predictor, like sweeper: paradnn.predict stays the function
    "grid": "paradnn.grids",
    "grids": None,
    "load": "paradnn.store",
    "analysis": None,
    "compare": None,  # a callable module: paradnn.compare(base, new), paradnn.compare.history(...)
    "plots": None,
}

__all__ = ["CNN", "FC", "RNN", "Real", "Workload", "SpecError", "ParadnnError", *_LAZY]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'paradnn' has no attribute {name!r}")
    module = _LAZY[name]
    if module is None:  # a submodule
        return importlib.import_module(f"paradnn.{name}")
    return getattr(importlib.import_module(module), name)
