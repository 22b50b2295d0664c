"""The zoo of real models as one family: per model its defaults and the frameworks that build it.

The facts here are framework-neutral (no JAX import): default batch (examples), default image
(pixels) or sequence length (tokens), default optimizer (the one its reference training uses),
which frameworks build it, and its sizes. The JAX definitions live in
``paradnn.backends.jax.models.zoo`` (the layouts follow torchvision where torchvision has the
model, so PyTorch's builds have the same parameters); Keras builds mirror the same layouts.

Sizes are a table, not a closed form: the reference backend's counts (JAX), taken once and
written here so that planning, the memory floor and the runner's model FLOPs need no framework.
``params`` (trainable parameters, from ``jax.eval_shape`` of the model's init) does not depend
on the input size in any zoo model (adaptive pooling, fixed position tables);
``train_flops`` (matmul and convolution FLOPs of one training step per example, from the
training step's jaxpr: ``paradnn.backends.jax.jaxpr_flops.count_matmul_flops``; convolution taps
on padding are not counted, so it is below the published GMAC x 6 of the descriptions) holds at
the default input size only, and is linear in the batch. tests/test_families.py recounts both with
JAX and fails when a model changes and its row does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from paradnn.errors import SpecError
from paradnn.families import Axis, Family, register
from paradnn.families.spec import Spec, positive_int


@dataclass(frozen=True)
class ZooModel:
    module: str  # the JAX definition: paradnn.backends.jax.models.zoo.<module>
    default_batch: int
    default_optimizer: str
    description: str
    default_image: int = 0  # pixels, 0 when the model takes no image
    default_length: int = 0  # tokens or frames, 0 when the model takes no sequence
    frameworks: tuple[str, ...] = ("jax",)
    params: int = 0  # trainable parameters, at any input size
    train_flops: float = 0.0  # FLOPs of one training step per example, at the default input size


_TV = ("jax", "tensorflow", "torch")  # torchvision has it and Keras builds mirror it
_IMAGENET = "ImageNet 1000 classes"

ZOO: dict[str, ZooModel] = {
    "alexnet": ZooModel("alexnet", 128, "momentum", f"AlexNet single tower (torchvision layout), {_IMAGENET}, "
                        "0.72 GMAC/example forward as published at 224 px",
                        default_image=224, frameworks=("jax", "torch"),
                        params=61_100_840, train_flops=3_808_349_184),
    "bert_base": ZooModel("bert", 32, "adam", "BERT-base (12 layers, 768 wide), masked-LM objective, 15% "
                          "masked positions", default_length=128,
                          params=109_514_298, train_flops=69_925_441_536),
    "deepspeech2": ZooModel("deepspeech2", 32, "momentum", "Deep Speech 2 (2 conv + 5 bidirectional GRU "
                            "layers of 640, CTC loss), 400 spectrogram frames of 161 bins (length = frames)",
                            default_length=400,
                            params=27_471_008, train_flops=41_031_176_604),
    "densenet121": ZooModel("densenet", 128, "momentum", f"DenseNet-121 (growth 32, torchvision layout), "
                            f"{_IMAGENET}, 2.9 GMAC/example forward as published at 224 px",
                            default_image=224, frameworks=_TV,
                            params=7_978_856, train_flops=16_437_144_576),
    "inception_v3": ZooModel("inception", 128, "rmsprop", f"Inception v3 with auxiliary head (torchvision "
                             f"layout), {_IMAGENET}, 5.7 GMAC/example forward as published at 299 px",
                             default_image=299,
                             frameworks=_TV,
                             params=27_161_264, train_flops=32_803_323_264),
    "lstm_lm": ZooModel("lstm_lm", 20, "sgd", "2-layer LSTM language model, PTB large (hidden 1500, "
                        "vocabulary 10k), 35-token sequences", default_length=35,
                        params=66_022_000, train_flops=10_710_000_000),
    "mobilenet": ZooModel("mobilenet", 128, "rmsprop", f"MobileNet v1, width 1.0, {_IMAGENET}, 0.57 "
                          "GMAC/example forward as published at 224 px",
                          default_image=224, frameworks=("jax", "tensorflow"),
                          params=4_231_976, train_flops=3_385_707_264),
    "retinanet": ZooModel("retinanet", 8, "momentum", "RetinaNet, ResNet-50 FPN (P3-P7), 80 classes, focal "
                          "loss on synthetic anchor targets", default_image=640,
                          params=37_968_692, train_flops=558_936_622_080),
    "squeezenet": ZooModel("squeezenet", 128, "momentum", f"SqueezeNet 1.0 (torchvision layout), {_IMAGENET}, "
                           "0.82 GMAC/example forward as published at 224 px",
                           default_image=224, frameworks=("jax", "torch"),
                           params=1_248_424, train_flops=4_464_824_448),
    "transformer": ZooModel("transformer", 16, "adafactor", "Transformer base (6+6 layers, d 512, shared 37k "
                            "vocabulary), translation; batch in sentences of `length` tokens (16 x 256 = "
                            "4096 tokens)", default_length=256,
                            params=63_084_544, train_flops=103_991_476_224),
    "vgg16": ZooModel("vgg", 64, "momentum", f"VGG-16 (configuration D, no BN), {_IMAGENET}, 15.5 "
                      "GMAC/example forward as published at 224 px", default_image=224, frameworks=_TV,
                      params=138_357_544, train_flops=89_646_566_400),
}
for _depth, _gmac, _params, _flops in (
        ("18", 1.82, 11_689_512, 9_849_916_416), ("50", 4.1, 25_557_032, 23_457_082_368),
        ("101", 7.8, 44_549_160, 44_634_123_264), ("152", 11.6, 60_192_808, 65_938_566_144)):
    ZOO[f"resnet{_depth}"] = ZooModel(
        "resnet", 128, "momentum", f"ResNet-{_depth} v1.5 (torchvision layout), {_IMAGENET}, {_gmac} "
        "GMAC/example forward as published at 224 px", default_image=224, frameworks=_TV, params=_params,
        train_flops=_flops)


def names() -> list[str]:
    """Zoo model names, sorted."""
    return sorted(ZOO)


@dataclass(frozen=True)
class Real(Spec):
    """A real model from the zoo (``paradnn list models``); ``image`` (pixels) or ``length``
    (tokens) override its default input size where the model has one; 0 means the default."""

    model: str
    image: int = 0
    length: int = 0
    family: ClassVar[str] = "real"

    def __post_init__(self) -> None:
        for name in ("image", "length"):
            value = getattr(self, name)
            if value in (0, None):
                object.__setattr__(self, name, 0)
            else:
                object.__setattr__(self, name, positive_int(name, value))
        if not isinstance(self.model, str) or self.model not in ZOO:
            raise SpecError("model", self.model, "one of " + ", ".join(names()))


def param_count(spec: Real) -> int:
    """Trainable parameters of the zoo model (the table's count: the same at every input size)."""
    return ZOO[spec.model].params


def reference_flops_per_example(spec: Real) -> float | None:
    """Training FLOPs per example from the table, at the model's default input size; None at
    another size (an ``image`` or ``length`` override), where only a trace can count them."""
    entry = ZOO[spec.model]
    if spec.image not in (0, entry.default_image) or spec.length not in (0, entry.default_length):
        return None
    return entry.train_flops


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
    # The reference backend's counts, tabulated (see the module notes); no closed form of the
    # FLOPs, so at an overridden input size the JAX jaxpr counts them.
    param_count=param_count,
    train_flops_per_example=None,
    reference_flops_per_example=reference_flops_per_example,
    default_batch=lambda spec: ZOO[spec.model].default_batch,
    default_optimizer=lambda spec: ZOO[spec.model].default_optimizer,
    frameworks=lambda spec: ZOO[spec.model].frameworks,
    tiny=({"model": "resnet18", "image": 96, "batch": 2},),  # 96: see the cnn family's tiny presets
    display="real model",
    marker="*",
    # 2 (2026-11-29): convolution taps on padding no longer count (paradnn.convolution), as in
    # the generated CNN family, XLA's cost analysis and the torch counter; rule 1 counted them.
    count_rule=2,
))
