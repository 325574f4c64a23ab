"""Building blocks, checks and sampling helpers shared by the zoo families.

Attention is written out (``q @ k^T``, softmax, ``@ v``) rather than through ``nn.MultiheadAttention`` or
``F.scaled_dot_product_attention`` so the exported ONNX graph shows the matrix products the predictor learns
from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from gnnperf.errors import GnnperfError, suggest

T = TypeVar("T")

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "relu6": nn.ReLU6,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "hardswish": nn.Hardswish,
    "tanh": nn.Tanh,
}


def require(ok: bool, message: str) -> None:
    """Raise a user error with ``message`` unless ``ok``."""
    if not ok:
        raise GnnperfError(message)


def check_choice(name: str, value: str, options: Sequence[str]) -> str:
    """``value`` if it is one of ``options``; otherwise a user error naming the parameter."""
    if value not in options:
        raise GnnperfError(
            f"{name} must be one of {', '.join(options)}, got '{value}'{suggest(value, options)}"
        )
    return value


def activation(name: str) -> nn.Module:
    return ACTIVATIONS[check_choice("activation", name, list(ACTIVATIONS))]()


def dropout(p: float) -> nn.Module:
    """``nn.Dropout(p)``, or an identity when ``p`` is 0 so the graph carries no no-op Dropout."""
    require(0.0 <= p < 1.0, f"dropout must be in [0, 1), got {p}")
    return nn.Dropout(p) if p > 0 else nn.Identity()


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round channels to a multiple of ``divisor`` without dropping more than 10% (MobileNet rule)."""
    out = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * value else out


def image_shape(params: dict[str, Any]) -> tuple[int, int, int]:
    return (int(params["in_chans"]), int(params["image_size"]), int(params["image_size"]))


def half(size: int) -> int:
    """Spatial size after a stride-2 convolution or pooling padded to keep ``ceil(size / 2)``."""
    return (size + 1) // 2


class SelfAttention(nn.Module):
    """Multi-head self-attention with explicit matrix products; ``causal`` masks future positions."""

    def __init__(self, dim: int, heads: int, dropout_p: float = 0.0, causal: bool = False) -> None:
        super().__init__()
        require(heads >= 1 and dim % heads == 0, f"dimension {dim} is not divisible by heads={heads}")
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.causal = causal
        self.qkv = nn.Linear(dim, 3 * dim)
        self.attn_drop = dropout(dropout_p)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = dropout(dropout_p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = (q @ k.transpose(-2, -1)) * self.scale
        if self.causal:
            future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        attn = self.attn_drop(scores.softmax(dim=-1))
        out = (attn @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj_drop(self.proj(out))


class FeedForward(nn.Sequential):
    def __init__(self, dim: int, hidden: int, act: str = "gelu", dropout_p: float = 0.0) -> None:
        super().__init__(
            nn.Linear(dim, hidden),
            activation(act),
            dropout(dropout_p),
            nn.Linear(hidden, dim),
            dropout(dropout_p),
        )


class TransformerBlock(nn.Module):
    """Attention + feed-forward with residuals; pre-norm (GPT, ViT) or post-norm (BERT)."""

    def __init__(
        self,
        dim: int,
        heads: int,
        hidden: int,
        dropout_p: float = 0.0,
        act: str = "gelu",
        norm_first: bool = True,
        causal: bool = False,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads, dropout_p, causal)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = FeedForward(dim, hidden, act, dropout_p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm_first:
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.mlp(x))


def transformer_macs(tokens: int, dim: int, hidden: int, depth: int) -> float:
    """Forward MACs of ``depth`` transformer blocks over ``tokens`` tokens: projections, scores, MLP."""
    per_block = tokens * (4 * dim * dim + 2 * dim * hidden) + 2 * tokens * tokens * dim
    return float(depth * per_block)


def pick(rng: np.random.Generator, options: Sequence[T]) -> T:
    """One element of ``options`` as its own Python type (not a NumPy scalar)."""
    return options[int(rng.integers(len(options)))]


def randint(rng: np.random.Generator, low: int, high: int) -> int:
    """Uniform integer in ``[low, high]`` (inclusive)."""
    return int(rng.integers(low, high + 1))


def sample_within(
    rng: np.random.Generator,
    draw: Callable[[np.random.Generator], dict[str, Any]],
    defaults: dict[str, Any],
    macs: Callable[[dict[str, Any]], float],
    low: float,
    high: float,
    tries: int = 200,
) -> dict[str, Any]:
    """Redraw until the estimated forward MACs per sample fall in ``[low, high]``.

    The bounds keep a training step at batch 1..32 on a 2-core CPU roughly within 5 ms .. 1.5 s; each family
    sets them from its cost per MAC (depthwise convolutions and recurrences are slower per MAC than GEMMs).
    """
    for _ in range(tries):
        params = draw(rng)
        if low <= macs({**defaults, **params}) <= high:
            return params
    raise RuntimeError(f"no draw within [{low:.3g}, {high:.3g}] MACs after {tries} tries")
