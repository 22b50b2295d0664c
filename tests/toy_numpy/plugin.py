"""Registers the toy numpy framework: the one registry line (``PARADNN_PLUGINS=toy_numpy.plugin``
makes the CLI and executor children run it too)."""

import dataclasses

from paradnn import backends, families

backends.register("numpy", "toy_numpy")

# Until the family registry reads ``FrameworkInfo.builders`` (Family.frameworks_for names only
# the frameworks in a family's own ``builders``), the FC entry learns the toy's builder here.
_fc = families.get("fc")
families.register(dataclasses.replace(_fc, builders={**_fc.builders, "numpy": backends.meta("numpy").builders["fc"]}))
