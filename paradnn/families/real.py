"""The zoo of real models as one family: per model its defaults and the frameworks that build it.

The facts here are framework-neutral (no JAX import): default batch (examples), default image
(pixels) or sequence length (tokens), default optimizer (the one its reference training uses),
and which frameworks build it. The JAX definitions live in ``paradnn.backends.jax.models.zoo`` (the layouts
follow torchvision where torchvision has the model, so PyTorch's builds have the same
parameters); Keras builds mirror the same layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

from paradnn.families import Axis, Family, register
from paradnn.specs import Real


@dataclass(frozen=True)
class ZooModel:
    module: str  # the JAX definition: paradnn.backends.jax.models.zoo.<module>
    default_batch: int
    default_optimizer: str
    description: str
    default_image: int = 0  # pixels, 0 when the model takes no image
    default_length: int = 0  # tokens or frames, 0 when the model takes no sequence
    frameworks: tuple[str, ...] = ("jax",)


_TV = ("jax", "tensorflow", "torch")  # torchvision has it and Keras builds mirror it
_IMAGENET = "ImageNet 1000 classes"

ZOO: dict[str, ZooModel] = {
    "alexnet": ZooModel("alexnet", 128, "momentum", f"AlexNet single tower (torchvision layout), {_IMAGENET}, "
                        "0.72 GMAC/example forward at 224 px", default_image=224, frameworks=("jax", "torch")),
    "bert_base": ZooModel("bert", 32, "adam", "BERT-base (12 layers, 768 wide), masked-LM objective, 15% "
                          "masked positions", default_length=128),
    "deepspeech2": ZooModel("deepspeech2", 32, "momentum", "Deep Speech 2 (2 conv + 5 bidirectional GRU "
                            "layers of 640, CTC loss), 400 spectrogram frames of 161 bins (length = frames)",
                            default_length=400),
    "densenet121": ZooModel("densenet", 128, "momentum", f"DenseNet-121 (growth 32, torchvision layout), "
                            f"{_IMAGENET}, 2.9 GMAC/example forward at 224 px", default_image=224, frameworks=_TV),
    "inception_v3": ZooModel("inception", 128, "rmsprop", f"Inception v3 with auxiliary head (torchvision "
                             f"layout), {_IMAGENET}, 5.7 GMAC/example forward at 299 px", default_image=299,
                             frameworks=_TV),
    "lstm_lm": ZooModel("lstm_lm", 20, "sgd", "2-layer LSTM language model, PTB large (hidden 1500, "
                        "vocabulary 10k), 35-token sequences", default_length=35),
    "mobilenet": ZooModel("mobilenet", 128, "rmsprop", f"MobileNet v1, width 1.0, {_IMAGENET}, 0.57 "
                          "GMAC/example forward at 224 px", default_image=224, frameworks=("jax", "tensorflow")),
    "retinanet": ZooModel("retinanet", 8, "momentum", "RetinaNet, ResNet-50 FPN (P3-P7), 80 classes, focal "
                          "loss on synthetic anchor targets", default_image=640),
    "squeezenet": ZooModel("squeezenet", 128, "momentum", f"SqueezeNet 1.0 (torchvision layout), {_IMAGENET}, "
                           "0.82 GMAC/example forward at 224 px", default_image=224, frameworks=("jax", "torch")),
    "transformer": ZooModel("transformer", 16, "adafactor", "Transformer base (6+6 layers, d 512, shared 37k "
                            "vocabulary), translation; batch in sentences of `length` tokens (16 x 256 = "
                            "4096 tokens)", default_length=256),
    "vgg16": ZooModel("vgg", 64, "momentum", f"VGG-16 (configuration D, no BN), {_IMAGENET}, 15.5 "
                      "GMAC/example forward at 224 px", default_image=224, frameworks=_TV),
}
for _depth, _gmac in (("18", 1.82), ("50", 4.1), ("101", 7.8), ("152", 11.6)):
    ZOO[f"resnet{_depth}"] = ZooModel(
        "resnet", 128, "momentum", f"ResNet-{_depth} v1.5 (torchvision layout), {_IMAGENET}, {_gmac} "
        "GMAC/example forward at 224 px", default_image=224, frameworks=_TV)


def names() -> list[str]:
    """Zoo model names, sorted."""
    return sorted(ZOO)


FAMILY = register(Family(
    name="real",
    spec=Real,
    kind="real",
    description="a real model: --model [--image] [--length]",
    axes=(
        Axis("model", "", "name of a zoo model (`paradnn list models`)", choices=tuple(sorted(ZOO))),
        Axis("image", "pixels", "side of the square input image in pixels (0: the model's own)"),
        Axis("length", "tokens", "sequence length in tokens or frames (0: the model's own)"),
    ),
    builders={"jax": "paradnn.backends.jax.models:build_real", "tensorflow": "paradnn.backends.tensorflow.models.zoo:build",
              "torch": "paradnn.backends.torch.models.zoo:build"},
    # Counted from the JAX model's shapes and jaxpr (every install has JAX): shared by backends.
    param_count=None,
    train_flops_per_example=None,
    default_batch=lambda spec: ZOO[spec.model].default_batch,
    default_optimizer=lambda spec: ZOO[spec.model].default_optimizer,
    frameworks=lambda spec: ZOO[spec.model].frameworks,
    tiny=({"model": "resnet18", "image": 32, "batch": 2},),
))
