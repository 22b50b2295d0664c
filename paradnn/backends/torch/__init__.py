"""The PyTorch framework: torch.compile (or eager) training steps.

This ``__init__`` is framework-free (the registry reads ``INFO`` without importing torch). It
also quiets two of torch's own log lines that carry nothing for a paradnn user (:data:`CHATTER`):
they are dropped by a filter on their loggers, set before torch is imported, and every other
message of those loggers, and of torch, passes.
"""

import logging

from paradnn.backends.torch.options import TorchOptions
from paradnn.frameworks import FrameworkInfo

INFO = FrameworkInfo(
    extra="torch",
    description="torch (torch.compile)",
    software_fields=("torch_version", "torch_cuda_version", "torch_threads"),
    version_fields=("torch_version",),
    mark="x",  # inside a figure's points where several frameworks are drawn
    # The families this framework builds: family -> "module:function" (spec, dtype) -> model.
    builders={
        "fc": "paradnn.backends.torch.models.generated:build_fc",
        "cnn": "paradnn.backends.torch.models.generated:build_cnn",
        "rnn": "paradnn.backends.torch.models.generated:build_rnn",
        "transformer": "paradnn.backends.torch.models.transformer:build",
        "real": "paradnn.backends.torch.models.zoo:build",
    },
    options=TorchOptions,
    # torchvision and TensorFlow bundle LLVMs that clash in one process.
    exclusive_with=("tensorflow",),
)

#: torch logger -> the message templates (``record.msg``) of its lines that are start-up chatter
#: here: Inductor's search for a CUDA toolkit on a host without a CUDA runtime ("No CUDA runtime
#: is found, using CUDA_HOME='/usr/local'", on every compiled run on a CPU), and Dynamo ignoring
#: the profiler's ``record_function`` of ``torch.optim``'s step (paradnn does not profile there).
CHATTER: dict[str, tuple[str, ...]] = {
    "torch.utils.cpp_extension": ("No CUDA runtime is found, using CUDA_HOME=",),
    "torch._dynamo.variables.ctx_manager": ("Profiler record function ",),
    "torch._dynamo.variables.torch": ("Profiler function ",),
}


class _DropChatter(logging.Filter):
    """Drops the records whose message template starts with one of ``prefixes``."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefixes)


for _name, _prefixes in CHATTER.items():
    _logger = logging.getLogger(_name)
    if not any(isinstance(f, _DropChatter) for f in _logger.filters):  # once per process
        _logger.addFilter(_DropChatter(_prefixes))
