"""Op types the GNN never saw in training fall back to a baseline (the op-class cost model by default).

A GNN costs an op of an unseen type from its numbers alone, and on the committed CPU data that extrapolation
fails badly where a whole family rests on such an op: the held-out LSTMs of ``experiments/cpu_holdout_family``
are overpredicted 2.4-3.5x (the GRUs of the training families share their shapes but not their speed), where a
FLOPs ratio is off by about half. So each prediction is blended in log space with a baseline fitted on the same
train part (``flops``, ``opcost`` or ``roofline``: :data:`FALLBACK_BASELINES`)::

    log ms = (1 - w) * log gnn_ms + w * log baseline_ms

where ``w`` is the share of the graph's roofline time (per op ``max(FLOPs / peak, bytes / bandwidth)`` on the
sample's device) spent in ops of types absent from the train split. A graph made only of seen op types keeps
the GNN's prediction unchanged (``w = 0``); one dominated by an unseen op gets about the baseline's. The
prediction interval keeps its relative width (its coverage was measured on validation graphs, which rarely hold
unseen op types), and a per-op breakdown stays the network's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gnnperf.baselines.registry import Baseline, BaselineData, get_baseline
from gnnperf.baselines.roofline import op_flops_bytes
from gnnperf.errors import GnnperfError, suggest

# baselines whose state is plain numbers and lists, as a checkpoint loaded with weights_only=True needs
FALLBACK_BASELINES = ("flops", "opcost", "roofline")


def check_fallback_name(name: str) -> None:
    """Raise :class:`GnnperfError` unless ``name`` can be the fallback's baseline (checked before training)."""
    if name not in FALLBACK_BASELINES:
        raise GnnperfError(
            f"unseen_op_fallback: '{name}' cannot be the fallback{suggest(name, FALLBACK_BASELINES)}; "
            f"use one of {', '.join(FALLBACK_BASELINES)} or null"
        )


class UnseenOpFallback:
    """The blend above: which op types training saw, and the baseline fitted on the train part.

    Args:
        seen_ops: [num_ops] bool, op types (in the checkpoint's vocabulary order) present in the train split;
            the network's own record of it is ``PerfGNN.seen_ops``.
        baseline: a fitted registered baseline (``opcost`` unless the config names another).
    """

    def __init__(self, seen_ops: np.ndarray, baseline: Baseline) -> None:
        self.seen_ops = np.asarray(seen_ops, dtype=bool)
        self.baseline = baseline

    @property
    def name(self) -> str:
        """The baseline's registered name (``unseen_op_fallback`` in the training config)."""
        return self.baseline.name

    @classmethod
    def fit(cls, seen_ops: np.ndarray, train: BaselineData, baseline: str = "opcost") -> UnseenOpFallback:
        """Fit the named baseline (one of :data:`FALLBACK_BASELINES`) on ``train``."""
        check_fallback_name(baseline)
        return cls(seen_ops, get_baseline(baseline)().fit(train))

    def unseen_share(self, data: BaselineData) -> np.ndarray:
        """[n] share of each sample's roofline time in op types unseen in training (0 where all were seen)."""
        n_ops = len(self.seen_ops)
        out = np.zeros(len(data))
        if self.seen_ops.all():
            return out
        for k, (seq, (flops, moved)) in enumerate(zip(data.op_seq, op_flops_bytes(data), strict=True)):
            # the op-type one-hots lead the node columns
            unseen = np.asarray(seq)[:, :n_ops][:, ~self.seen_ops].sum(axis=1) > 0
            if not unseen.any():
                continue
            peak, bandwidth = data.peak_flops[k], data.bandwidth[k]
            # not op_roofline_ms: a device without rates (no peak or bandwidth) is weighted by FLOPs alone
            if np.isfinite(peak) and peak > 0 and np.isfinite(bandwidth) and bandwidth > 0:
                cost = np.maximum(flops / peak, moved / bandwidth)
            else:
                cost = flops
            total = cost.sum()
            out[k] = cost[unseen].sum() / total if total > 0 else float(unseen.mean())
        return out

    def apply(self, gnn_ms: np.ndarray, data: BaselineData) -> tuple[np.ndarray, np.ndarray]:
        """(blended ms, weight ``w`` per sample); samples the baseline cannot predict keep the GNN's value."""
        gnn_ms = np.asarray(gnn_ms, dtype=np.float64)
        w = self.unseen_share(data)
        if not w.any():
            return gnn_ms, w
        try:
            base_ms = self.baseline.predict(data)
        except GnnperfError:  # an unseen device without a peak FLOP/s: no fallback for anyone in this batch
            return gnn_ms, np.zeros_like(w)
        blended = np.exp((1.0 - w) * np.log(gnn_ms) + w * np.log(np.maximum(base_ms, 1e-9)))
        return blended, w

    def state_dict(self) -> dict[str, Any]:
        """Plain lists and numbers (checkpoints are read with ``weights_only=True``)."""
        return {"name": self.name, "seen_ops": self.seen_ops.tolist(), "baseline": self.baseline.state_dict()}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> UnseenOpFallback:
        if state.get("name") not in FALLBACK_BASELINES:
            raise GnnperfError(f"unknown unseen-op fallback {state.get('name')!r} in checkpoint")
        baseline = get_baseline(state["name"]).from_state(state["baseline"])
        return cls(np.array(state["seen_ops"], dtype=bool), baseline)
