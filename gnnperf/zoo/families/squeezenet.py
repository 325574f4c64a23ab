"""SqueezeNet: fire modules (1x1 squeeze, parallel 1x1 and 3x3 expand, concatenated) between max-pools.

Defaults are SqueezeNet 1.1 at 224x224. The ``j``-th fire module squeezes to ``width * (1 + j // 2)``
channels (16, 16, 32, 32, 48, ... as in the paper) and expands each branch ``expand_ratio`` times that;
``bypass=true`` adds the paper's simple residual bypass where shapes allow it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from gnnperf.zoo.families._common import dropout, half, image_shape, pick, randint, require, sample_within
from gnnperf.zoo.registry import Family, register_family

DEFAULTS: dict[str, Any] = {
    "depths": [2, 2, 4],
    "width": 16,
    "expand_ratio": 4,
    "stem_width": 64,
    "bypass": False,
    "dropout": 0.5,
    "image_size": 224,
    "in_chans": 3,
    "num_classes": 1000,
}


class Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, expand: int, bypass: bool) -> None:
        super().__init__()
        self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU(inplace=True))
        self.expand1 = nn.Sequential(nn.Conv2d(squeeze, expand, 1), nn.ReLU(inplace=True))
        self.expand3 = nn.Sequential(nn.Conv2d(squeeze, expand, 3, padding=1), nn.ReLU(inplace=True))
        self.bypass = bypass and cin == 2 * expand

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.squeeze(x)
        y = torch.cat([self.expand1(s), self.expand3(s)], 1)
        return x + y if self.bypass else y


def _pool() -> nn.MaxPool2d:
    return nn.MaxPool2d(3, 2, ceil_mode=True)


def _pooled(size: int) -> int:
    return max(1, -(-(size - 3) // 2) + 1)  # ceil-mode 3x3/2 max-pool


class SqueezeNet(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        cin = p["stem_width"]
        layers: list[nn.Module] = [nn.Conv2d(p["in_chans"], cin, 3, 2, 1), nn.ReLU(inplace=True), _pool()]
        fire = 0
        for i, depth in enumerate(p["depths"]):
            if i > 0:
                layers.append(_pool())
            for _ in range(depth):
                squeeze = p["width"] * (1 + fire // 2)
                expand = p["expand_ratio"] * squeeze
                layers.append(Fire(cin, squeeze, expand, p["bypass"]))
                cin, fire = 2 * expand, fire + 1
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            dropout(p["dropout"]),
            nn.Conv2d(cin, p["num_classes"], 1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)


def build(**params: Any) -> nn.Module:
    p = {**DEFAULTS, **params}
    require(len(p["depths"]) >= 1 and min(p["depths"]) >= 1, f"depths must be positive, got {p['depths']}")
    require(p["image_size"] >= 16, f"image_size must be at least 16, got {p['image_size']}")
    return SqueezeNet(p)


def macs(p: dict[str, Any]) -> float:
    cin, h = p["stem_width"], half(p["image_size"])
    total = 9 * p["in_chans"] * cin * h * h
    h, fire = _pooled(h), 0
    for i, depth in enumerate(p["depths"]):
        if i > 0:
            h = _pooled(h)
        for _ in range(depth):
            squeeze = p["width"] * (1 + fire // 2)
            expand = p["expand_ratio"] * squeeze
            total += (cin * squeeze + 10 * squeeze * expand) * h * h
            cin, fire = 2 * expand, fire + 1
    return float(total + cin * p["num_classes"] * h * h)


def _draw(rng: np.random.Generator) -> dict[str, Any]:
    return {
        "depths": [randint(rng, 1, 3), randint(rng, 1, 3), randint(rng, 1, 5)],
        "width": pick(rng, [8, 16, 24, 32, 48]),
        "expand_ratio": pick(rng, [2, 4, 4]),
        "stem_width": pick(rng, [32, 64, 96]),
        "bypass": bool(rng.random() < 0.3),
        "dropout": pick(rng, [0.0, 0.5]),
        "image_size": pick(rng, [32, 64, 96, 128, 160, 224]),
        "num_classes": pick(rng, [10, 100, 1000]),
    }


def sample(rng: np.random.Generator) -> dict[str, Any]:
    return sample_within(rng, _draw, DEFAULTS, macs, 2e6, 3e8)


register_family(
    Family(
        name="squeezenet",
        build=build,
        sample=sample,
        defaults=DEFAULTS,
        input_kind="image",
        input_shape=image_shape,
        description="SqueezeNet: fire modules (1x1 squeeze, 1x1+3x3 expand), optional simple bypass",
        macs=macs,
        tags=("cnn",),
    )
)
