"""What many test files share: the tiny measurement settings, the repository's paths, and the
environment of a child process that imports test modules.

Test files import it as ``from helpers import TINY`` (setup.cfg's ``[tool:pytest] pythonpath``
puts tests/ on ``sys.path``); a child process gets tests/ through ``PYTHONPATH``
(:func:`child_env`), never through ``sys.path.insert`` in its code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from paradnn.measure import MeasureSettings

#: The repository's root folder and its tests folder.
ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

#: The suite's measurement settings: enough to exercise the protocol (2 steps per call, 1
#: warm-up call, the protocol's fewest timed calls, MIN_TIMED_CALLS = 6, a 0.2 s budget), small
#: enough for a 2-core CI machine. The loose precision target (ci_target 0.5: the median within
#: +-50%) is what such short runs can meet; a test that needs another value derives it
#: (``TINY.replace(ci_target=1e-6)``) and says why.
TINY = MeasureSettings(steps_per_call=2, warmup_calls=1, warmup_s=0.0, min_calls=6, max_calls=6,
                       ci_target=0.5, time_budget_s=0.2)
#: The same settings as a plain dict (``MeasureSettings.to_dict()``): a Record's ``settings``, a
#: sweep's ``settings`` override, or a literal in a child process's code (``repr`` of it).
TINY_FIELDS: dict[str, Any] = TINY.to_dict()

#: A sweep file of one tiny FC config with tiny settings, for tests of the sweep command.
SMALL_FILE = """\
family: fc
layers: 1
nodes: 8
input: 8
output: 2
batch: 4
settings: {steps_per_call: 1, warmup_calls: 1, min_calls: 6, max_calls: 6, time_budget_s: 0.2}
"""


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child Python process that imports paradnn from this
    checkout and test modules from tests/: ``PYTHONPATH`` starts with the repository root and
    tests/ (then whatever it held), plus ``extra`` variables."""
    path = [str(ROOT), str(TESTS)]
    if os.environ.get("PYTHONPATH"):
        path.append(os.environ["PYTHONPATH"])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), **extra}


def paradnn_messages(caught: Any) -> list[str]:
    """The texts of paradnn's own warnings among ``caught`` (``pytest.warns`` or
    ``warnings.catch_warnings(record=True)``): a deprecation warning that a new pandas, numpy or
    pyarrow raises inside ``paradnn.load`` is not what the store tests count."""
    from paradnn.errors import ParadnnWarning

    return [str(w.message) for w in caught if issubclass(w.category, ParadnnWarning)]


class FakeNvmlBase:
    """What every stand-in for pynvml shares (its error type, start and stop, device handles
    that are their indices), for the NVML logic that a lent GPU cannot exercise on demand;
    tests add the readings they need."""

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.shutdowns = 0

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i
