"""XLA compiler presets for the measured training step: the platform's best stack by default.

A preset names a set of XLA compile options per backend. They are passed to the one compile of
the measured step (``jax.stages.Lowered.compile(compiler_options)``), never through the
``XLA_FLAGS`` environment variable: a process can measure both presets side by side, and
nothing else the process compiles is affected.

* ``best`` (default): the options that gave the fastest correct training steps for FC, CNN and
  RNN workloads in ``benchmarks/bench_stack.py`` (see docs/performance.md for the measurements
  and what was tried; on x86 CPUs with jaxlib 0.10.2 that is XLA's defaults).
* ``stock``: XLA's own defaults, for users who want them (``--xla-preset stock``).

On backends without an entry (GPUs, TPUs) both presets compile with XLA's defaults. The record
carries the preset in its settings and the options each preset means in its software fields
(``xla_compile_options``), so the two never deduplicate into one row.
"""

from __future__ import annotations

import json
from typing import Any

from paradnn.errors import SpecError

#: preset -> backend -> XLA compile options (DebugOptions field name -> value).
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    # On x86 CPUs with jaxlib 0.10.2, XLA's defaults already hand every dot and most
    # convolutions to YNNPACK, and no candidate beat them on all of FC, CNN and LSTM: widening
    # YNN's fusions to dot+epilogue (``xla_cpu_experimental_ynn_fusion_type:
    # "LIBRARY_FUSION_TYPE_DOT"``) changes FC and
    # CNN by less than the noise and slows the LSTM step by about 17%; the oneDNN and XNNPACK
    # switches leave the program unchanged; Eigen alone is slower (docs/performance.md). So
    # "best" is XLA's defaults on the CPU until a measured winner replaces it here.
    "best": {"cpu": {}},
    "stock": {},
}

DEFAULT_PRESET = "best"


def parse_preset(value: Any, parameter: str = "xla_preset") -> str:
    """A preset name from text or a YAML value (the MeasureSettings parser)."""
    if not isinstance(value, str) or value not in PRESETS:
        raise SpecError(parameter, value, "one of " + ", ".join(PRESETS))
    return value


def compile_options(preset: str, backend: str) -> dict[str, Any] | None:
    """The compile options of ``preset`` on ``backend`` ("cpu", "gpu", "tpu"); None for XLA's
    defaults (what ``Lowered.compile`` takes for no options)."""
    return dict(PRESETS[parse_preset(preset)].get(backend, {})) or None


def describe(backend: str) -> str:
    """What every preset means on ``backend``, as canonical JSON (a software field of each
    record: a change of the presets' meaning changes the record key)."""
    return json.dumps({name: per_backend.get(backend, {}) for name, per_backend in PRESETS.items()},
                      sort_keys=True, separators=(",", ":"))
