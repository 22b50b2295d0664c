"""Rows of real tiny JAX runs and planted copies "under another framework", for the framework
analysis and report tests.

The JAX rows are measured here (``paradnn.run`` with the tests' TINY settings). The copies are
*planted*: the same records with ``framework`` set to another name and ``examples_per_sec``
multiplied by a known factor, so a test can check that the analyses recover the factor. They
are declared stable (the TINY protocol's timing never meets its precision target, which is
beside the point of these tests).
"""

from __future__ import annotations

import functools

from paradnn.families.fc import FC
from paradnn.families.rnn import RNN

# (spec, batch): two FC batches and one RNN, so the figures have two families.
CONFIGS = ((FC(2, 16, 8, 4), 4), (FC(2, 16, 8, 4), 8), (RNN("rnn", 1, 8, 3, 16), 2))


@functools.lru_cache(maxsize=None)
def _measured() -> tuple[dict, ...]:
    import paradnn
    from helpers import TINY  # tests/helpers.py: the suite's tiny measurement settings

    return tuple(paradnn.run(spec, batch=batch, settings=TINY).to_dict() for spec, batch in CONFIGS)


def jax_rows() -> list[dict]:
    """Record rows of the real tiny runs (run once per test process), marked stable."""
    rows = [dict(r) for r in _measured()]
    for r in rows:
        assert r["status"] == "ok", r.get("error")
        r["stable"] = True
    return rows


def planted(rows: list[dict], framework: str, factors: list[float], **changes) -> list[dict]:
    """Copies of ``rows`` run "under ``framework``": examples/s times ``factors`` (one per row),
    new keys (another framework is another workload), and any other ``changes``."""
    out = []
    for r, f in zip(rows, factors):
        c = dict(r, framework=framework, **changes)
        c["examples_per_sec"] = r["examples_per_sec"] * f
        c["key"] = f"{r['key']}-{framework}"
        c["workload_key"] = f"{r['workload_key']}-{framework}"
        out.append(c)
    return out
