"""The TensorFlow framework: Keras 3 models on TensorFlow, the step compiled by XLA; and the
tf.data host input pipeline of ``paradnn infeed``.

This ``__init__`` is framework-free (the registry reads ``INFO`` without importing TensorFlow).
"""

from paradnn.backends.tensorflow.options import TensorFlowOptions
from paradnn.frameworks import FrameworkInfo

INFO = FrameworkInfo(
    extra="tf",
    description="tensorflow (Keras 3, jit_compile=True)",
    software_fields=("tf_version", "keras_version", "keras_backend", "tf_xla_flags", "xla_flags",
                     "tf_intra_op_threads", "tf_inter_op_threads", "tf_step_loops"),
    version_fields=("tf_version", "xla_flags"),
    mark="+",  # inside a figure's points where several frameworks are drawn
    # The families this framework builds: family -> "module:function" (spec, dtype) -> model.
    builders={
        "fc": "paradnn.backends.tensorflow.models.generated:build_fc",
        "cnn": "paradnn.backends.tensorflow.models.generated:build_cnn",
        "rnn": "paradnn.backends.tensorflow.models.generated:build_rnn",
        "real": "paradnn.backends.tensorflow.models.zoo:build",
    },
    options=TensorFlowOptions,
    check_environment="paradnn.backends.tensorflow.threads:check_environment",
    # TensorFlow and torchvision bundle LLVMs that clash in one process.
    exclusive_with=("torch",),
)
