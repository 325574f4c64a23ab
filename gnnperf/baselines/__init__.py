"""Baselines the GNN predictor must beat: FLOPs-proportional, roofline, aggregate-feature GBM, op-sequence MLP,
op-class cost model.

Importing this package registers all of them in :data:`BASELINES`.
"""

from gnnperf.baselines import flops, gbm, opcost, roofline, sequence  # noqa: F401  (registers the baselines)
from gnnperf.baselines.registry import (
    BASELINES,
    Baseline,
    BaselineData,
    get_baseline,
    load_baseline,
    register_baseline,
    save_baseline,
)

__all__ = [
    "BASELINES",
    "Baseline",
    "BaselineData",
    "get_baseline",
    "load_baseline",
    "register_baseline",
    "save_baseline",
]
