"""Op-class cost model: a roofline per class of op plus a launch cost per op, one set of rates for every device.

Per sample, ``time_ms = sum_k (a_k * compute_ms_k + b_k * memory_ms_k + c_k * n_k) + d``, where for each op class
``k`` (convolutions, matrix products, normalisations, pooling, data movement, the rest) ``compute_ms_k`` and
``memory_ms_k`` are the class's summed roofline terms on the sample's device (work x FLOPs / peak FLOP/s and work x
bytes / bandwidth, as in the ``roofline`` baseline) and ``n_k`` its number of ops. The rates ``a, b`` (inverse
efficiencies), the per-op costs ``c`` (launch and framework time) and the overhead ``d`` are non-negative and shared
by every device, fitted by non-negative least squares on relative error (``scipy.optimize.nnls``). The device
enters only through its data-sheet peak and bandwidth, so an unseen device is predicted by the same physics as the
training ones: the Paleo / PreNeT idea, with the per-op launch cost that small batches need. Few parameters (19),
so it cannot learn what a handful of training devices happen to share (experiments/torchvision_lodo).

A weak prior ties each class's rates to a pooled fit (one compute rate, one memory rate and one per-op cost for
all classes): ``prior * sum_k,term (rate_k / pooled_rate - 1) ** 2`` joins the squared relative errors of the
training samples, so at ``prior=0.01`` a class rate twice the pooled one weighs as much as one sample 10% off. It does
not grow with the data, so a class the training data has plenty of keeps its own rates; one it lacks is priced at
the pooled rates (NNLS alone leaves it at zero), and one it barely has near them. Trained on CNNs alone, the plain
fit took the matrix products' compute rate from the classifier Gemms (1.4 to 10 across five training draws) and
scored 38-608% on transformers; with the prior 19-24% (experiments/cnn_to_transformer, "A prior for the op
classes"; the weight on every study: experiments/opcost_prior). Those runs had the RTX 2080 Ti's older set-ups among
the CNN rows; without them the prior's fit scores 33-38% (weight 0.1: 23.8% on the mean; experiments/opcost_prior,
last section). ``prior=0`` is the plain fit of the studies before 2026-12-05.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnperf.baselines.registry import Baseline, BaselineData, check_training_data, register_baseline
from gnnperf.baselines.roofline import check_specs, has_op_costs, op_roofline_ms
from gnnperf.errors import GnnperfError

# Op classes by ONNX op type (the ``op=<type>`` columns of the per-op features); every other type is "other".
# These differ from the aggregate features' classes (gnnperf.data.aggregate.op_class) in two ways: element-wise
# ops are pooled with "other" here, and Cast, ScatterND and Identity count as "other", not "movement". Every
# committed opcost number (its rows in experiments/*/results*.json) was computed with these classes; moving to op_class
# would change them, so it waits for a rerun of those studies.
OP_CLASSES: dict[str, tuple[str, ...]] = {
    "conv": ("Conv", "ConvTranspose"),
    "matmul": ("Gemm", "MatMul", "Einsum", "LSTM", "GRU", "RNN"),
    "norm": ("BatchNormalization", "LayerNormalization", "InstanceNormalization", "GroupNormalization"),
    "pool": ("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"),
    "movement": ("Concat", "Split", "Slice", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Expand",
                 "Pad", "Gather", "Tile"),
}  # fmt: skip
CLASSES = (*OP_CLASSES, "other")
PRIOR = 0.01  # chosen on the grid of experiments/opcost_prior
CLASS_OF = {t: k for k, types in OP_CLASSES.items() for t in types}  # op type -> class; absent: "other"


def features(data: BaselineData) -> np.ndarray:
    """[n, 3 * len(CLASSES) + 1]: per class (compute ms, memory ms, op count), then a column of ones."""
    if not has_op_costs(data):
        raise GnnperfError("baseline 'opcost': needs per-op FLOPs and bytes (op_seq)")
    check_specs(data, "opcost")
    columns = list(data.op_columns or ())
    class_columns = {
        k: [columns.index(f"op={t}") for t in types if f"op={t}" in columns]
        for k, types in OP_CLASSES.items()
    }
    work = data.work_multiplier
    out = np.zeros((len(data), 3 * len(CLASSES) + 1))
    out[:, -1] = 1.0
    for i, (seq, (compute, memory)) in enumerate(zip(data.op_seq, op_roofline_ms(data))):
        compute, memory = work[i] * compute, work[i] * memory
        rest = np.ones(len(seq), dtype=bool)
        for j, cls in enumerate(CLASSES):
            mask = rest.copy() if cls == "other" else seq[:, class_columns[cls]].sum(axis=1) > 0.5
            rest &= ~mask
            out[i, 3 * j : 3 * j + 3] = compute[mask].sum(), memory[mask].sum(), mask.sum()
    return out


def _nnls(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Non-negative least squares ``a @ coef ~ b`` (default: ones), on columns scaled to similar size."""
    from scipy.optimize import nnls

    scale = np.abs(a).max(axis=0)  # a column that is zero everywhere stays zero
    scale[scale == 0] = 1.0
    coef, _ = nnls(a / scale, np.ones(len(a)) if b is None else b, maxiter=50 * a.shape[1])
    return coef / scale


@register_baseline("opcost")
class OpCostBaseline(Baseline):
    """Per-op-class roofline rates and launch costs shared by all devices; see the module docstring."""

    def __init__(self, prior: float = PRIOR) -> None:
        if not prior >= 0:  # also NaN
            raise GnnperfError(f"baseline 'opcost': prior must be a non-negative weight, got {prior!r}")
        self.prior = float(prior)
        self.coef: np.ndarray | None = None

    def fit(self, train: BaselineData) -> OpCostBaseline:
        t = check_training_data(train, self.name)
        x = features(train) / t[:, None]  # rows in relative error: the fit minimises sum((pred / t - 1) ** 2)
        # the pooled fit: one compute rate, one memory rate and one per-op cost for every class, plus the overhead
        k = len(CLASSES)
        pooled = _nnls(np.column_stack([x[:, j : 3 * k : 3].sum(axis=1) for j in range(3)] + [x[:, -1]]))
        # the prior, as extra rows: sqrt(prior) * (rate / pooled rate - 1) for each class and term whose pooled
        # rate is positive; a class the train split barely has (or lacks) takes the pooled rates, not what fits its
        # few ops (or 0)
        weight = np.sqrt(self.prior)
        penalty = [
            np.eye(x.shape[1])[j : 3 * k : 3] * weight / rate
            for j, rate in enumerate(pooled[:3])
            if self.prior > 0 and rate > 0
        ]
        self.coef = _nnls(
            np.vstack([x, *penalty]), np.concatenate([np.ones(len(x)), np.full(k * len(penalty), weight)])
        )
        return self

    def predict(self, data: BaselineData) -> np.ndarray:
        self._require_fitted(self.coef is not None)
        # a sample whose every fitted term is zero (no op of any class that got a rate) still gets a finite time
        return np.maximum(features(data) @ self.coef, 1e-6)

    def state_dict(self) -> dict[str, Any]:
        return {
            "coef": None if self.coef is None else self.coef.tolist(),
            "classes": list(CLASSES),
            "prior": self.prior,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> OpCostBaseline:
        if list(state.get("classes", [])) != list(CLASSES):
            raise GnnperfError(
                f"baseline 'opcost': saved with op classes {state.get('classes')}, code has {list(CLASSES)}"
            )
        model = cls(prior=state.get("prior", 0.0))  # states saved before the prior have none
        model.coef = None if state["coef"] is None else np.asarray(state["coef"], dtype=np.float64)
        return model
