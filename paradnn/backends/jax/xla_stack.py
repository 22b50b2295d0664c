"""XLA compiler presets for the measured training step: the platform's best stack by default.

A preset names a set of XLA compile options per backend. They are passed to the one compile of
the measured step (``jax.stages.Lowered.compile(compiler_options)``), never through the
``XLA_FLAGS`` environment variable: a process can measure both presets side by side, and
nothing else the process compiles is affected.

* ``best`` (default): the options that gave the fastest correct training steps for FC, CNN and
  RNN workloads in ``benchmarks/bench_stack.py`` (see docs/performance.md for the measurements
  and what was tried; on x86 CPUs with jaxlib 0.10.2 and 0.12 that is XLA's defaults, with a
  fallback for the convolutions XLA:CPU would emit as plain loops).
* ``stock``: XLA's own defaults, for users who want them (``--xla-preset stock``).

A preset may also name a fallback on a backend (``FALLBACKS``): options for the programs its own
options compile into a known slow path, found in the optimized program itself (its HLO text), not
guessed from the model. :func:`compile_lowered` compiles with the preset's options, looks for the
slow path, and only where it is there compiles again with the fallback's options added, keeping
that program if it has less of the slow path. The options that compiled the measured program are
the record's ``xla_options_used``.

On backends without an entry (GPUs, TPUs) both presets compile with XLA's defaults. The record
carries the preset in its settings and the options each preset means in its software fields
(``xla_compile_options``), so the two never deduplicate into one row.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from paradnn.errors import SpecError

#: preset -> backend -> XLA compile options (DebugOptions field name -> value).
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    # On x86 CPUs with jaxlib 0.10.2, XLA's defaults already hand every dot and most
    # convolutions to YNNPACK, and no candidate beat them on all of FC, CNN and LSTM: widening
    # YNN's fusions to dot+epilogue (``xla_cpu_experimental_ynn_fusion_type:
    # "LIBRARY_FUSION_TYPE_DOT"``) changes FC and
    # CNN by less than the noise and slows the LSTM step by about 17%; the oneDNN and XNNPACK
    # switches leave the program unchanged; Eigen alone is slower (docs/performance.md). So
    # "best" is XLA's defaults on the CPU (jaxlib 0.12 too: docs/performance.md, "XLA:CPU
    # options new in jaxlib 0.12"), plus the fallback below for convolutions smaller than their
    # kernel. XLA:CPU's oneDNN convolution calls (``xla_cpu_experimental_onednn_custom_call``)
    # are left out: 1.05-1.125x on 64-pixel CNN steps, 0.73x on small ones and 0.13-0.18x
    # inside the K-step loop (docs/performance.md).
    "best": {"cpu": {}},
    "stock": {},
}

DEFAULT_PRESET = "best"


def loop_emitted_convolutions(hlo: str) -> int:
    """How many convolutions of an optimized XLA:CPU program run as plain loops: those in a
    loop fusion (``kind=kLoop``), the form XLA:CPU gives a convolution that neither a library
    (YNNPACK, oneDNN) nor its Eigen runtime takes. ``hlo`` is ``Compiled.as_text()``."""
    with_convolution = set()
    for block in hlo.split("\n\n"):  # the printer separates computations by an empty line
        head = re.match(r"\s*(?:ENTRY\s+)?%?([\w.\-]+)\s", block)
        if head and " convolution(" in block:
            with_convolution.add(head.group(1))
    return sum(1 for m in re.finditer(r"kind=kLoop, calls=%?([\w.\-]+)", hlo) if m.group(1) in with_convolution)


@dataclass(frozen=True)
class Fallback:
    """Options a preset adds on one backend for the programs that its own options compile into
    a slow path. ``count`` measures the slow path in an optimized program's HLO text (0: none);
    ``when`` says in words when the fallback applies (it is part of what the preset means)."""

    options: dict[str, Any]
    count: Callable[[str], int]
    when: str


#: preset -> backend -> its fallback.
FALLBACKS: dict[str, dict[str, Fallback]] = {
    "best": {
        # XLA:CPU's algebraic simplifier swaps the operands of a convolution whose input (or, in
        # its input gradient, whose output) has fewer spatial positions than its kernel: a 3x3
        # convolution on the 2x2 last stage of a CNN on 64-pixel images. The swapped convolution
        # has a layout (dim_labels 01fb_o01i->f01b) that only XLA's loop emitter takes, about 3.5
        # GFLOP/s where YNNPACK's convolutions reach 40-170 on the 2-core host of
        # docs/performance.md. Without the pass the convolutions keep their layout: the residual
        # CNN (blocks 1, filters 16, image 64, batch 32) ran 1.40x faster, a CIFAR-size one
        # (blocks 2, filters 32, image 32) 2.2x, with the same losses; a CNN on 224-pixel images
        # has no swapped convolution and keeps the defaults (there, without the pass: 0.86-0.95x).
        # The flag turns off every algebraic-simplifier pass, so it applies only where the slow
        # path is found (FC and LSTM steps ran 0.75x and 0.91x without it).
        "cpu": Fallback(options={"xla_disable_hlo_passes": "algsimp"}, count=loop_emitted_convolutions,
                        when="the program compiled with the preset's options has convolutions XLA:CPU "
                             "emits as plain loops, and has fewer with these options"),
    },
}


def parse_preset(value: Any, parameter: str = "xla_preset") -> str:
    """A preset name from text or a YAML value (the MeasureSettings parser)."""
    if not isinstance(value, str) or value not in PRESETS:
        raise SpecError(parameter, value, "one of " + ", ".join(PRESETS))
    return value


def compile_options(preset: str, backend: str) -> dict[str, Any] | None:
    """The compile options of ``preset`` on ``backend`` ("cpu", "gpu", "tpu"); None for XLA's
    defaults (what ``Lowered.compile`` takes for no options)."""
    return dict(PRESETS[parse_preset(preset)].get(backend, {})) or None


def compile_lowered(lowered: Any, preset: str, backend: str) -> tuple[Any, dict[str, Any]]:
    """Compile ``lowered`` (a ``jax.stages.Lowered``) with ``preset``'s options on ``backend``,
    and with its fallback's options added where the fallback applies (``FALLBACKS``). Returns
    the compiled program and the options it was compiled with (``{}``: XLA's defaults)."""
    options = compile_options(preset, backend) or {}
    compiled = lowered.compile(options or None)
    fallback = FALLBACKS.get(preset, {}).get(backend)
    slow = fallback.count(compiled.as_text()) if fallback is not None else 0
    if slow:
        wider = {**options, **fallback.options}
        second = lowered.compile(wider)
        if fallback.count(second.as_text()) < slow:
            return second, wider
    return compiled, options


def describe(backend: str) -> str:
    """What every preset means on ``backend``, as canonical JSON (a software field of each
    record: a change of the presets' meaning changes the record key): each preset's options,
    and for a preset with a fallback there, ``"<preset> fallback"``: its options and when."""
    meaning: dict[str, Any] = {name: per_backend.get(backend, {}) for name, per_backend in PRESETS.items()}
    for name, per_backend in FALLBACKS.items():
        if backend in per_backend:
            meaning[f"{name} fallback"] = {"options": per_backend[backend].options, "when": per_backend[backend].when}
    return json.dumps(meaning, sort_keys=True, separators=(",", ":"))


def options_text(options: dict[str, Any]) -> str:
    """Compile options as the record's ``xla_options_used`` shows them (canonical JSON)."""
    return json.dumps(options, sort_keys=True, separators=(",", ":"))
