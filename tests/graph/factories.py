"""Small models for tests, importable as ``tests.graph.factories:NAME`` references."""

from collections import OrderedDict

import torch
from torch import nn


def tiny_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.LazyLinear(4)
    )


def tiny_cnn_named() -> nn.Module:
    """:func:`tiny_cnn` with named layers: the same network under other parameter and node names."""
    layers = {"stem": nn.Conv2d(3, 8, 3, padding=1), "norm": nn.BatchNorm2d(8), "act": nn.ReLU()}
    return nn.Sequential(OrderedDict({**layers, "flat": nn.Flatten(), "head": nn.LazyLinear(4)}))


def tiny_cnn_strided() -> nn.Module:
    """:func:`tiny_cnn` with a stride-2 convolution: another network."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.LazyLinear(4)
    )


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.conv2(torch.relu(self.bn1(self.conv1(x)))))


def tiny_video() -> nn.Module:
    """A 3-D convolution over (channels, frames, height, width) clips."""
    return nn.Sequential(
        nn.Conv3d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(8, 4)
    )


def residual() -> nn.Module:
    return Residual()


def grouped_convs() -> nn.Module:
    """A dense, a grouped (4 groups of 4 channels) and a depthwise convolution."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.Conv2d(16, 16, 3, padding=1, groups=4),
        nn.Conv2d(16, 16, 3, groups=16),
    )


def misaligned_matrices() -> nn.Module:
    """Convolutions and linear layers whose widths are (not) multiples of 8, for a (8, 8, 8) input."""
    return nn.Sequential(
        nn.Conv2d(8, 16, 1),  # aligned
        nn.Conv2d(16, 12, 1),  # 12 output channels
        nn.Conv2d(12, 12, 3, groups=12),  # depthwise: no tensor-core kernel, never flagged
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(12, 32),  # reduction width 12
        nn.Linear(32, 16),  # aligned
    )


class Broken(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("this model cannot run")


def broken() -> nn.Module:
    return Broken()


def not_a_module() -> int:
    return 3


class Einsums(nn.Module):
    """Three einsums over a (batch, 5, 7, 16) input: full letters, a leading and a middle ``...``."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 24))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.einsum("bnmd,de->bnme", x, self.w)
        b = torch.einsum("...d,de->...e", x, self.w)
        c = torch.einsum("b...d,de->b...e", x, self.w)
        return a + b + c


def einsums() -> nn.Module:
    return Einsums()


def parameter_free() -> nn.Module:
    return nn.Sequential(nn.ReLU(), nn.Flatten())


class TokenPool(nn.Module):
    """Pools every token but the first, as torchvision's MViT does: its ``tensor_split`` exports through
    TorchScript as an ONNX sequence built in a Loop, whose shapes static inference cannot follow."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.pool = nn.MaxPool1d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cls, rest = torch.tensor_split(self.proj(x), indices=(1,), dim=1)
        return torch.cat([cls, self.pool(rest.transpose(1, 2)).transpose(1, 2)], dim=1)


def token_pool() -> nn.Module:
    return TokenPool()
