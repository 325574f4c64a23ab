"""Multi-layer perceptron over a flat feature vector: ``depth`` hidden layers of ``width`` units."""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from gnnperf.zoo.families._common import (
    ACTIVATIONS,
    activation,
    check_choice,
    dropout,
    pick,
    randint,
    require,
    sample_within,
)
from gnnperf.zoo.registry import Family, register_family

NORMS = {"none": None, "batch": nn.BatchNorm1d, "layer": nn.LayerNorm}

DEFAULTS: dict[str, Any] = {
    "in_features": 784,
    "depth": 3,
    "width": 512,
    "activation": "relu",
    "norm": "none",
    "dropout": 0.0,
    "num_classes": 10,
}


def build(**params: Any) -> nn.Module:
    p = {**DEFAULTS, **params}
    norm = NORMS[check_choice("norm", p["norm"], list(NORMS))]
    require(p["depth"] >= 1 and p["width"] >= 1, "depth and width must be positive")
    layers: list[nn.Module] = []
    cin = p["in_features"]
    for _ in range(p["depth"]):
        layers.append(nn.Linear(cin, p["width"]))
        if norm is not None:
            layers.append(norm(p["width"]))
        layers += [activation(p["activation"]), dropout(p["dropout"])]
        cin = p["width"]
    layers.append(nn.Linear(cin, p["num_classes"]))
    return nn.Sequential(*layers)


def macs(p: dict[str, Any]) -> float:
    w = p["width"]
    return float(p["in_features"] * w + (p["depth"] - 1) * w * w + w * p["num_classes"])


def _draw(rng: np.random.Generator) -> dict[str, Any]:
    return {
        "in_features": pick(rng, [64, 256, 784, 1024, 3072]),
        "depth": randint(rng, 1, 8),
        "width": pick(rng, [256, 512, 1024, 2048, 4096]),
        "activation": pick(rng, sorted(ACTIVATIONS)),
        "norm": pick(rng, ["none", "none", "layer"]),  # batch norm cannot train at batch size 1
        "dropout": pick(rng, [0.0, 0.0, 0.1, 0.5]),
        "num_classes": pick(rng, [10, 100, 1000]),
    }


def sample(rng: np.random.Generator) -> dict[str, Any]:
    return sample_within(rng, _draw, DEFAULTS, macs, 1e5, 1.5e8)


register_family(
    Family(
        name="mlp",
        build=build,
        sample=sample,
        defaults=DEFAULTS,
        input_kind="vector",
        input_shape=lambda p: (int(p["in_features"]),),
        description="MLP: stacked linear layers with activation, optional batch/layer norm and dropout",
        macs=macs,
        tags=("mlp",),
    )
)
