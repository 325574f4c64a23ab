"""Patch-based image models: Vision Transformer and MLP-Mixer.

Both cut the image into ``patch_size`` squares with a strided convolution. ViT (defaults: ViT-Ti/16 at 224)
adds a class token and learned position embedding and runs pre-norm transformer blocks; MLP-Mixer (defaults:
a narrower Mixer-S/16) alternates a token-mixing MLP across patches with a channel-mixing MLP.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from gnnperf.zoo.families._common import (
    TransformerBlock,
    dropout,
    image_shape,
    pick,
    randint,
    require,
    sample_within,
    transformer_macs,
)
from gnnperf.zoo.registry import Family, register_family

VIT_DEFAULTS: dict[str, Any] = {
    "patch_size": 16,
    "dim": 192,
    "depth": 12,
    "heads": 3,
    "mlp_ratio": 4.0,
    "class_token": True,
    "dropout": 0.0,
    "image_size": 224,
    "in_chans": 3,
    "num_classes": 1000,
}
MIXER_DEFAULTS: dict[str, Any] = {
    "patch_size": 16,
    "dim": 256,
    "depth": 8,
    "token_mlp_dim": 128,
    "channel_mlp_dim": 1024,
    "dropout": 0.0,
    "image_size": 224,
    "in_chans": 3,
    "num_classes": 1000,
}


def _num_patches(p: dict[str, Any]) -> int:
    require(
        p["image_size"] % p["patch_size"] == 0,
        f"image_size {p['image_size']} is not a multiple of patch_size {p['patch_size']}",
    )
    return (p["image_size"] // p["patch_size"]) ** 2


class PatchEmbed(nn.Module):
    def __init__(self, in_chans: int, dim: int, patch: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, patch, patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)  # (B, patches, dim)


class ViT(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        dim, n = p["dim"], _num_patches(p)
        self.patch = PatchEmbed(p["in_chans"], dim, p["patch_size"])
        self.cls = nn.Parameter(torch.zeros(1, 1, dim)) if p["class_token"] else None
        self.pos = nn.Parameter(torch.randn(1, n + int(p["class_token"]), dim) * 0.02)
        self.drop = dropout(p["dropout"])
        hidden = int(dim * p["mlp_ratio"])
        self.blocks = nn.Sequential(
            *(TransformerBlock(dim, p["heads"], hidden, p["dropout"]) for _ in range(p["depth"]))
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, p["num_classes"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x)
        if self.cls is not None:
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1)
        x = self.norm(self.blocks(self.drop(x + self.pos)))
        return self.head(x[:, 0] if self.cls is not None else x.mean(1))


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, dim: int, token_hidden: int, channel_hidden: int, drop: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.token_mlp = nn.Sequential(
            nn.Linear(tokens, token_hidden), nn.GELU(), dropout(drop), nn.Linear(token_hidden, tokens)
        )
        self.norm2 = nn.LayerNorm(dim)
        self.channel_mlp = nn.Sequential(
            nn.Linear(dim, channel_hidden), nn.GELU(), dropout(drop), nn.Linear(channel_hidden, dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class Mixer(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        dim, n = p["dim"], _num_patches(p)
        self.patch = PatchEmbed(p["in_chans"], dim, p["patch_size"])
        self.blocks = nn.Sequential(
            *(
                MixerBlock(n, dim, p["token_mlp_dim"], p["channel_mlp_dim"], p["dropout"])
                for _ in range(p["depth"])
            )
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, p["num_classes"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.patch(x))).mean(1))


def build_vit(**params: Any) -> nn.Module:
    p = {**VIT_DEFAULTS, **params}
    require(p["depth"] >= 1 and p["mlp_ratio"] > 0, "depth and mlp_ratio must be positive")
    return ViT(p)


def build_mixer(**params: Any) -> nn.Module:
    p = {**MIXER_DEFAULTS, **params}
    require(p["depth"] >= 1, "depth must be positive")
    return Mixer(p)


def vit_macs(p: dict[str, Any]) -> float:
    dim, n = p["dim"], (p["image_size"] // p["patch_size"]) ** 2
    total = p["patch_size"] ** 2 * p["in_chans"] * dim * n
    total += transformer_macs(n + int(p["class_token"]), dim, int(dim * p["mlp_ratio"]), p["depth"])
    return float(total + dim * p["num_classes"])


def mixer_macs(p: dict[str, Any]) -> float:
    dim, n = p["dim"], (p["image_size"] // p["patch_size"]) ** 2
    total = p["patch_size"] ** 2 * p["in_chans"] * dim * n
    total += p["depth"] * 2 * n * dim * (p["token_mlp_dim"] + p["channel_mlp_dim"])
    return float(total + dim * p["num_classes"])


def _draw_patches(rng: np.random.Generator) -> dict[str, Any]:
    image_size = pick(rng, [32, 64, 96, 128, 160, 224])
    # 4x4 to 16x16 patches per side: few enough tokens for a CPU, enough for attention to matter.
    patches = [p for p in (2, 4, 8, 16, 32) if image_size % p == 0 and 4 <= image_size // p <= 16]
    return {
        "image_size": image_size,
        "patch_size": pick(rng, patches),
        "dropout": pick(rng, [0.0, 0.0, 0.1]),
        "num_classes": pick(rng, [10, 100, 1000]),
    }


def _draw_vit(rng: np.random.Generator) -> dict[str, Any]:
    dim = pick(rng, [64, 96, 128, 192, 256, 384])
    return {
        **_draw_patches(rng),
        "dim": dim,
        "depth": randint(rng, 2, 12),
        "heads": dim // pick(rng, [32, 64]),
        "mlp_ratio": pick(rng, [2.0, 3.0, 4.0]),
        "class_token": bool(rng.random() < 0.7),
    }


def _draw_mixer(rng: np.random.Generator) -> dict[str, Any]:
    dim = pick(rng, [64, 128, 192, 256, 384])
    return {
        **_draw_patches(rng),
        "dim": dim,
        "depth": randint(rng, 2, 12),
        "token_mlp_dim": pick(rng, [32, 64, 128, 256]),
        "channel_mlp_dim": dim * pick(rng, [2, 4]),
    }


def sample_vit(rng: np.random.Generator) -> dict[str, Any]:
    return sample_within(rng, _draw_vit, VIT_DEFAULTS, vit_macs, 2e6, 3e8)


def sample_mixer(rng: np.random.Generator) -> dict[str, Any]:
    return sample_within(rng, _draw_mixer, MIXER_DEFAULTS, mixer_macs, 2e6, 3e8)


register_family(
    Family(
        name="vit",
        build=build_vit,
        sample=sample_vit,
        defaults=VIT_DEFAULTS,
        input_kind="image",
        input_shape=image_shape,
        description="Vision Transformer: patch embedding, class token, pre-norm attention blocks",
        macs=vit_macs,
        tags=("transformer", "vision"),
    )
)
register_family(
    Family(
        name="mlp_mixer",
        build=build_mixer,
        sample=sample_mixer,
        defaults=MIXER_DEFAULTS,
        input_kind="image",
        input_shape=image_shape,
        description="MLP-Mixer: patch embedding, token-mixing and channel-mixing MLPs",
        macs=mixer_macs,
        tags=("mlp", "vision"),
    )
)
