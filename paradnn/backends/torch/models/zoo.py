"""The zoo models torchvision has, built by torchvision (imported only here, on first build).

paradnn's JAX zoo follows torchvision's layouts, so these builds have exactly the JAX models'
trainable parameters (tests compare with ``paradnn.backends.jax.models.param_count``): ResNet-18/50/101/152
(v1.5), DenseNet-121, VGG-16 (no BN), Inception v3 with its auxiliary head, AlexNet and
SqueezeNet 1.0, all for 1000 classes, with torchvision's own initializers.

Inception v3 trains on the main cross-entropy plus 0.4 x the auxiliary one, as the JAX model.
Below 299 px its 17x17 map shrinks: the auxiliary head then pools with a window of at most the
map and pads its 5x5 conv (SAME) when the pooled map is under 5 px, as the JAX model does; at
299 px it is torchvision's head unchanged.

Never import this module in a process that has imported TensorFlow: TF 2.21 and torchvision
0.29 register conflicting LLVM command-line options and abort the process.
"""

from __future__ import annotations

import types
from typing import Any

import torch
import torch.nn.functional as F

from paradnn.errors import SpecError
from paradnn.families.real import ZOO
from paradnn.backends.torch.models import TorchModel, softmax_xent
from paradnn.families.real import Real

IMAGENET_CLASSES = 1000
AUX_WEIGHT = 0.4  # Inception v3's auxiliary loss weight (as paradnn.backends.jax.models.zoo.inception)

# model -> (torchvision constructor name, smallest image side in pixels the network takes:
# the same minimum as the JAX model's, from its downsampling).
TORCHVISION: dict[str, tuple[str, int]] = {
    "resnet18": ("resnet18", 32), "resnet50": ("resnet50", 32), "resnet101": ("resnet101", 32),
    "resnet152": ("resnet152", 32), "densenet121": ("densenet121", 32), "vgg16": ("vgg16", 32),
    "inception_v3": ("inception_v3", 75), "alexnet": ("alexnet", 63), "squeezenet": ("squeezenet1_0", 35),
}


def _aux_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """torchvision's InceptionAux.forward, valid for maps under 17x17 (see the module doc)."""
    window = min(5, x.shape[-1])
    x = self.conv0(F.avg_pool2d(x, kernel_size=window, stride=3))
    if x.shape[-1] >= 5:
        x = self.conv1(x)
    else:
        conv = self.conv1.conv
        x = F.relu(self.conv1.bn(F.conv2d(x, conv.weight, None, conv.stride, 2)))
    x = torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1)
    return self.fc(x)


def _make_module(model: str) -> torch.nn.Module:
    import torchvision.models as tvm

    ctor = getattr(tvm, TORCHVISION[model][0])
    if model == "inception_v3":
        module = ctor(weights=None, aux_logits=True, init_weights=True, num_classes=IMAGENET_CLASSES)
        module.AuxLogits.forward = types.MethodType(_aux_forward, module.AuxLogits)
        return module
    return ctor(weights=None, num_classes=IMAGENET_CLASSES)


def _inception_loss(outputs: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits, aux = outputs  # torchvision's InceptionOutputs in training mode
    return softmax_xent(logits, batch["labels"]) + AUX_WEIGHT * softmax_xent(aux, batch["labels"])


def build(spec: Real, dtype: str) -> TorchModel:
    """The torchvision model of ``spec`` for square RGB images of ``spec.image`` pixels (the
    model's default when 0); SpecError for a model torchvision lacks or an image too small."""
    if spec.model not in TORCHVISION:
        raise SpecError("model", spec.model, "one of " + ", ".join(TORCHVISION) + " for framework torch")
    if spec.length:
        raise SpecError("length", spec.length, f"0 for {spec.model} (it takes images, not sequences)")
    image = spec.image or ZOO[spec.model].default_image
    minimum = TORCHVISION[spec.model][1]
    if image < minimum:
        raise SpecError("image", image, f"an integer >= {minimum} for {spec.model}")

    def make_batch(gen: torch.Generator, batch: int, device: Any) -> dict[str, torch.Tensor]:
        x = torch.randn((batch, 3, image, image), generator=gen, device=device)
        y = torch.randint(0, IMAGENET_CLASSES, (batch,), generator=gen, device=device)
        return {"inputs": x, "labels": y}

    loss = _inception_loss if spec.model == "inception_v3" else (
        lambda out, batch: softmax_xent(out, batch["labels"]))
    return TorchModel(spec.model, lambda: _make_module(spec.model), make_batch, loss,
                      tags={"kind": "real", "task": "image_classification", "image": image})


__all__ = ["TORCHVISION", "build"]
