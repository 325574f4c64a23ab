"""Activation checkpointing's cost in time: the backward pass runs the checkpointed blocks' forward pass again.

Composed, not learned (no source here timed a checkpointed step): the extra time is the forward pass's share of a
step (``1 - BACKWARD_SHARE``, NeuSight's median, :mod:`gnnperf.predictor.parallel`) x the blocks' share of the
forward FLOPs (from the shape-only trace that finds the blocks, :mod:`gnnperf.graph.checkpointing`) x the predicted
step. On this project's CPU, with the libraries' own checkpointing timed by the harness, the step so composed from
the measured plain step came within -5% to +11% of the measured checkpointed one on six models; the extra time was
0.67-1.09 of the blocks' measured forward pass (``experiments/checkpointing``). No GPU measurement checks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gnnperf.predictor.parallel import BACKWARD_SHARE

if TYPE_CHECKING:
    from gnnperf.graph.memory import Checkpointed

FORWARD_SHARE = 1.0 - BACKWARD_SHARE


def recompute_row(step_ms: float, checkpointed: Checkpointed) -> dict[str, Any]:
    """The ``activation_checkpointing`` entry of a prediction row for a step of ``step_ms`` without it, checkpointed
    as traced (``selective``: by op, :mod:`gnnperf.graph.checkpointing`)."""
    return {
        "blocks": checkpointed.blocks,
        "selective": checkpointed.selective,
        "recompute_share": checkpointed.recompute_share,
        "recompute_ms": FORWARD_SHARE * checkpointed.recompute_share * step_ms,
        "step_without_ms": step_ms,
    }
