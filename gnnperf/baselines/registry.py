"""The baseline registry and :class:`BaselineData`, the plain-numpy view of a dataset every baseline consumes.

A baseline is a class registered with ``@register_baseline("name")`` that implements :class:`Baseline`:
``fit(train) -> self``, ``predict(data) -> ms``, ``state_dict()`` and ``from_state(state)``. A duplicate name
raises. :meth:`BaselineData.from_batches` turns the dataset's PyG batches (the issue-4 batch format) into arrays,
so baselines never touch PyG.
"""

from __future__ import annotations

import math
import pickle
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from gnnperf.errors import GnnperfError, suggest
from gnnperf.hardware.table import HardwareSpec
from gnnperf.hardware.vector import precision_peak_tflops

# Forward + backward is about 3x the forward work (the backward computes gradients for inputs and weights);
# the optimizer step is small next to it and is left to each baseline's fitted factor.
WORK_MULTIPLIER: dict[str, float] = {"fwd": 1.0, "fwd+bwd": 3.0, "fwd+bwd+opt": 3.0}
SAVE_FORMAT = 1


def peak_flops_per_s(spec: HardwareSpec, precision: str) -> float:
    """Peak FLOP/s of ``spec`` for ``precision`` (fp32 when that rate is not in the table; NaN if none is)."""
    tflops = precision_peak_tflops(spec, precision) or spec.peak_fp32_tflops
    return tflops * 1e12 if tflops else math.nan


def bandwidth_bytes_per_s(spec: HardwareSpec) -> float:
    return spec.mem_bandwidth_gbs * 1e9 if spec.mem_bandwidth_gbs else math.nan


