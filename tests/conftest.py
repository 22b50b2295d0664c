import os
import sys
import tempfile

# Probe results and compilation caches of a test session stay in the session, never in ~/.cache.
os.environ.setdefault("PARADNN_CACHE", tempfile.mkdtemp(prefix="paradnn-test-cache-"))
# The suite checks bookkeeping, not peaks, on shared 2-core hosts where every probe looks
# contended: accept its spread, or each test process would measure the peaks again.
# tests/test_probe.py checks the contention rule itself.
os.environ.setdefault("PARADNN_PROBE_MAX_CV", "10")
os.environ.setdefault("PARADNN_PROBE_MAX_LOAD", "1000")  # other processes' busy cores, likewise
# The host's peak is measured with a 2 s GEMM budget (each dtype measures at least its first
# method and size; the pairs skipped are recorded as `incomplete`): the full 40 s budget took
# 25-40 s per probe on the AVX2 CI host, and every child with a fresh cache, a fake HOME or its
# own XLA_FLAGS (another probe key) paid it again. tests/test_probe.py checks the budget rule itself.
os.environ.setdefault("PARADNN_PROBE_BUDGET_S", "2")
# Sweeps of the suite measure each config as asked: a test's row counts do not depend on how
# busy the host was. The automatic retry's own tests name retry_unstable_s.
os.environ.setdefault("PARADNN_RETRY_UNSTABLE_S", "0")

import pytest  # noqa: E402

from helpers import TINY  # noqa: E402  (tests/helpers.py: the suite's tiny settings)
from paradnn.measure import MeasureSettings  # noqa: E402


@pytest.fixture
def tiny_settings() -> MeasureSettings:
    return TINY


@pytest.fixture
def paradnn_cmd() -> list[str]:
    """The installed console script's equivalent, run with this interpreter."""
    return [sys.executable, "-m", "paradnn"]


#: Test files that hold the suite's longest tests (``pytest --durations``: the zoo's one-step
#: runs, 40-140 s each on the 2-core CI host; the contract tables, 60-200 s; the TensorFlow
#: backend's, 40-120 s). They run first: pytest-xdist hands tests out in collection order, where
#: the zoo's steps came last (alphabetically), and a long test handed out last keeps one worker
#: busy after the other has run out of tests.
RUN_FIRST = ("test_zoo.py", "test_families.py", "test_backend_tf.py")


def pytest_collection_modifyitems(config, items):
    """Files of ``RUN_FIRST`` first, each file's tests kept together and in order (module
    fixtures are set up as often as before). Tests marked ``gpu`` run only where the default JAX
    backend is an NVIDIA GPU; elsewhere they skip with the reason (never silently)."""
    rank = {name: i for i, name in enumerate(RUN_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(RUN_FIRST)))  # stable: the rest as collected
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import jax

    platform = jax.devices()[0].platform
    if platform != "gpu":
        skip = pytest.mark.skip(reason=f"needs an NVIDIA GPU (jax default backend is {platform})")
        for item in gpu_items:
            item.add_marker(skip)
