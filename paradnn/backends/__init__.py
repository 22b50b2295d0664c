"""The framework seam: one small interface that JAX, TensorFlow and PyTorch implement.

The runner, ``maxbatch``, the timing protocol, sweeps and executors talk to a framework only
through :class:`Backend`. A backend turns a :class:`~paradnn.specs.Workload` into a
:class:`Program` (built, compiled ahead of time where the framework can, its memory known where
the framework reports it), initializes its state and batch on the device, runs K training steps
per call, and reports executed FLOPs, memory and out-of-memory in its own terms. Facts about a
model family (analytic counts, defaults) live in :mod:`paradnn.families`, never here.

Words: ``framework`` is the software (jax, tensorflow, torch); ``device_platform`` is the kind
of device (cpu, gpu, tpu). Records keep both.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from paradnn.errors import SpecError
from paradnn.families import FRAMEWORKS

# framework -> module implementing it (imported on first use: `import paradnn` imports none).
_MODULES: dict[str, str] = {
    "jax": "paradnn.backends.jax.backend",
    "tensorflow": "paradnn.backends.tensorflow.backend",
    "torch": "paradnn.backends.torch.backend",
}
#: pip extra that installs each framework (the message of an unavailable backend names it).
EXTRAS: dict[str, str] = {"jax": "", "tensorflow": "tf", "torch": "torch"}


@dataclass
class Program:
    """One workload built and compiled by one backend, ready to initialize and time.

    ``call(state, batch, k) -> (state, loss)`` runs ``k`` training steps (state donated where
    the framework can) and may return before the device is done; ``Backend.sync`` waits.
    ``metrics`` holds what building and compiling measured, under ``record.METRICS`` names:
    ``params`` (from the built model's shapes), ``compile_s``, ``step_loop_used``, and where the
    framework reports them ``memory_argument_bytes``, ``memory_output_bytes``,
    ``memory_temp_bytes``, ``memory_peak_bytes`` (B per device). ``state_bytes`` (B per device)
    is the weights plus optimizer state: a true lower bound on the step's memory, known before
    anything is allocated. ``handle`` is the backend's own.
    """

    workload: Any
    call: Callable[[Any, Any, int], tuple[Any, Any]]
    state_bytes: int
    metrics: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, Any] = field(default_factory=dict)
    handle: Any = None
    #: The framework's device objects the program runs on (energy meters map them to counters).
    devices: tuple[Any, ...] = ()


@runtime_checkable
class Backend(Protocol):
    """What a framework implements. Every method is typed and documented with units."""

    name: str  # one of families.FRAMEWORKS

    def device_info(self) -> dict[str, Any]:
        """``device_platform`` (cpu|gpu|tpu), ``device_kind`` (the device's name),
        ``device_count`` (devices this framework sees), ``host``, ``cpu_model``."""

    def software_info(self) -> dict[str, Any]:
        """Versions and settings that change the numbers (``framework_version``, compiler
        options), plus the framework's own fields (``jax_version``, ``tf_version``...)."""

    def device_memory_bytes(self) -> int | None:
        """Memory of one device (B), the default memory limit; None if unknown."""

    def compile(self, workload: Any, settings: Any) -> Program:
        """Build the model and its training step and compile it ahead of time (no state
        allocated yet). Raises ``ParadnnError`` for specs the framework cannot build."""

    def init(self, program: Program) -> tuple[Any, Any]:
        """(state, batch): initialized state and a synthetic batch on the device(s), from a
        fixed seed."""

    def sync(self, value: Any) -> Any:
        """Block until ``value`` (arrays, a tree of them) is computed on the device."""

    def loss_value(self, loss: Any) -> float:
        """The loss as a Python float (synchronizes)."""

    def costs(self, program: Program) -> dict[str, Any]:
        """Executed cost of one step over all devices: ``flops_per_step`` (FLOP),
        ``bytes_per_step`` (B) where the framework counts them (None otherwise) and
        ``flops_source`` saying where they came from (or why they are missing)."""

    def memory_breakdown(self, program: Program) -> dict[str, Any]:
        """``memory_*_bytes`` breakdown metrics (B per device) where the framework can tell;
        {} otherwise."""

    def is_oom(self, exc: BaseException) -> bool:
        """Whether an exception raised by this framework means the device ran out of memory."""

    def configure_cache(self, path: str | None) -> Callable[[], None]:
        """Point the framework's compilation cache at ``path`` (None: leave it); returns a
        function that restores the previous setting."""


def available(framework: str) -> str | None:
    """None if ``framework`` can be used here, else why not (with the install command)."""
    if framework not in FRAMEWORKS:
        raise SpecError("framework", framework, "one of " + ", ".join(FRAMEWORKS))
    try:
        importlib.import_module(_MODULES[framework]).check()
    except ImportError as exc:
        extra = EXTRAS[framework]
        return f"{framework} is not installed ({exc}); pip install 'paradnn[{extra}]'"
    return None


_instances: dict[str, Backend] = {}


def get(framework: str = "jax") -> Backend:
    """The backend of ``framework`` (one instance per process). SpecError for an unknown name
    or one whose framework is not installed."""
    if framework not in _instances:
        why = available(framework)
        if why is not None:
            raise SpecError("framework", framework, f"an installed framework: {why}")
        _instances[framework] = importlib.import_module(_MODULES[framework]).BACKEND
    return _instances[framework]


__all__ = ["Backend", "EXTRAS", "FRAMEWORKS", "Program", "available", "get"]
