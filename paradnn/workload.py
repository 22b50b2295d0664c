"""Workloads: frozen, validated values that name everything a run computes.

A *model spec* names the network; every family defines its spec class in its own module
(``paradnn.families.fc.FC``, ...) on the :class:`Spec` base here. A :class:`Workload` adds the
training settings next to it (batch, dtype, optimizer, devices, framework). Two equal workloads
have the same ``key``. Invalid values raise :class:`SpecError`, whose message names the
parameter, the value and what is allowed. Values outside the paper's Table 2 but buildable are
accepted: users extrapolate.

Nothing here imports a framework. The dtypes and optimizers a workload may name, and what they
mean, are the tables of :mod:`paradnn.sizes`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from paradnn import families, frameworks
from paradnn.errors import SpecError
from paradnn.families.spec import Spec, positive_int
from paradnn.settings import choice
from paradnn.sizes import DTYPE_BYTES, OPTIMIZERS

#: Compute dtypes a workload may name (the keys of ``sizes.DTYPE_BYTES``).
DTYPES: tuple[str, ...] = tuple(DTYPE_BYTES)


#: The type of any registered family's spec (``FC``, ``CNN``, ``RNN``, ``Real``, ``Transformer``
#: and families registered by user code).
ModelSpec = Spec


def spec_from_dict(d: dict[str, Any]) -> Spec:
    """Build a model spec from ``{"family": ..., <fields>}`` (any registered family, see
    :mod:`paradnn.families`); unknown fields are an error."""
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

    spec: Spec
    batch: int
    dtype: str = "float32"
    optimizer: str | None = None
    devices: int = 1
    framework: str = frameworks.DEFAULT

    def __post_init__(self) -> None:
        if not isinstance(self.spec, Spec):
            raise SpecError("spec", self.spec, "a model spec of a family: " + ", ".join(families.names()))
        fam = families.of(self.spec)
        object.__setattr__(self, "framework", choice(families.FRAMEWORKS, any_case=True)(self.framework, "framework"))
        if self.framework not in fam.frameworks_for(self.spec):
            what = f"model {self.spec.model}" if fam.kind == "real" else f"family {fam.name}"
            raise SpecError("framework", self.framework,
                            f"one of {', '.join(fam.frameworks_for(self.spec))} for {what}")
        object.__setattr__(self, "batch", positive_int("batch", self.batch))
        object.__setattr__(self, "devices", positive_int("devices", self.devices))
        object.__setattr__(self, "dtype", choice(DTYPES, any_case=True)(self.dtype, "dtype"))
        if self.optimizer is None:
            # Resolve the model's default here so that the key names what actually runs.
            object.__setattr__(self, "optimizer", fam.default_optimizer(self.spec))
        object.__setattr__(self, "optimizer", choice(OPTIMIZERS, any_case=True)(self.optimizer, "optimizer"))
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

    @functools.cached_property
    def key(self) -> str:
        """Stable 16-hex-digit identity of the computation (same spec and settings, same key);
        computed once per instance (grids dedupe and planners look up by it, often)."""
        return stable_hash(self.to_dict())


def stable_hash(obj: Any) -> str:
    """SHA-256 of canonical JSON, first 16 hex digits."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def short_name(workload: Workload | dict[str, Any]) -> str:
    """``fc layers=4 nodes=1024 input=2000 output=1000 batch=256 float32``: a workload (or a
    store row of one) in one line, for progress lines and tables; the optimizer and devices
    only when they are not the defaults (rmsprop, 1)."""
    d = workload.to_dict() if isinstance(workload, Workload) else dict(workload)
    family = d.get("family")
    names = list(families.get(family).fields()) if family in families.names() else []
    parts = [str(family)]
    for k in names:
        v = d.get(k)
        if v in (None, 0, "") or _is_nan(v):
            continue
        if isinstance(v, float) and v.is_integer():  # a DataFrame row turns ints into floats
            v = int(v)
        parts.append(f"{k}={v}")
    parts += [f"batch={int(d['batch'])}" if d.get("batch") is not None else "batch=?",
              str(d.get("dtype"))]
    if d.get("optimizer") not in (None, "rmsprop") and not _is_nan(d.get("optimizer")):
        parts.append(f"optimizer={d['optimizer']}")
    if d.get("devices") not in (None, 1) and not _is_nan(d.get("devices")):
        parts.append(f"devices={int(d['devices'])}")
    return " ".join(parts)


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


__all__ = ["DTYPES", "ModelSpec", "Spec", "Workload", "choice", "positive_int", "short_name",
           "spec_from_dict", "stable_hash"]