@dataclass
class BaselineData:
    """Per-sample arrays (n samples) for the baselines.

    Attributes:
        agg: [n, F_agg] aggregate features (``gnnperf.data.aggregate``).
        hw: [n, F_hw] hardware vectors.
        hardware: [n] device names.
        flops: [n] total forward FLOPs at the sample's batch size.
        bytes: [n] total bytes read plus written by the forward ops.
        peak_flops: [n] device peak FLOP/s for the sample's precision (see :func:`peak_flops_per_s`).
        bandwidth: [n] device memory bandwidth in bytes/s.
        y_ms: [n] measured iteration time in ms; None at predict time.
        op_seq: per sample, [n_ops, F] per-op features in topological order (the rows of ``x``), or None.
        op_columns: the names of ``op_seq``'s columns (required with ``op_seq``).
        precision, timed: [n] workload precision and timed region (``fwd``, ``fwd+bwd``, ``fwd+bwd+opt``);
            ``timed`` None means every sample times a full training iteration.
        sample_id, family, model_ref: [n] identity columns carried into prediction frames, or None.
    """

    agg: np.ndarray
    hw: np.ndarray
    hardware: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    peak_flops: np.ndarray
    bandwidth: np.ndarray
    y_ms: np.ndarray | None = None
    op_seq: list[np.ndarray] | None = None
    op_columns: tuple[str, ...] | None = None
    precision: np.ndarray | None = None
    timed: np.ndarray | None = None
    sample_id: np.ndarray | None = None
    family: np.ndarray | None = None
    model_ref: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.agg = np.asarray(self.agg, dtype=np.float32).reshape(len(self.agg), -1)
        self.hw = np.asarray(self.hw, dtype=np.float32).reshape(len(self.hw), -1)
        for name in ("flops", "bytes", "peak_flops", "bandwidth", "y_ms"):
            if getattr(self, name) is not None:
                setattr(self, name, np.asarray(getattr(self, name), dtype=np.float64).reshape(-1))
        for name in ("hardware", "precision", "timed", "sample_id", "family", "model_ref"):
            if getattr(self, name) is not None:
                setattr(self, name, np.asarray(getattr(self, name), dtype=object).reshape(-1))
        n = len(self.hardware)
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "op_columns" and value is not None and len(value) != n:
                raise ValueError(f"BaselineData.{f.name} has {len(value)} rows, expected {n}")
        if self.op_seq is not None:
            self.op_seq = [np.asarray(s, dtype=np.float32) for s in self.op_seq]
            if self.op_columns is None:
                raise ValueError("BaselineData.op_seq needs op_columns (the names of its feature columns)")
            self.op_columns = tuple(self.op_columns)
            widths = {s.shape[1] for s in self.op_seq if s.ndim == 2}
            if any(s.ndim != 2 or len(s) == 0 for s in self.op_seq) or widths != {len(self.op_columns)}:
                raise ValueError("BaselineData.op_seq must hold non-empty [n_ops, len(op_columns)] arrays")
        if self.timed is not None:
            bad = sorted(set(self.timed) - set(WORK_MULTIPLIER))
            if bad:
                raise ValueError(f"BaselineData.timed has unknown regions {bad}")

    def __len__(self) -> int:
        return len(self.hardware)

    @property
    def work_multiplier(self) -> np.ndarray:
        """[n] forward-work multiple the timed region costs (:data:`WORK_MULTIPLIER`)."""
        if self.timed is None:
            return np.full(len(self), WORK_MULTIPLIER["fwd+bwd+opt"])
        return np.array([WORK_MULTIPLIER[t] for t in self.timed])

    def subset(self, index: Sequence[int] | np.ndarray) -> BaselineData:
        """The samples at ``index`` (integer positions or a boolean mask)."""
        idx = np.arange(len(self))[np.asarray(index)]
        changes: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "op_columns" or value is None:
                continue
            changes[f.name] = [value[i] for i in idx] if f.name == "op_seq" else value[idx]
        return replace(self, **changes)

    def op_column(self, name: str) -> int:
        """Position of the ``op_seq`` column ``name``."""
        if self.op_columns is None or name not in self.op_columns:
            raise GnnperfError(f"per-op features have no column {name!r}")
        return self.op_columns.index(name)

    def prediction_frame(self, pred_ms: np.ndarray):
        """DataFrame of predictions (``gnnperf.eval.metrics.prediction_frame``) with this data's identity."""
        from gnnperf.eval.metrics import prediction_frame

        meta = {k: getattr(self, k) for k in ("sample_id", "model_ref", "family", "hardware", "precision")}
        return prediction_frame(pred_ms, self.y_ms, **{k: v for k, v in meta.items() if v is not None})

    @classmethod
    def from_batches(cls, batches: Iterable[Any], specs: Mapping[str, HardwareSpec]) -> BaselineData:
        """Arrays from PyG batches of the dataset (raw, unnormalised features), or from its single samples.

        Single samples keep ``op_seq`` as views of the dataset's cached per-(graph, batch size) arrays, shared by
        every device's sample; batches copy them (tens of GB for ten thousand large graphs).

        FLOPs and bytes are read back from the node columns ``log_flops``, ``log_bytes_read`` and
        ``log_bytes_written`` (``expm1``), precision and timed region from the one-hots of ``u``.

        Args:
            specs: device name -> spec for every device in the batches (``load_table(extra=...)``).
        """
        from gnnperf.graph.features import GRAPH_FEATURES, NODE_FEATURES
        from gnnperf.measure.workload import PRECISIONS, TIMED

        node_cols = [n for n, _ in NODE_FEATURES]
        graph_cols = [n for n, _ in GRAPH_FEATURES]
        i_flops = node_cols.index("log_flops")
        i_bytes = [node_cols.index("log_bytes_read"), node_cols.index("log_bytes_written")]
        i_prec = [graph_cols.index(f"precision={p}") for p in PRECISIONS]
        i_timed = [graph_cols.index(f"timed={t}") for t in TIMED]
        parts: dict[str, list] = {k: [] for k in ("agg", "hw", "hardware", "y", "seq", "prec", "timed")}
        meta: dict[str, list] = {"sample_id": [], "family": [], "model_ref": []}
        for batch in batches:
            if getattr(batch, "agg", None) is None:
                raise GnnperfError("batches have no 'agg' field: build the dataset with aggregate features")
            x = batch.x.detach().cpu().numpy()
            ptr = batch.ptr.detach().cpu().numpy() if hasattr(batch, "ptr") else np.array([0, len(x)])
            u = batch.u.detach().cpu().numpy()
            parts["agg"].append(batch.agg.detach().cpu().numpy())
            parts["hw"].append(batch.hw.detach().cpu().numpy())
            parts["hardware"].extend(_as_list(batch.hardware))
            y = getattr(batch, "y", None)
            parts["y"].append(None if y is None else y.detach().cpu().numpy())
            parts["seq"].extend(x[ptr[i] : ptr[i + 1]] for i in range(len(ptr) - 1))
            parts["prec"].extend(PRECISIONS[j] for j in u[:, i_prec].argmax(1))
            parts["timed"].extend(TIMED[j] for j in u[:, i_timed].argmax(1))
            for key, values in meta.items():
                values.append(_as_list(getattr(batch, key, None)))
        if not parts["hardware"]:
            raise GnnperfError("no samples: the batches are empty")
        unknown = sorted(set(parts["hardware"]) - set(specs))
        if unknown:
            raise GnnperfError(f"no hardware spec for {unknown[0]!r}{suggest(unknown[0], specs)}")
        seqs = parts["seq"]
        hardware, precision = parts["hardware"], parts["prec"]
        return cls(
            agg=np.concatenate(parts["agg"]),
            hw=np.concatenate(parts["hw"]),
            hardware=np.array(hardware, dtype=object),
            flops=np.array([np.expm1(s[:, i_flops].astype(np.float64)).sum() for s in seqs]),
            bytes=np.array([np.expm1(s[:, i_bytes].astype(np.float64)).sum() for s in seqs]),
            peak_flops=np.array([peak_flops_per_s(specs[h], p) for h, p in zip(hardware, precision)]),
            bandwidth=np.array([bandwidth_bytes_per_s(specs[h]) for h in hardware]),
            y_ms=None if any(y is None for y in parts["y"]) else np.concatenate(parts["y"]),
            op_seq=seqs,
            op_columns=tuple(node_cols),
            precision=np.array(precision, dtype=object),
            timed=np.array(parts["timed"], dtype=object),
            **{
                k: (None if any(v is None for v in vs) else np.array(sum(vs, []), dtype=object))
                for k, vs in meta.items()
            },
        )


