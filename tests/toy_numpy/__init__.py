"""A toy framework: the FC family trained in plain numpy, registered as one package plus one
registry line (``plugin.py``). It exists to show, and to test, that a framework is a package:
nothing in paradnn names it. Float32 on the CPU; sgd and rmsprop (TF1's, as every backend)."""

from paradnn.backends import FrameworkInfo

INFO = FrameworkInfo(
    extra="",
    description="numpy (a toy: FC in plain numpy, for tests)",
    software_fields=("numpy_version",),
    version_fields=("numpy_version",),
    builders={"fc": "toy_numpy.model:build_fc"},
)
