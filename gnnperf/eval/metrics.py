"""Regression metrics on milliseconds, overall and per group (family, device, predictor).

A *prediction frame* is the DataFrame every predictor's evaluation produces: one row per sample with
``pred_ms`` and ``true_ms`` plus identity columns (``sample_id``, ``model_ref``, ``family``, ``hardware``, ...);
:func:`prediction_frame` builds one. Metric names are :data:`METRICS`:

| metric | meaning |
|---|---|
| mape | mean absolute percentage error, percent |
| median_ape | median absolute percentage error, percent |
| rmse_ms | root mean squared error, ms |
| spearman, kendall | rank correlation of predicted and measured times (tau-b); NaN for fewer than 2 samples or a constant side |
| within_10, within_20 | share of samples (0..1) whose absolute percentage error is at most 10 / 20 percent |
| n | number of samples |
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from gnnperf.errors import GnnperfError

PRED_COLUMN = "pred_ms"
TRUE_COLUMN = "true_ms"
METRICS: tuple[str, ...] = (
    "mape",
    "median_ape",
    "rmse_ms",
    "spearman",
    "kendall",
    "within_10",
    "within_20",
    "n",
)


def _as_positive(values: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise GnnperfError(f"{what} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise GnnperfError(f"{what} is empty: nothing to evaluate")
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        raise GnnperfError(
            f"{what} has {int(bad.sum())} non-positive or non-finite value(s), e.g. {arr[bad][0]}"
        )
    return arr


def _rank_correlations(pred: np.ndarray, true: np.ndarray) -> tuple[float, float]:
    if len(pred) < 2 or np.ptp(pred) == 0 or np.ptp(true) == 0:
        return math.nan, math.nan  # undefined; scipy would warn and return NaN too
    from scipy import stats  # lazy: only evaluation needs scipy

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.spearmanr(pred, true).statistic), float(stats.kendalltau(pred, true).statistic)


def regression_metrics(pred_ms: Sequence[float] | np.ndarray, true_ms: Sequence[float] | np.ndarray) -> dict:
    """The :data:`METRICS` of ``pred_ms`` against ``true_ms`` (both positive, same length).

    Raises:
        GnnperfError: empty input, mismatched lengths, or a non-positive / non-finite value.
    """
    pred = _as_positive(pred_ms, "predicted times")
    true = _as_positive(true_ms, "measured times")
    if pred.shape != true.shape:
        raise GnnperfError(f"{len(pred)} predictions for {len(true)} measured times")
    # 100 * |diff| / true (multiply first: exact for round numbers, so 10% errors count as within 10%)
    ape = 100.0 * np.abs(pred - true) / true
    spearman, kendall = _rank_correlations(pred, true)
    return {
        "mape": float(ape.mean()),
        "median_ape": float(np.median(ape)),
        "rmse_ms": float(np.sqrt(np.mean((pred - true) ** 2))),
        "spearman": spearman,
        "kendall": kendall,
        "within_10": float(np.mean(ape <= 10.0)),
        "within_20": float(np.mean(ape <= 20.0)),
        "n": int(len(pred)),
    }


def prediction_frame(
    pred_ms: Sequence[float] | np.ndarray, true_ms: Sequence[float] | np.ndarray | None, **columns
) -> pd.DataFrame:
    """A prediction frame: ``pred_ms``, ``true_ms`` (NaN when unknown) and identity ``columns`` of equal length."""
    pred = np.asarray(pred_ms, dtype=np.float64).reshape(-1)
    true = (
        np.full(len(pred), np.nan) if true_ms is None else np.asarray(true_ms, dtype=np.float64).reshape(-1)
    )
    if len(true) != len(pred):
        raise ValueError(f"{len(pred)} predictions for {len(true)} measured times")
    frame = pd.DataFrame({k: list(v) for k, v in columns.items()}, index=pd.RangeIndex(len(pred)))
    frame[PRED_COLUMN] = pred
    frame[TRUE_COLUMN] = true
    return frame


def _check_frame(df: pd.DataFrame) -> None:
    missing = [c for c in (PRED_COLUMN, TRUE_COLUMN) if c not in df.columns]
    if missing:
        raise GnnperfError(f"prediction frame lacks column(s) {', '.join(missing)}")


def frame_metrics(df: pd.DataFrame) -> dict:
    """:func:`regression_metrics` of a prediction frame."""
    _check_frame(df)
    return regression_metrics(df[PRED_COLUMN].to_numpy(), df[TRUE_COLUMN].to_numpy())


def grouped_metrics(df: pd.DataFrame, by: str | Sequence[str]) -> pd.DataFrame:
    """One row of :data:`METRICS` per group of ``by``, indexed by the sorted group keys.

    ``by`` is a column or a list of columns, e.g. ``"family"``, ``"hardware"``, ``["predictor", "family"]``.
    """
    _check_frame(df)
    keys = [by] if isinstance(by, str) else list(by)
    missing = [k for k in keys if k not in df.columns]
    if missing:
        raise GnnperfError(
            f"cannot group by {', '.join(missing)}: columns are {', '.join(map(str, df.columns))}"
        )
    if df.empty:
        raise GnnperfError("prediction frame is empty: nothing to evaluate")
    rows = {
        key: frame_metrics(group) for key, group in df.groupby(keys if len(keys) > 1 else keys[0], sort=True)
    }
    out = pd.DataFrame.from_dict(rows, orient="index", columns=list(METRICS))
    out.index = (
        pd.MultiIndex.from_tuples(out.index, names=keys) if len(keys) > 1 else out.index.rename(keys[0])
    )
    out["n"] = out["n"].astype(int)
    return out


def one_reference_mapes(
    pred_ms: Sequence[float] | np.ndarray, true_ms: Sequence[float] | np.ndarray
) -> np.ndarray:
    """MAPE (percent) of the other rows after scaling by one measured reference row, for each row as the reference.

    What ``Predictor.calibrate`` does with one measurement on a device: every prediction of the group is multiplied
    by measured / predicted of the reference. Entry ``r`` scores rows ``!= r`` with row ``r`` as the reference; the
    mean over entries is the expected MAPE of a reference picked at random.

    Raises:
        GnnperfError: fewer than two rows, or what :func:`regression_metrics` rejects.
    """
    pred = _as_positive(pred_ms, "predicted times")
    true = _as_positive(true_ms, "measured times")
    if pred.shape != true.shape or len(pred) < 2:
        raise GnnperfError(f"one-reference MAPE needs two or more rows, got {len(pred)} and {len(true)}")
    # scaled[r, i] = pred[i] * true[r] / pred[r]
    ape = np.abs(np.outer(true / pred, pred) / true[None, :] - 1.0)
    np.fill_diagonal(ape, np.nan)
    return 100.0 * np.nanmean(ape, axis=1)
