"""Recurrent classifiers: ``nn.LSTM`` / ``nn.GRU`` over a (B, T, F) sequence, linear head on the last step.

Timing note: the gradient enters at the last step only and shrinks going back in time; over long sequences
it reaches denormal floats, which made CPU backward passes about 10x slower here (GRU, T=256, h=512, batch
32, 1 thread: 9.4 s vs 0.9 s a step) unless ``torch.set_flush_denormal(True)`` is set.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch
from torch import nn

from gnnperf.zoo.families._common import pick, randint, require, sample_within
from gnnperf.zoo.registry import Family, register_family

DEFAULTS: dict[str, Any] = {
    "seq_len": 64,
    "input_size": 32,
    "hidden_size": 128,
    "num_layers": 2,
    "bidirectional": False,
    "dropout": 0.0,
    "num_classes": 10,
}
GATES = {"lstm": 4, "gru": 3}


class RecurrentClassifier(nn.Module):
    """Stacked recurrence and a linear head on the last time step.

    Without dropout the stack is one multi-layer ``nn.LSTM``/``nn.GRU`` (one fused call, as usually written).
    With dropout it is a stack of single-layer modules with explicit ``nn.Dropout`` between them: the
    TorchScript ONNX exporter rejects the built-in inter-layer dropout in training mode.
    """

    def __init__(self, cell: str, p: dict[str, Any]) -> None:
        super().__init__()
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        hidden, layers, bidi = p["hidden_size"], p["num_layers"], p["bidirectional"]
        out = hidden * (2 if bidi else 1)
        if p["dropout"] > 0 and layers > 1:
            stack: list[nn.Module] = []
            for i in range(layers):
                if i > 0:
                    stack.append(nn.Dropout(p["dropout"]))
                stack.append(
                    rnn(p["input_size"] if i == 0 else out, hidden, batch_first=True, bidirectional=bidi)
                )
            self.rnn = nn.ModuleList(stack)
        else:
            self.rnn = nn.ModuleList(
                [rnn(p["input_size"], hidden, layers, batch_first=True, bidirectional=bidi)]
            )
        self.head = nn.Linear(out, p["num_classes"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.rnn:
            x = layer(x) if isinstance(layer, nn.Dropout) else layer(x)[0]
        return self.head(x[:, -1])


def build(cell: str, **params: Any) -> nn.Module:
    p = {**DEFAULTS, **params}
    require(p["num_layers"] >= 1 and p["hidden_size"] >= 1, "num_layers and hidden_size must be positive")
    require(0.0 <= p["dropout"] < 1.0, f"dropout must be in [0, 1), got {p['dropout']}")
    return RecurrentClassifier(cell, p)


def macs(cell: str, p: dict[str, Any]) -> float:
    h, dirs = p["hidden_size"], 2 if p["bidirectional"] else 1
    total, cin = 0, p["input_size"]
    for _ in range(p["num_layers"]):
        total += p["seq_len"] * dirs * GATES[cell] * h * (cin + h)
        cin = dirs * h
    return float(total + cin * p["num_classes"])


def _draw(rng: np.random.Generator) -> dict[str, Any]:
    layers = randint(rng, 1, 3)
    return {
        "seq_len": pick(rng, [16, 32, 64, 128, 256]),
        "input_size": pick(rng, [16, 32, 64, 128, 256]),
        "hidden_size": pick(rng, [32, 64, 128, 256, 512]),
        "num_layers": layers,
        "bidirectional": bool(rng.random() < 0.4),
        "dropout": pick(rng, [0.0, 0.2]) if layers > 1 else 0.0,
        "num_classes": pick(rng, [2, 10, 100]),
    }


def sample(cell: str, rng: np.random.Generator) -> dict[str, Any]:
    # Time steps run one after another, so recurrences pay per-step overhead on top of their MACs.
    return sample_within(rng, _draw, DEFAULTS, partial(macs, cell), 5e5, 1.5e8)


for _cell, _title in (("lstm", "LSTM"), ("gru", "GRU")):
    register_family(
        Family(
            name=_cell,
            build=partial(build, _cell),
            sample=partial(sample, _cell),
            defaults=dict(DEFAULTS),
            input_kind="sequence",
            input_shape=lambda p: (int(p["seq_len"]), int(p["input_size"])),
            description=f"{_title} classifier: stacked, optionally bidirectional nn.{_title}, last-step head",
            macs=partial(macs, _cell),
            tags=("rnn",),
        )
    )
