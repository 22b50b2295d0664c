"""Step-time prediction (interim: the whole model in one module; split in the next commit)."""

from paradnn.analysis.prediction.model import *  # noqa: F401,F403
