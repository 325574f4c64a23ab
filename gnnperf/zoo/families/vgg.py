"""VGG: stages of 3x3 convolutions (optionally batch-normalised) separated by 2x2 max-pooling.

Defaults are VGG-11-BN's convolutional stages at 224x224. The classifier takes the globally pooled features
(``global_pool=true``) or the flattened last feature map, as the original, through two hidden fully connected
layers of ``fc_width`` (``fc_width=0``: one linear layer).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from gnnperf.zoo.families._common import dropout, image_shape, pick, randint, require, sample_within
from gnnperf.zoo.registry import Family, register_family

DEFAULTS: dict[str, Any] = {
    "depths": [1, 1, 2, 2, 2],
    "width": 64,
    "batch_norm": True,
    "global_pool": True,
    "fc_width": 512,
    "dropout": 0.5,
    "image_size": 224,
    "in_chans": 3,
    "num_classes": 1000,
}


def _stage_width(width: int, stage: int) -> int:
    return width * 2 ** min(stage, 3)  # 64, 128, 256, 512, 512 as in VGG


class VGG(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = p["in_chans"]
        for i, depth in enumerate(p["depths"]):
            cout = _stage_width(p["width"], i)
            for _ in range(depth):
                layers.append(nn.Conv2d(cin, cout, 3, padding=1, bias=not p["batch_norm"]))
                if p["batch_norm"]:
                    layers.append(nn.BatchNorm2d(cout))
                layers.append(nn.ReLU(inplace=True))
                cin = cout
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1) if p["global_pool"] else nn.Identity()
        final = p["image_size"] // 2 ** len(p["depths"])
        feat = cin if p["global_pool"] else cin * final * final
        fc, drop = p["fc_width"], p["dropout"]
        if fc > 0:
            head = [nn.Linear(feat, fc), nn.ReLU(inplace=True), dropout(drop), nn.Linear(fc, fc)]
            head += [nn.ReLU(inplace=True), dropout(drop), nn.Linear(fc, p["num_classes"])]
            self.classifier = nn.Sequential(*head)
        else:
            self.classifier = nn.Sequential(dropout(drop), nn.Linear(feat, p["num_classes"]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def build(**params: Any) -> nn.Module:
    p = {**DEFAULTS, **params}
    require(len(p["depths"]) >= 1 and min(p["depths"]) >= 1, f"depths must be positive, got {p['depths']}")
    require(
        p["image_size"] >= 2 ** len(p["depths"]),
        f"image_size {p['image_size']} is too small for {len(p['depths'])} pooling stages",
    )
    return VGG(p)


def macs(p: dict[str, Any]) -> float:
    cin, h, total = p["in_chans"], p["image_size"], 0
    for i, depth in enumerate(p["depths"]):
        cout = _stage_width(p["width"], i)
        total += 9 * (cin * cout + (depth - 1) * cout * cout) * h * h
        cin, h = cout, h // 2
    feat = cin if p["global_pool"] else cin * h * h
    fc = p["fc_width"]
    head = feat * fc + fc * fc + fc * p["num_classes"] if fc > 0 else feat * p["num_classes"]
    return float(total + head)


def _draw(rng: np.random.Generator) -> dict[str, Any]:
    n_stages = pick(rng, [3, 4, 5, 5])
    image_size = pick(rng, [32, 32, 48, 64, 96, 128])
    return {
        "depths": [randint(rng, 1, 2 if i < 2 else 3) for i in range(n_stages)],
        "width": pick(rng, [8, 16, 24, 32, 48, 64]),
        "batch_norm": bool(rng.random() < 0.6),
        "global_pool": bool(image_size > 64 or rng.random() < 0.5),
        "fc_width": pick(rng, [0, 256, 512, 1024, 2048]),
        "dropout": pick(rng, [0.0, 0.5]),
        "image_size": image_size,
        "num_classes": pick(rng, [10, 100, 1000]),
    }


def sample(rng: np.random.Generator) -> dict[str, Any]:
    return sample_within(rng, _draw, DEFAULTS, macs, 3e6, 4e8)


register_family(
    Family(
        name="vgg",
        build=build,
        sample=sample,
        defaults=DEFAULTS,
        input_kind="image",
        input_shape=image_shape,
        description="VGG: plain 3x3 convolution stages with max-pooling, optional batch norm, FC classifier",
        macs=macs,
        tags=("cnn",),
    )
)
