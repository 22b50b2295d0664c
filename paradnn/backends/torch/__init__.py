"""The PyTorch framework: torch.compile (or eager) training steps.

This ``__init__`` is framework-free (the registry reads ``INFO`` without importing torch).
"""

from paradnn.backends import FrameworkInfo
from paradnn.backends.torch.options import TorchOptions

INFO = FrameworkInfo(
    extra="torch",
    description="torch (torch.compile)",
    software_fields=("torch_version", "torch_cuda_version", "torch_threads"),
    version_fields=("torch_version",),
    options=TorchOptions,
    # torchvision and TensorFlow bundle LLVMs that clash in one process.
    exclusive_with=("tensorflow",),
)
