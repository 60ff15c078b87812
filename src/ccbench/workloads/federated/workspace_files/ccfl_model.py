"""The seed-001 models: torchvision ResNet-18 and MobileNetV3-Small, untrained (weights=None).

The first convolution takes the dataset's channel count (1 for MNIST, 3 for CIFAR), as the seed
did for MNIST; the classifier has the dataset's class count. Nothing is downloaded.
"""

from __future__ import annotations

import torch.nn as nn
from torchvision import models


def build_model(name: str, num_classes: int, in_channels: int) -> nn.Module:
    if name == "resnet18":
        model = models.resnet18(weights=None, num_classes=num_classes)
        if in_channels != 3:
            model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
        return model
    if name == "mobilenet_v3_small":
        model = models.mobilenet_v3_small(weights=None, num_classes=num_classes)
        if in_channels != 3:
            first = model.features[0][0]
            model.features[0][0] = nn.Conv2d(
                in_channels,
                first.out_channels,
                kernel_size=first.kernel_size,
                stride=first.stride,
                padding=first.padding,
                bias=False,
            )
        return model
    raise ValueError(f"unknown model {name!r}")
