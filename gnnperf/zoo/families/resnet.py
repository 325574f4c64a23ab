"""ResNet / ResNeXt: basic or bottleneck residual blocks in stages of doubling width.

Defaults are ResNet-18 at 224x224. ``block=bottleneck&depths=3,4,6,3`` gives ResNet-50;
``groups=32&width_per_group=4`` with bottlenecks gives ResNeXt. ``stem=cifar`` replaces the 7x7/2 convolution
and max-pool by one 3x3/1 convolution for small images.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from gnnperf.zoo.families._common import (
    check_choice,
    half,
    image_shape,
    pick,
    randint,
    require,
    sample_within,
)
from gnnperf.zoo.registry import Family, register_family

DEFAULTS: dict[str, Any] = {
    "block": "basic",
    "depths": [2, 2, 2, 2],
    "width": 64,
    "groups": 1,
    "width_per_group": 64,
    "stem": "imagenet",
    "image_size": 224,
    "in_chans": 3,
    "num_classes": 1000,
}
EXPANSION = {"basic": 1, "bottleneck": 4}


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    conv = nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False)
    return nn.Sequential(conv, nn.BatchNorm2d(cout))


def _inner_width(planes: int, groups: int, width_per_group: int) -> int:
    # torchvision's rule, with the stage width in place of 64 * 2**stage.
    return max(1, planes * width_per_group // 64) * groups


class Block(nn.Module):
    def __init__(
        self, kind: str, cin: int, planes: int, stride: int, groups: int, width_per_group: int
    ) -> None:
        super().__init__()
        cout = planes * EXPANSION[kind]
        if kind == "basic":
            self.body = nn.Sequential(
                _conv_bn(cin, planes, 3, stride), nn.ReLU(inplace=True), _conv_bn(planes, planes, 3)
            )
        else:
            inner = _inner_width(planes, groups, width_per_group)
            self.body = nn.Sequential(
                _conv_bn(cin, inner, 1),
                nn.ReLU(inplace=True),
                _conv_bn(inner, inner, 3, stride, groups),
                nn.ReLU(inplace=True),
                _conv_bn(inner, cout, 1),
            )
        self.shortcut = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.body(x) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        kind, width = p["block"], p["width"]
        if p["stem"] == "imagenet":
            self.stem = nn.Sequential(
                _conv_bn(p["in_chans"], width, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
            )
        else:
            self.stem = nn.Sequential(_conv_bn(p["in_chans"], width, 3), nn.ReLU(inplace=True))
        stages, cin = [], width
        for i, depth in enumerate(p["depths"]):
            planes = width * 2**i
            blocks = []
            for j in range(depth):
                stride = 2 if i > 0 and j == 0 else 1
                blocks.append(Block(kind, cin, planes, stride, p["groups"], p["width_per_group"]))
                cin = planes * EXPANSION[kind]
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, p["num_classes"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def _validate(p: dict[str, Any]) -> None:
    check_choice("block", p["block"], list(EXPANSION))
    check_choice("stem", p["stem"], ["imagenet", "cifar"])
    require(len(p["depths"]) >= 1 and min(p["depths"]) >= 1, f"depths must be positive, got {p['depths']}")
    require(p["width"] >= 1 and p["groups"] >= 1, "width and groups must be positive")
    if p["block"] == "basic":
        require(
            p["groups"] == 1 and p["width_per_group"] == 64,
            "basic blocks take groups=1 and width_per_group=64; use block=bottleneck for ResNeXt",
        )


def build(**params: Any) -> nn.Module:
    p = {**DEFAULTS, **params}
    _validate(p)
    return ResNet(p)


def macs(p: dict[str, Any]) -> float:
    kind, width, cin, h = p["block"], p["width"], p["in_chans"], p["image_size"]
    if p["stem"] == "imagenet":
        h = half(h)
        total = 49 * cin * width * h * h
        h = half(h)
    else:
        total = 9 * cin * width * h * h
    cin = width
    for i, depth in enumerate(p["depths"]):
        planes = width * 2**i
        cout = planes * EXPANSION[kind]
        for j in range(depth):
            h_in, h = h, (half(h) if i > 0 and j == 0 else h)
            if kind == "basic":
                total += 9 * (cin * planes + planes * planes) * h * h
            else:
                inner = _inner_width(planes, p["groups"], p["width_per_group"])
                total += (
                    cin * inner * h_in * h_in
                    + 9 * inner * inner // p["groups"] * h * h
                    + inner * cout * h * h
                )
            if h != h_in or cin != cout:
                total += cin * cout * h * h
            cin = cout
    return float(total + cin * p["num_classes"])


def _draw(rng: np.random.Generator) -> dict[str, Any]:
    block = pick(rng, ["basic", "basic", "bottleneck"])
    image_size = pick(rng, [32, 32, 48, 64, 96, 128, 160, 224])
    p: dict[str, Any] = {
        "block": block,
        "depths": [randint(rng, 1, 3 if block == "basic" else 4) for _ in range(pick(rng, [3, 4, 4]))],
        "width": pick(rng, [8, 16, 24, 32, 48, 64]),
        "groups": 1,
        "width_per_group": 64,
        "stem": "cifar" if image_size <= 48 else "imagenet",
        "image_size": image_size,
        "num_classes": pick(rng, [10, 100, 1000]),
    }
    if block == "bottleneck" and rng.random() < 0.4:
        p["groups"] = pick(rng, [4, 8, 16, 32])
        p["width_per_group"] = pick(rng, [2, 4, 8])
    return p


def sample(rng: np.random.Generator) -> dict[str, Any]:
    return sample_within(rng, _draw, DEFAULTS, macs, 3e6, 4e8)


register_family(
    Family(
        name="resnet",
        build=build,
        sample=sample,
        defaults=DEFAULTS,
        input_kind="image",
        input_shape=image_shape,
        description="ResNet/ResNeXt: basic or bottleneck residual blocks, optional grouped convolutions",
        macs=macs,
        tags=("cnn", "residual"),
    )
)
