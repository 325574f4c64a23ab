"""The GNN predictor: target transform, backbones (registry), hardware conditioning, readouts, model, module.

Names load on first use so ``import gnnperf.predictor`` stays cheap (Lightning is imported only for
:class:`PerfModule`).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "to_target": "gnnperf.predictor.target",
    "from_target": "gnnperf.predictor.target",
    "get_loss": "gnnperf.predictor.target",
    "LOSSES": "gnnperf.predictor.target",
    "BACKBONES": "gnnperf.predictor.backbones",
    "register_backbone": "gnnperf.predictor.backbones",
    "READOUTS": "gnnperf.predictor.readout",
    "HardwareConditioning": "gnnperf.predictor.conditioning",
    "PerfGNN": "gnnperf.predictor.model",
    "Breakdown": "gnnperf.predictor.model",
    "PerfModule": "gnnperf.predictor.module",
    "check_compatible": "gnnperf.predictor.module",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
