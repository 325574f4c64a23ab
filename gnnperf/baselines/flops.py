"""FLOPs-proportional baseline: ``time_ms = a * work_flops + b`` per (device, precision).

``work_flops`` is the forward FLOPs times the timed region's work multiple (3 for forward + backward), so
inference and training samples share one slope. Each (device, precision) group of the train split gets its own
slope ``a`` and launch-overhead intercept ``b``, fitted by least squares on relative error (the first-order
version of a log-space fit, and what MAPE scores); a fit with a negative ``a`` or ``b``, or a group with
fewer than 3 samples, keeps ``b = 0`` and takes the median ratio ``time / work_flops`` as ``a``.

A group not seen in training (an unseen device or precision) is scaled from the data sheet: the train groups'
median of ``a * peak_flops`` (the time one peak FLOP costs, i.e. an inverse efficiency) divided by the
sample's own peak FLOP/s, with the median train intercept.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnperf.baselines.registry import Baseline, BaselineData, check_training_data, register_baseline
from gnnperf.errors import GnnperfError

MIN_GROUP_FIT = 3


def _fit_group(work: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """(a, b) minimising sum(((a * work + b) - t) / t)^2 with a > 0, b >= 0."""
    if len(t) >= MIN_GROUP_FIT and np.ptp(work) > 0:
        design = np.stack([work / t, 1.0 / t], axis=1)
        (a, b), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
        if a > 0 and b >= 0:
            return float(a), float(b)
    return float(np.median(t / work)), 0.0


def _groups(data: BaselineData) -> np.ndarray:
    precision = data.precision if data.precision is not None else np.full(len(data), "fp32", dtype=object)
    return np.array([f"{h}|{p}" for h, p in zip(data.hardware, precision)], dtype=object)


@register_baseline("flops")
class FlopsBaseline(Baseline):
    """Time proportional to FLOPs, per (device, precision), plus a constant overhead."""

    def __init__(self) -> None:
        self.coef: dict[str, tuple[float, float]] = {}  # group -> (a ms/FLOP, b ms)
        self.inv_efficiency = float("nan")  # median a * peak_flops over train groups
        self.intercept_ms = 0.0

    def fit(self, train: BaselineData) -> FlopsBaseline:
        t = check_training_data(train, self.name)
        work = train.flops * train.work_multiplier
        if not np.all(work > 0):
            raise GnnperfError("baseline 'flops': every training sample needs positive FLOPs")
        groups = _groups(train)
        self.coef, scaled = {}, []
        for g in sorted(set(groups)):
            mask = groups == g
            a, b = _fit_group(work[mask], t[mask])
            self.coef[g] = (a, b)
            peak = float(np.median(train.peak_flops[mask]))
            if np.isfinite(peak) and peak > 0:
                scaled.append(a * peak)
        # No train device with a known peak: fall back to the pooled median ratio (no scaling possible).
        self.inv_efficiency = float(np.median(scaled)) if scaled else float("nan")
        self.intercept_ms = float(np.median([b for _, b in self.coef.values()]))
        return self

    def predict(self, data: BaselineData) -> np.ndarray:
        self._require_fitted(bool(self.coef))
        work = data.flops * data.work_multiplier
        out = np.empty(len(data))
        for i, g in enumerate(_groups(data)):
            if g in self.coef:
                a, b = self.coef[g]
            else:
                peak = data.peak_flops[i]
                if not (np.isfinite(peak) and peak > 0 and np.isfinite(self.inv_efficiency)):
                    raise GnnperfError(
                        f"baseline 'flops': {data.hardware[i]} was not in training and has no peak FLOP/s "
                        "to scale from"
                    )
                a, b = self.inv_efficiency / peak, self.intercept_ms
            out[i] = a * work[i] + b
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "coef": {g: list(ab) for g, ab in self.coef.items()},
            "inv_efficiency": self.inv_efficiency,
            "intercept_ms": self.intercept_ms,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FlopsBaseline:
        model = cls()
        model.coef = {g: (float(a), float(b)) for g, (a, b) in state["coef"].items()}
        model.inv_efficiency = float(state["inv_efficiency"])
        model.intercept_ms = float(state["intercept_ms"])
        return model
