"""Registers the toy numpy framework: the one registry line (``PARADNN_PLUGINS=toy_numpy.plugin``
makes the CLI and executor children run it too). The families it builds are in its ``INFO``
(``builders``): no family is registered again."""

from paradnn import backends

backends.register("numpy", "toy_numpy")
