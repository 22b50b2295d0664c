"""Run the family x dtype contract cases of one framework and print one JSON list.

Used by tests/test_families.py in a subprocess per framework: TensorFlow and torchvision cannot
share a process (their bundled LLVMs clash), and each framework's runtime stays out of the
pytest worker. Usage: python tests/contract_worker.py FRAMEWORK DTYPE [DTYPE ...]
"""

from __future__ import annotations

import json
import math
import sys


def cases(framework: str, dtypes: list[str]) -> list[dict]:
    from paradnn import backends, families
    from paradnn.backends.jax import costs as costs
    from paradnn.measure import MeasureSettings
    from paradnn.backends.jax.models import param_count
    from paradnn.workload import Workload

    backend = backends.get(framework)
    # PyTorch eagerly: torch.compile of each case takes tens of seconds on a CPU and is tested
    # once in test_backend_torch; the contract is about the model, its counts and its step.
    settings = MeasureSettings(steps_per_call=1, torch_compile="eager")
    out = []
    for name in families.names():
        fam = families.get(name)
        for preset in fam.tiny:
            spec = fam.spec(**{k: v for k, v in preset.items() if k != "batch"})
            if framework not in fam.frameworks_for(spec):
                continue
            for dtype in dtypes:
                row = {"family": name, "spec": repr(spec), "dtype": dtype}
                try:
                    w = Workload(spec, preset["batch"], dtype, framework=framework)
                    program = backend.compile(w, settings)
                    state, batch = backend.init(program)
                    losses = []
                    for _ in range(3):
                        state, loss = program.call(state, batch, 1)
                        losses.append(backend.loss_value(loss))
                    row.update(
                        params=program.metrics.get("params"),
                        closed_form=param_count(spec),
                        losses=losses,
                        executed=backend.costs(program).get("flops_per_step"),
                        analytic=costs.model_flops_per_step(w),
                    )
                except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
                    row["error"] = f"{type(exc).__name__}: {exc}"[:500]
                out.append(row)
    return out


if __name__ == "__main__":
    rows = cases(sys.argv[1], sys.argv[2:])
    print(json.dumps(rows, default=lambda x: None if isinstance(x, float) and math.isnan(x) else str(x)))
