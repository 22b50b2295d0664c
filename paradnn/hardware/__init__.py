"""Host facts, the accelerator peak table, and measured peaks (being split into one module per job)."""

from paradnn.hardware.probing import *  # noqa: F401,F403
