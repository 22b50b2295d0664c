"""One registry of real models: name -> factory(spec: Real, dtype: str) -> ModelDef.

Zoo modules register themselves with :func:`register`; the CLI, sweeps and tests iterate over
:func:`names`. Importing this module imports no model code until a name is looked up.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

# Zoo modules under paradnn.backends.jax.models.zoo; each calls register() at import time.
_ZOO_MODULES: tuple[str, ...] = (
    "resnet", "vgg", "alexnet", "squeezenet", "mobilenet", "densenet", "inception", "retinanet",
    "transformer", "bert", "lstm_lm", "deepspeech2",
)

_REGISTRY: dict[str, "Entry"] = {}


@dataclass(frozen=True)
class Entry:
    """A zoo model's JAX definition. Its framework-neutral facts (default batch, input size,
    optimizer, description, frameworks) are in ``paradnn.families.real.ZOO``."""

    name: str
    factory: Callable  # (spec: Real, dtype: str) -> ModelDef


def register(entry: Entry) -> None:
    _REGISTRY[entry.name] = entry


def _load() -> None:
    for mod in _ZOO_MODULES:
        importlib.import_module(f"paradnn.backends.jax.models.zoo.{mod}")


def names() -> list[str]:
    """Registered real-model names, sorted."""
    _load()
    return sorted(_REGISTRY)


def get(name: str) -> Entry:
    _load()
    return _REGISTRY[name]