def _as_list(value: Any) -> list | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


class Baseline(ABC):
    """A predictor of iteration time in ms from :class:`BaselineData`."""

    name: str = ""

    @abstractmethod
    def fit(self, train: BaselineData) -> Baseline:
        """Fit on ``train`` (which has ``y_ms``); returns self."""

    @abstractmethod
    def predict(self, data: BaselineData) -> np.ndarray:
        """[n] predicted iteration time in ms."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything :meth:`from_state` needs: plain Python values, numpy arrays and bytes."""

    @classmethod
    @abstractmethod
    def from_state(cls, state: dict[str, Any]) -> Baseline:
        """Rebuild a fitted baseline from :meth:`state_dict`."""

    def _require_fitted(self, fitted: bool) -> None:
        if not fitted:
            raise RuntimeError(f"baseline {self.name!r} is not fitted: call fit() first")


BASELINES: dict[str, type[Baseline]] = {}
B = TypeVar("B", bound=type[Baseline])


def register_baseline(name: str) -> Callable[[B], B]:
    """Class decorator adding a :class:`Baseline` under ``name``; a second class of the same name raises."""

    def wrap(cls: B) -> B:
        if name in BASELINES:
            raise ValueError(f"baseline '{name}' is registered twice")
        cls.name = name
        BASELINES[name] = cls
        return cls

    return wrap


def get_baseline(name: str) -> type[Baseline]:
    if name not in BASELINES:
        raise GnnperfError(
            f"unknown baseline '{name}'{suggest(name, BASELINES)}; known: {', '.join(BASELINES)}"
        )
    return BASELINES[name]


def check_training_data(data: BaselineData, name: str) -> np.ndarray:
    """The targets of ``data``, which must exist, be finite and positive."""
    if len(data) == 0:
        raise GnnperfError(f"baseline '{name}': no training samples")
    if data.y_ms is None:
        raise GnnperfError(f"baseline '{name}': training data has no measured times (y_ms)")
    if not np.all(np.isfinite(data.y_ms) & (data.y_ms > 0)):
        raise GnnperfError(f"baseline '{name}': measured times must be finite and positive")
    return data.y_ms


def save_baseline(model: Baseline, path: str | Path) -> Path:
    """Pickle ``{name, state}`` to ``path`` (load only files you wrote: pickle runs code on load)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        pickle.dump({"format": SAVE_FORMAT, "name": model.name, "state": model.state_dict()}, f)
    return path


def load_baseline(path: str | Path) -> Baseline:
    path = Path(path)
    if not path.is_file():
        raise GnnperfError(f"baseline file {path} not found")
    with path.open("rb") as f:
        saved = pickle.load(f)
    if not isinstance(saved, dict) or saved.get("format") != SAVE_FORMAT:
        raise GnnperfError(f"{path} is not a gnnperf baseline file (format {SAVE_FORMAT})")
    return get_baseline(saved["name"]).from_state(saved["state"])
