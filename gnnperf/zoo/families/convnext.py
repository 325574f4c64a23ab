"""ConvNeXt: patchify stem, depthwise kxk convolution, channel LayerNorm and an inverted MLP per block.

Defaults are ConvNeXt-Atto (widths 40..320, depths 2,2,6,2) at 224x224; ``width=96&depths=3,3,9,3`` is
ConvNeXt-T. Stage widths double from ``width``. ``layer_scale=0`` drops the per-channel residual scale.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from gnnperf.zoo.families._common import image_shape, pick, randint, require, sample_within
from gnnperf.zoo.registry import Family, register_family

DEFAULTS: dict[str, Any] = {
    "depths": [2, 2, 6, 2],
    "width": 40,
    "kernel_size": 7,
    "mlp_ratio": 4,
    "layer_scale": 1e-6,
    "patch_size": 4,
    "image_size": 224,
    "in_chans": 3,
    "num_classes": 1000,
}


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW tensor (channels-last round trip)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class Block(nn.Module):
    def __init__(self, dim: int, kernel: int, ratio: int, layer_scale: float) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel, padding=kernel // 2, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, ratio * dim), nn.GELU(), nn.Linear(ratio * dim, dim))
        self.gamma = nn.Parameter(torch.full((dim,), layer_scale)) if layer_scale > 0 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.mlp(self.norm(self.dwconv(x).permute(0, 2, 3, 1)))
        if self.gamma is not None:
            y = y * self.gamma
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        dim, patch = p["width"], p["patch_size"]
        layers: list[nn.Module] = [nn.Conv2d(p["in_chans"], dim, patch, patch), LayerNorm2d(dim)]
        for i, depth in enumerate(p["depths"]):
            if i > 0:
                layers += [LayerNorm2d(dim), nn.Conv2d(dim, 2 * dim, 2, 2)]
                dim *= 2
            layers += [Block(dim, p["kernel_size"], p["mlp_ratio"], p["layer_scale"]) for _ in range(depth)]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, p["num_classes"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(torch.flatten(self.pool(self.features(x)), 1)))


def build(**params: Any) -> nn.Module:
    p = {**DEFAULTS, **params}
    depths = p["depths"]
    require(len(depths) >= 1 and min(depths) >= 1, f"depths must be positive, got {depths}")
    require(p["kernel_size"] % 2 == 1, f"kernel_size must be odd, got {p['kernel_size']}")
    require(
        p["image_size"] >= p["patch_size"] * 2 ** (len(depths) - 1),
        f"image_size {p['image_size']} is too small for patch_size {p['patch_size']} "
        f"and {len(depths)} stages",
    )
    return ConvNeXt(p)


def macs(p: dict[str, Any]) -> float:
    dim, patch = p["width"], p["patch_size"]
    h = p["image_size"] // patch
    total = patch * patch * p["in_chans"] * dim * h * h
    for i, depth in enumerate(p["depths"]):
        if i > 0:
            h //= 2
            total += 4 * dim * 2 * dim * h * h
            dim *= 2
        total += depth * (p["kernel_size"] ** 2 * dim + 2 * p["mlp_ratio"] * dim * dim) * h * h
    return float(total + dim * p["num_classes"])


def _draw(rng: np.random.Generator) -> dict[str, Any]:
    image_size = pick(rng, [32, 32, 64, 96, 128, 160, 224])
    n_stages = pick(rng, [3, 4, 4])
    depths = [randint(rng, 1, 3) for _ in range(n_stages)]
    depths[-2] = randint(rng, 1, 9)  # the deep third stage of ConvNeXt
    return {
        "depths": depths,
        "width": pick(rng, [16, 24, 32, 40, 48, 64, 96]),
        "kernel_size": pick(rng, [3, 5, 7, 7]),
        "mlp_ratio": pick(rng, [2, 3, 4, 4]),
        "layer_scale": pick(rng, [0.0, 1e-6]),
        "patch_size": 2 if image_size <= 32 else 4,
        "image_size": image_size,
        "num_classes": pick(rng, [10, 100, 1000]),
    }


def sample(rng: np.random.Generator) -> dict[str, Any]:
    return sample_within(rng, _draw, DEFAULTS, macs, 2e6, 2e8)


register_family(
    Family(
        name="convnext",
        build=build,
        sample=sample,
        defaults=DEFAULTS,
        input_kind="image",
        input_shape=image_shape,
        description="ConvNeXt: patchify stem, depthwise kxk conv, LayerNorm, inverted MLP, layer scale",
        macs=macs,
        tags=("cnn", "depthwise"),
    )
)
