"""DenseNet-BC: each layer's ``growth_rate`` new channels are concatenated onto all earlier ones.

Defaults are DenseNet-121 at 224x224. Layers are BN-ReLU-1x1 (``bn_size * growth_rate`` channels) then
BN-ReLU-3x3; transitions between dense blocks compress channels by ``compression`` and halve the resolution.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from gnnperf.zoo.families._common import (
    check_choice,
    dropout,
    half,
    image_shape,
    pick,
    randint,
    require,
    sample_within,
)
from gnnperf.zoo.registry import Family, register_family

DEFAULTS: dict[str, Any] = {
    "growth_rate": 32,
    "block_config": [6, 12, 24, 16],
    "init_features": 64,
    "bn_size": 4,
    "compression": 0.5,
    "stem": "imagenet",
    "dropout": 0.0,
    "image_size": 224,
    "in_chans": 3,
    "num_classes": 1000,
}


class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int, bn_size: int, drop: float) -> None:
        super().__init__()
        inner = bn_size * growth
        self.body = nn.Sequential(
            nn.BatchNorm2d(cin),
            nn.ReLU(inplace=True),
            nn.Conv2d(cin, inner, 1, bias=False),
            nn.BatchNorm2d(inner),
            nn.ReLU(inplace=True),
            nn.Conv2d(inner, growth, 3, padding=1, bias=False),
            dropout(drop),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.body(x)], 1)


def _transition(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.BatchNorm2d(cin), nn.ReLU(inplace=True), nn.Conv2d(cin, cout, 1, bias=False), nn.AvgPool2d(2, 2)
    )


class DenseNet(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        c = p["init_features"]
        if p["stem"] == "imagenet":
            conv = nn.Conv2d(p["in_chans"], c, 7, 2, 3, bias=False)
            stem = [conv, nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
        else:
            stem = [nn.Conv2d(p["in_chans"], c, 3, 1, 1, bias=False)]
        layers: list[nn.Module] = list(stem)
        for i, n in enumerate(p["block_config"]):
            for _ in range(n):
                layers.append(DenseLayer(c, p["growth_rate"], p["bn_size"], p["dropout"]))
                c += p["growth_rate"]
            if i < len(p["block_config"]) - 1:
                cout = max(1, int(c * p["compression"]))
                layers.append(_transition(c, cout))
                c = cout
        layers += [nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c, p["num_classes"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def build(**params: Any) -> nn.Module:
    p = {**DEFAULTS, **params}
    check_choice("stem", p["stem"], ["imagenet", "cifar"])
    blocks = p["block_config"]
    require(len(blocks) >= 1 and min(blocks) >= 1, f"block_config must be positive, got {blocks}")
    require(0 < p["compression"] <= 1, f"compression must be in (0, 1], got {p['compression']}")
    stem_stride = 4 if p["stem"] == "imagenet" else 1
    require(
        p["image_size"] >= stem_stride * 2 ** (len(blocks) - 1),
        f"image_size {p['image_size']} is too small for {len(blocks)} dense blocks",
    )
    return DenseNet(p)


def macs(p: dict[str, Any]) -> float:
    c, h, k = p["init_features"], p["image_size"], p["growth_rate"]
    if p["stem"] == "imagenet":
        h = half(h)
        total = 49 * p["in_chans"] * c * h * h
        h = half(h)
    else:
        total = 9 * p["in_chans"] * c * h * h
    inner = p["bn_size"] * k
    for i, n in enumerate(p["block_config"]):
        for _ in range(n):
            total += (c * inner + 9 * inner * k) * h * h
            c += k
        if i < len(p["block_config"]) - 1:
            cout = max(1, int(c * p["compression"]))
            total += c * cout * h * h
            c, h = cout, h // 2
    return float(total + c * p["num_classes"])


def _draw(rng: np.random.Generator) -> dict[str, Any]:
    image_size = pick(rng, [32, 32, 48, 64, 96, 128])
    growth = pick(rng, [8, 12, 16, 24, 32])
    n_blocks = pick(rng, [3, 4]) if image_size > 32 else 3
    return {
        "growth_rate": growth,
        "block_config": [randint(rng, 2, 12) for _ in range(n_blocks)],
        "init_features": 2 * growth,
        "bn_size": pick(rng, [2, 4]),
        "compression": pick(rng, [0.5, 0.5, 1.0]),
        "stem": "cifar" if image_size <= 48 else "imagenet",
        "dropout": pick(rng, [0.0, 0.0, 0.2]),
        "image_size": image_size,
        "num_classes": pick(rng, [10, 100, 1000]),
    }


def sample(rng: np.random.Generator) -> dict[str, Any]:
    # Concatenation and batch norm over many narrow layers cost more per MAC than wide convolutions.
    return sample_within(rng, _draw, DEFAULTS, macs, 2e6, 1e8)


register_family(
    Family(
        name="densenet",
        build=build,
        sample=sample,
        defaults=DEFAULTS,
        input_kind="image",
        input_shape=image_shape,
        description="DenseNet-BC: densely concatenated layers, growth rate, block config, compression",
        macs=macs,
        tags=("cnn", "dense"),
    )
)
