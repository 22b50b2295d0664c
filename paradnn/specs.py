"""The model specs and ``Workload`` under their old module name, for users' code.

Each family defines its spec in its own module (``paradnn.families.fc.FC``, ``.cnn.CNN``,
``.rnn.RNN``, ``.real.Real``, ``.transformer.Transformer``) and ``Workload`` lives in
:mod:`paradnn.workload`; the public API is ``paradnn.FC``, ``paradnn.Workload`` and so on.
This module only re-exports them (nothing is defined here), so that
``from paradnn.specs import FC, Workload`` written against earlier versions keeps working.
"""

from __future__ import annotations

from paradnn.families.cnn import CNN, CNN_BLOCKS
from paradnn.families.fc import FC
from paradnn.families.real import Real
from paradnn.families.rnn import RNN, RNN_CELLS
from paradnn.sizes import OPTIMIZERS
from paradnn.workload import DTYPES, ModelSpec, Spec, Workload, spec_from_dict, stable_hash

#: The spec base class under its earlier, private name (user family modules subclassed it).
_Spec = Spec

__all__ = ["CNN", "CNN_BLOCKS", "DTYPES", "FC", "ModelSpec", "OPTIMIZERS", "RNN", "RNN_CELLS", "Real",
           "Spec", "Workload", "spec_from_dict", "stable_hash"]
