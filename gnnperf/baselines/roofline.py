"""Roofline baseline: the data-sheet lower bound on the time, scaled by one efficiency factor.

Per sample, ``time_ms = efficiency * work_multiple * roofline_ms``. With per-op features (``op_seq``) the
roofline is summed per op, ``sum_op max(op_flops / peak_flops, op_bytes / bandwidth)``, because ops run one
after another and each is bound by its own resource; without them it is the whole-graph
``max(flops / peak_flops, bytes / bandwidth)``. The work multiple is 3 for forward + backward, 1 for forward
(:data:`~gnnperf.baselines.registry.WORK_MULTIPLIER`). ``efficiency`` (>= 1 in practice: achieved rates are below
peak) is the median ratio measured / roofline on the train split, so the roofline's shape, not the fit,
carries the prediction; a device needs only its peak FLOP/s and bandwidth, seen in training or not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from gnnperf.baselines.registry import Baseline, BaselineData, check_training_data, register_baseline
from gnnperf.errors import GnnperfError

OP_FLOPS_COLUMN = "log_flops"
OP_BYTES_COLUMNS = ("log_bytes_read", "log_bytes_written")


def has_op_costs(data: BaselineData) -> bool:
    """Whether ``data`` carries per-op FLOPs and bytes (``op_seq`` with those columns)."""
    columns = data.op_columns or ()
    return data.op_seq is not None and all(c in columns for c in (OP_FLOPS_COLUMN, *OP_BYTES_COLUMNS))


def check_specs(data: BaselineData, baseline: str) -> None:
    """Raise if a sample's device has no peak FLOP/s or no bandwidth (the roofline needs both)."""
    peak, bandwidth = data.peak_flops, data.bandwidth
    missing = ~(np.isfinite(peak) & (peak > 0) & np.isfinite(bandwidth) & (bandwidth > 0))
    if missing.any():
        raise GnnperfError(
            f"baseline '{baseline}': no peak FLOP/s or bandwidth for {sorted(set(data.hardware[missing]))}"
        )


def op_flops_bytes(data: BaselineData) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per sample, each forward op's (FLOPs, bytes read + written), undone from the log features.

    The caller checks :func:`has_op_costs` first.
    """
    i_flops = data.op_column(OP_FLOPS_COLUMN)
    i_bytes = [data.op_column(c) for c in OP_BYTES_COLUMNS]
    for seq in data.op_seq:
        seq = np.asarray(seq, dtype=np.float64)
        yield np.expm1(seq[:, i_flops]), np.expm1(seq[:, i_bytes]).sum(axis=1)


def op_roofline_ms(data: BaselineData) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per sample, each forward op's (compute ms, memory ms) on the sample's device: FLOPs / peak, bytes / bandwidth.

    The caller checks :func:`has_op_costs` and :func:`check_specs` first.
    """
    for i, (op_flops, op_bytes) in enumerate(op_flops_bytes(data)):
        yield 1e3 * op_flops / data.peak_flops[i], 1e3 * op_bytes / data.bandwidth[i]


def roofline_ms(data: BaselineData, per_op: bool) -> np.ndarray:
    """[n] forward roofline time in ms (per-op sum or whole-graph, see the module docstring)."""
    check_specs(data, "roofline")
    if not per_op:
        return 1e3 * np.maximum(data.flops / data.peak_flops, data.bytes / data.bandwidth)
    if not has_op_costs(data):
        raise GnnperfError("baseline 'roofline': fitted per op but the data has no per-op FLOPs and bytes")
    return np.array([np.maximum(compute, memory).sum() for compute, memory in op_roofline_ms(data)])


@register_baseline("roofline")
class RooflineBaseline(Baseline):
    """Per-op (or whole-graph) roofline times one efficiency factor fitted on train."""

    def __init__(self) -> None:
        self.efficiency = float("nan")
        self.per_op: bool | None = None

    def fit(self, train: BaselineData) -> RooflineBaseline:
        t = check_training_data(train, self.name)
        self.per_op = has_op_costs(train)
        bound = roofline_ms(train, self.per_op) * train.work_multiplier
        if not np.all(bound > 0):
            raise GnnperfError("baseline 'roofline': every training sample needs positive FLOPs or bytes")
        self.efficiency = float(np.median(t / bound))
        return self

    def predict(self, data: BaselineData) -> np.ndarray:
        self._require_fitted(self.per_op is not None)
        return self.efficiency * roofline_ms(data, bool(self.per_op)) * data.work_multiplier

    def state_dict(self) -> dict[str, Any]:
        return {"efficiency": self.efficiency, "per_op": self.per_op}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RooflineBaseline:
        model = cls()
        model.efficiency = float(state["efficiency"])
        model.per_op = bool(state["per_op"])
        return model
