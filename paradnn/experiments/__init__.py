"""The side experiments: measurements beside the training-step sweep, each a command of its own.

* :mod:`~paradnn.experiments.ops`: single operations (matmul, convolution...) over sizes
  (``paradnn ops``).
* :mod:`~paradnn.experiments.collectives`: collective operations across devices
  (``paradnn collectives``).
* :mod:`~paradnn.experiments.scaling`: one model over 1..N devices, the multi-chip overhead
  (``paradnn scaling``).
* :mod:`~paradnn.experiments.infeed`: the host input pipeline against the training step
  (``paradnn infeed``).
* :mod:`~paradnn.experiments.maxbatch`: the largest batch that fits a device (``paradnn maxbatch``).
* :mod:`~paradnn.experiments.profile`: an operation-level profile of one training step
  (``paradnn profile``), which the time ledger reads.

They sit above the runner and the records (they time through the same protocol and store
records like any run) and below the command line. One is also read by a run: the time ledger
(:mod:`paradnn.ledger`, ``run --ledger``) splits a step's time with the profile's operations.
"""
