"""MobileNet-style networks of inverted residual blocks (MobileNetV2/V3, EfficientNet).

A block expands channels with a 1x1 convolution, filters them depthwise, optionally re-weights them with
squeeze-and-excitation, and projects back with a linear 1x1 convolution. Defaults are MobileNetV2 1.0 at
224x224; ``se=true&act=hardswish`` is V3-like, ``se=true&act=silu&kernel_size=5`` EfficientNet-like.
Stages follow MobileNetV2's channel/stride table; ``depths`` may list fewer than its seven stages.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from gnnperf.zoo.families._common import (
    activation,
    check_choice,
    dropout,
    half,
    image_shape,
    make_divisible,
    pick,
    randint,
    require,
    sample_within,
)
from gnnperf.zoo.registry import Family, register_family

# (output channels at width_mult=1, stride of the stage's first block), as in MobileNetV2
STAGES = [(16, 1), (24, 2), (32, 2), (64, 2), (96, 1), (160, 2), (320, 1)]
ACTS = ["relu", "relu6", "hardswish", "silu"]

DEFAULTS: dict[str, Any] = {
    "depths": [1, 2, 3, 4, 3, 3, 1],
    "width_mult": 1.0,
    "expansion": 6,
    "kernel_size": 3,
    "se": False,
    "act": "relu6",
    "stem_width": 32,
    "head_width": 1280,
    "dropout": 0.2,
    "image_size": 224,
    "in_chans": 3,
    "num_classes": 1000,
}


def _conv_bn_act(
    cin: int, cout: int, kernel: int, stride: int, groups: int, act: str | None
) -> nn.Sequential:
    layers = [
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    return nn.Sequential(*layers, activation(act)) if act else nn.Sequential(*layers)


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeeze: int, hard_gate: bool) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.reduce = nn.Conv2d(channels, squeeze, 1)
        self.act = nn.ReLU(inplace=True)
        self.expand = nn.Conv2d(squeeze, channels, 1)
        self.gate = nn.Hardsigmoid() if hard_gate else nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.expand(self.act(self.reduce(self.pool(x)))))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expansion: int, p: dict[str, Any]) -> None:
        super().__init__()
        hidden = cin * expansion
        layers: list[nn.Module] = []
        if expansion != 1:
            layers.append(_conv_bn_act(cin, hidden, 1, 1, 1, p["act"]))
        layers.append(_conv_bn_act(hidden, hidden, p["kernel_size"], stride, hidden, p["act"]))
        if p["se"]:
            layers.append(SqueezeExcite(hidden, make_divisible(hidden / 4), p["act"] == "hardswish"))
        layers.append(_conv_bn_act(hidden, cout, 1, 1, 1, None))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNet(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        cin = make_divisible(p["stem_width"] * p["width_mult"])
        self.stem = _conv_bn_act(p["in_chans"], cin, 3, 2, 1, p["act"])
        blocks = []
        for i, (depth, (channels, stride)) in enumerate(zip(p["depths"], STAGES, strict=False)):
            cout = make_divisible(channels * p["width_mult"])
            for j in range(depth):
                expansion = 1 if i == 0 else p["expansion"]
                blocks.append(InvertedResidual(cin, cout, stride if j == 0 else 1, expansion, p))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        head = p["head_width"]
        self.head = _conv_bn_act(cin, head, 1, 1, 1, p["act"]) if head > 0 else nn.Identity()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(dropout(p["dropout"]), nn.Linear(head or cin, p["num_classes"]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.blocks(self.stem(x)))
        return self.classifier(torch.flatten(self.pool(x), 1))


def build(**params: Any) -> nn.Module:
    p = {**DEFAULTS, **params}
    check_choice("act", p["act"], ACTS)
    n = len(p["depths"])
    require(1 <= n <= len(STAGES), f"depths lists 1 to {len(STAGES)} stages, got {n}")
    require(min(p["depths"]) >= 1, f"depths must be positive, got {p['depths']}")
    require(p["kernel_size"] % 2 == 1, f"kernel_size must be odd, got {p['kernel_size']}")
    require(p["expansion"] >= 1 and p["width_mult"] > 0, "expansion and width_mult must be positive")
    return MobileNet(p)


def macs(p: dict[str, Any]) -> float:
    h = half(p["image_size"])
    cin = make_divisible(p["stem_width"] * p["width_mult"])
    total = 9 * p["in_chans"] * cin * h * h
    k2 = p["kernel_size"] ** 2
    for i, (depth, (channels, stride)) in enumerate(zip(p["depths"], STAGES, strict=False)):
        cout = make_divisible(channels * p["width_mult"])
        for j in range(depth):
            hidden = cin * (1 if i == 0 else p["expansion"])
            h_in, h = h, (half(h) if stride == 2 and j == 0 else h)
            total += (cin * hidden * h_in * h_in if hidden != cin else 0) + k2 * hidden * h * h
            total += hidden * cout * h * h + (2 * hidden * make_divisible(hidden / 4) if p["se"] else 0)
            cin = cout
    head = p["head_width"]
    total += cin * head * h * h + (head or cin) * p["num_classes"]
    return float(total)


def _draw(rng: np.random.Generator) -> dict[str, Any]:
    n_stages = pick(rng, [5, 6, 7, 7])
    depths = [1, randint(rng, 1, 3), randint(rng, 1, 4), randint(rng, 1, 5), randint(rng, 1, 4)]
    depths += [randint(rng, 1, 4), 1][: n_stages - 5]
    act = pick(rng, ACTS)
    return {
        "depths": depths,
        "width_mult": pick(rng, [0.35, 0.5, 0.75, 1.0, 1.25]),
        "expansion": pick(rng, [3, 4, 6]),
        "kernel_size": pick(rng, [3, 3, 5]),
        "se": bool(rng.random() < 0.5),
        "act": act,
        "stem_width": pick(rng, [16, 32]),
        "head_width": pick(rng, [0, 576, 1024, 1280]),
        "dropout": pick(rng, [0.0, 0.2]),
        "image_size": pick(rng, [64, 96, 128, 160, 192, 224]),
        "num_classes": pick(rng, [10, 100, 1000]),
    }


def sample(rng: np.random.Generator) -> dict[str, Any]:
    # Depthwise convolutions run far below GEMM speed on CPUs, hence the lower ceiling.
    return sample_within(rng, _draw, DEFAULTS, macs, 1e6, 5e7)


register_family(
    Family(
        name="mobilenet",
        build=build,
        sample=sample,
        defaults=DEFAULTS,
        input_kind="image",
        input_shape=image_shape,
        description="MobileNetV2/V3/EfficientNet-style inverted residuals: depthwise conv, expansion, SE",
        macs=macs,
        tags=("cnn", "depthwise"),
    )
)
