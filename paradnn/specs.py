"""Workload specifications: frozen, validated values that name everything a run computes.

A *model spec* (``FC``, ``CNN``, ``RNN``, ``Real``) names the network; a ``Workload`` adds the
training settings next to it (batch, dtype, optimizer, devices). Two equal workloads have the
same ``key``. Invalid values raise :class:`SpecError`, whose message names the parameter, the
value and what is allowed. Values outside the paper's Table 2 but buildable are accepted:
users extrapolate.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Union

from paradnn.errors import SpecError

DTYPES = ("float32", "bfloat16", "float16")
OPTIMIZERS = ("rmsprop", "sgd", "momentum", "adam", "adafactor")
CNN_BLOCKS = ("residual", "bottleneck")
RNN_CELLS = ("rnn", "lstm", "gru")


def _positive_int(name: str, value: Any) -> int:
    # bool is an int subclass; True as a layer count is a bug, not a 1.
    if isinstance(value, bool) or not isinstance(value, int):
        # Accept integral floats/strings from YAML or argparse ("4", 4.0) but nothing lossy.
        try:
            as_float = float(value)
        except (TypeError, ValueError):
            raise SpecError(name, value, "a positive integer") from None
        if isinstance(value, bool) or not as_float.is_integer():
            raise SpecError(name, value, "a positive integer")
        value = int(as_float)
    if value <= 0:
        raise SpecError(name, value, "a positive integer")
    return value


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value.lower() not in allowed:
        raise SpecError(name, value, "one of " + ", ".join(allowed))
    return value.lower()


class _Spec:
    """Shared behaviour of model specs: integer coercion, validation, a canonical dict."""

    family: ClassVar[str]
    _ints: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        for name in self._ints:
            object.__setattr__(self, name, _positive_int(name, getattr(self, name)))
        self._validate()

    def _validate(self) -> None:  # per-family choices
        pass

    def to_dict(self) -> dict[str, Any]:
        """The hyperparameters, plus ``family``."""
        return {"family": self.family, **dataclasses.asdict(self)}

    def replace(self, **changes: Any) -> "_Spec":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class FC(_Spec):
    """Fully connected network: ``layers`` hidden Dense(nodes, ReLU) layers, then Dense(output).

    ``layers`` counts every hidden layer, the first (input -> nodes) included; ``input`` is the
    number of input features and ``output`` the number of classes.
    """

    layers: int
    nodes: int
    input: int
    output: int
    family: ClassVar[str] = "fc"
    _ints: ClassVar[tuple[str, ...]] = ("layers", "nodes", "input", "output")


@dataclass(frozen=True)
class CNN(_Spec):
    """ResNet-v1 CNN: a stem, four groups of ``blocks`` blocks each, global pool, Dense(output).

    ``filters`` is the width of the first group (x1, x2, x4, x8 for the four groups); ``image``
    is the side of a square 3-channel input in pixels; ``output`` the number of classes.
    """

    block: str
    blocks: int
    filters: int
    image: int
    output: int
    family: ClassVar[str] = "cnn"
    _ints: ClassVar[tuple[str, ...]] = ("blocks", "filters", "image", "output")

    def _validate(self) -> None:
        object.__setattr__(self, "block", _choice("block", self.block, CNN_BLOCKS))
        # Stem stride 2, max-pool stride 2 and three stride-2 groups: 32x downsampling.
        if self.image < 32:
            raise SpecError("image", self.image, "an integer >= 32 (the network downsamples 32x)")


@dataclass(frozen=True)
class RNN(_Spec):
    """Recurrent language model: Embedding(vocab, embed), ``layers`` stacked cells, Dense(vocab).

    The hidden size equals ``embed``; ``length`` is the sequence length in tokens.
    """

    cell: str
    layers: int
    embed: int
    length: int
    vocab: int
    family: ClassVar[str] = "rnn"
    _ints: ClassVar[tuple[str, ...]] = ("layers", "embed", "length", "vocab")

    def _validate(self) -> None:
        object.__setattr__(self, "cell", _choice("cell", self.cell, RNN_CELLS))


@dataclass(frozen=True)
class Real(_Spec):
    """A real model from the zoo (``paradnn list models``); ``image`` (pixels) or ``length``
    (tokens) override its default input size where the model has one; 0 means the default."""

    model: str
    image: int = 0
    length: int = 0
    family: ClassVar[str] = "real"

    def __post_init__(self) -> None:
        for name in ("image", "length"):
            value = getattr(self, name)
            if value in (0, None):
                object.__setattr__(self, name, 0)
            else:
                object.__setattr__(self, name, _positive_int(name, value))
        from paradnn.families.real import names as zoo_names  # plain data, no framework

        names = zoo_names()
        if not isinstance(self.model, str) or self.model not in names:
            raise SpecError("model", self.model, "one of " + ", ".join(names))


ModelSpec = Union[FC, CNN, RNN, Real]  # and any spec class a registered family defines


def spec_from_dict(d: dict[str, Any]) -> ModelSpec:
    """Build a model spec from ``{"family": ..., <fields>}`` (any registered family, see
    :mod:`paradnn.families`); unknown fields are an error."""
    from paradnn import families  # the registry imports the family modules, which import this

    cls = families.get(d.get("family")).spec
    family = cls.family
    names = {f.name for f in dataclasses.fields(cls)}
    extra = set(d) - names - {"family"}
    if extra:
        raise SpecError(sorted(extra)[0], d[sorted(extra)[0]], f"fields of {family}: {sorted(names)}")
    missing = names - set(d) - {f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    if missing:
        raise SpecError(sorted(missing)[0], None, f"a value (required by {family})")
    return cls(**{k: v for k, v in d.items() if k != "family"})


@dataclass(frozen=True)
class Workload:
    """A model spec plus the training settings that determine the computation.

    ``batch`` is the global batch in examples, split evenly over ``devices`` data-parallel
    devices. ``dtype`` is the compute dtype (master weights and the loss stay float32).
    ``optimizer`` None means the model's default (rmsprop for generated models), resolved here.
    ``framework`` is the software that builds and runs it (``families.FRAMEWORKS``).
    """

    spec: ModelSpec
    batch: int
    dtype: str = "float32"
    optimizer: str | None = None
    devices: int = 1
    framework: str = "jax"

    def __post_init__(self) -> None:
        from paradnn import families

        if not isinstance(self.spec, _Spec):
            raise SpecError("spec", self.spec, "a model spec of a family: " + ", ".join(families.names()))
        fam = families.of(self.spec)
        object.__setattr__(self, "framework", _choice("framework", self.framework, families.FRAMEWORKS))
        if self.framework not in fam.frameworks_for(self.spec):
            what = f"model {self.spec.model}" if fam.kind == "real" else f"family {fam.name}"
            raise SpecError("framework", self.framework,
                            f"one of {', '.join(fam.frameworks_for(self.spec))} for {what}")
        object.__setattr__(self, "batch", _positive_int("batch", self.batch))
        object.__setattr__(self, "devices", _positive_int("devices", self.devices))
        object.__setattr__(self, "dtype", _choice("dtype", self.dtype, DTYPES))
        if self.optimizer is None:
            # Resolve the model's default here so that the key names what actually runs.
            object.__setattr__(self, "optimizer", fam.default_optimizer(self.spec))
        object.__setattr__(self, "optimizer", _choice("optimizer", self.optimizer, OPTIMIZERS))
        if self.batch % self.devices:
            raise SpecError("batch", self.batch, f"a multiple of devices={self.devices}")

    @property
    def family(self) -> str:
        return self.spec.family

    def to_dict(self) -> dict[str, Any]:
        """Flat dict: family, hyperparameters, batch, dtype, optimizer, devices, framework."""
        return {
            **self.spec.to_dict(),
            "batch": self.batch,
            "dtype": self.dtype,
            "optimizer": self.optimizer,
            "devices": self.devices,
            "framework": self.framework,
        }

    @property
    def key(self) -> str:
        """Stable 16-hex-digit identity of the computation (same spec and settings, same key)."""
        return stable_hash(self.to_dict())


def stable_hash(obj: Any) -> str:
    """SHA-256 of canonical JSON, first 16 hex digits."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
