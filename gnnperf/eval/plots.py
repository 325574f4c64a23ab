"""Plots for experiment folders: predicted vs measured time, and the CDF of the percentage error.

Both take a prediction frame (``pred_ms``, ``true_ms``; with a ``predictor`` column for several predictors,
as :func:`gnnperf.eval.tables.stack_predictions` makes) or a mapping ``name -> prediction frame``, and write a
PNG. matplotlib is imported inside the functions (it is heavy and only plotting needs it), and figures are drawn
on an Agg canvas directly, without pyplot, so no GUI backend or global figure state is involved.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gnnperf.errors import GnnperfError
from gnnperf.eval.metrics import PRED_COLUMN, TRUE_COLUMN
from gnnperf.eval.tables import PREDICTOR_COLUMN, stack_predictions

DPI = 150


def _series(df: pd.DataFrame | Mapping[str, pd.DataFrame]) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(predictor name, predicted ms, measured ms) per predictor, rows with a positive measured time only."""
    frame = stack_predictions(df) if isinstance(df, Mapping) else df
    missing = [c for c in (PRED_COLUMN, TRUE_COLUMN) if c not in frame.columns]
    if missing:
        raise GnnperfError(f"prediction frame lacks column(s) {', '.join(missing)}")
    frame = frame[(frame[TRUE_COLUMN] > 0) & (frame[PRED_COLUMN] > 0)]
    if frame.empty:
        raise GnnperfError("nothing to plot: no rows with positive predicted and measured times")
    if PREDICTOR_COLUMN not in frame.columns:
        yield "prediction", frame[PRED_COLUMN].to_numpy(float), frame[TRUE_COLUMN].to_numpy(float)
        return
    for name, group in frame.groupby(PREDICTOR_COLUMN, sort=False):
        yield str(name), group[PRED_COLUMN].to_numpy(float), group[TRUE_COLUMN].to_numpy(float)


def _figure() -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 5.0), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _save(fig: Any, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def plot_pred_vs_true(
    df: pd.DataFrame | Mapping[str, pd.DataFrame], path: str | Path, title: str | None = None
) -> Path:
    """Log-log scatter of predicted against measured ms, one colour per predictor, with the y = x line."""
    fig, ax = _figure()
    lo, hi = np.inf, 0.0
    for name, pred, true in _series(df):
        ax.scatter(true, pred, s=8, alpha=0.6, label=name, edgecolors="none")
        lo, hi = min(lo, pred.min(), true.min()), max(hi, pred.max(), true.max())
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=1, linestyle="--", label="y = x")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured iteration time (ms)")
    ax.set_ylabel("predicted iteration time (ms)")
    ax.set_title(title or "Predicted vs measured")
    ax.legend(fontsize="small", markerscale=2)
    ax.grid(True, which="major", alpha=0.3)
    return _save(fig, path)


def plot_error_cdf(
    df: pd.DataFrame | Mapping[str, pd.DataFrame], path: str | Path, title: str | None = None
) -> Path:
    """CDF of the absolute percentage error per predictor (log x axis), with 10% and 20% marked."""
    fig, ax = _figure()
    errors = [(name, np.sort(100.0 * np.abs(pred - true) / true)) for name, pred, true in _series(df)]
    # A log axis cannot show 0: exact predictions are drawn at the smallest positive error seen.
    positive = np.concatenate([ape[ape > 0] for _, ape in errors])
    floor = positive.min() if positive.size else 1e-3
    for name, ape in errors:
        share = np.arange(1, len(ape) + 1) / len(ape)
        ax.step(np.maximum(ape, floor), share, where="post", label=name)
    for mark in (10, 20):
        ax.axvline(mark, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel("absolute percentage error (%)")
    ax.set_ylabel("share of samples")
    ax.set_title(title or "Error CDF")
    ax.legend(fontsize="small")
    ax.grid(True, which="major", alpha=0.3)
    return _save(fig, path)
