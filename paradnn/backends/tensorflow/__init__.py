"""The TensorFlow framework: Keras 3 models on TensorFlow, the step compiled by XLA; and the
tf.data host input pipeline of ``paradnn infeed``.

This ``__init__`` is framework-free (the registry reads ``INFO`` without importing TensorFlow).
"""

from paradnn.backends import FrameworkInfo
from paradnn.backends.tensorflow.options import TensorFlowOptions

INFO = FrameworkInfo(
    extra="tf",
    description="tensorflow (Keras 3, jit_compile=True)",
    software_fields=("tf_version", "keras_version", "keras_backend", "tf_xla_flags", "xla_flags",
                     "tf_intra_op_threads", "tf_inter_op_threads", "tf_step_loops"),
    version_fields=("tf_version", "xla_flags"),
    options=TensorFlowOptions,
    # TensorFlow and torchvision bundle LLVMs that clash in one process.
    exclusive_with=("torch",),
)
