"""Writes tests/data/store_schema2.db with the paradnn of commit f953315 (record schema 2, before
the framework registry): one JAX and one PyTorch record of a tiny FC with the tests' TINY
settings (PyTorch eager). tests/test_store_upgrade.py checks that the current code gives the
same configs the same keys. Run with the old code first on the path:

    git worktree add /tmp/old f953315
    PYTHONPATH=/tmp/old python tests/data/make_store_schema2.py tests/data/store_schema2.db
    git worktree remove /tmp/old
"""

import sys

import paradnn
from paradnn.measure import MeasureSettings
from paradnn.store import Store

TINY = MeasureSettings(steps_per_call=2, warmup_calls=1, warmup_s=0.0, min_calls=2, max_calls=3,
                       cv_target=0.5, time_budget_s=0.2)
SPEC = paradnn.FC(2, 16, 8, 4)
BATCH = 8

if __name__ == "__main__":
    records = [paradnn.run(SPEC, batch=BATCH, settings=TINY),
               paradnn.run(SPEC, batch=BATCH, settings=TINY.replace(torch_compile="eager"), framework="torch")]
    with Store(sys.argv[1]) as db:
        for r in records:
            assert r.status == "ok", r.error
            db.add(r)
            print(r.workload["framework"], r.key)
