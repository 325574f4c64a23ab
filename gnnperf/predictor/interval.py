"""Split-conformal intervals of ``log(measured / predicted)`` from a validation part.

One interval over every validation row, and one per group of rows that share a device, mode and precision, where the
group has enough rows: the shipped v20's pooled 90% interval covered 98.5% of its timm test rows and 71% of this
project's CPU rows (the error differs several-fold between sources; ``experiments/uncertainty``), so the residuals of
a prediction's own device and step say more about it. The group is the device's and also the step's because a device's
rows may all be of one kind: the RTX 4090's are AMP inference, whose narrow interval would say nothing of a training
step there. Queries of a group with too few validation rows, and devices predicted from their specs, keep the
pooled interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gnnperf.errors import GnnperfError

# Rows a group needs for an interval of its own: 90% equal-tailed bounds exist from 19 rows (the 1st and 19th of
# 19), but are then the extremes; at 40 they are the 2nd and the 39th.
MIN_GROUP_ROWS = 40
_EPS = 1e-9  # (1 - 0.9) / 2 is 0.04999...: without it 20 x a would floor to 0


def rows_needed(coverage: float) -> int:
    """The fewest rows for which :func:`conformal_bounds` are not clamped to the extremes."""
    a = (1.0 - coverage) / 2
    return math.ceil(1 / a - _EPS) - 1


def conformal_bounds(log_ratio: np.ndarray, coverage: float) -> list[float]:
    """Equal-tailed split-conformal bounds: the floor((n+1)a)-th and ceil((n+1)(1-a))-th smallest, a = (1-coverage)/2.

    For a new row exchangeable with the ``n`` given, each bound is crossed with probability at most ``a``, so the
    interval holds with probability at least ``coverage`` (Vovk et al.; Lei et al. 2018). ``np.quantile``'s
    interpolated quantiles, which this replaces, fall short of that for small ``n``. Under :func:`rows_needed` rows
    the bounds are the smallest and largest value, and the coverage is not guaranteed.
    """
    x = np.sort(np.asarray(log_ratio, dtype=float))
    n, a = len(x), (1.0 - coverage) / 2
    if n == 0:
        raise GnnperfError("an interval needs validation rows, got none")
    k_lo, k_hi = math.floor((n + 1) * a + _EPS), math.ceil((n + 1) * (1 - a) - _EPS)
    return [float(x[max(k_lo, 1) - 1]), float(x[min(k_hi, n) - 1])]


def group_key(hardware: str, mode: str, precision: str) -> str:
    """The name of a group of rows with their own interval, e.g. ``"rtx-3090 train amp_fp16"``."""
    return f"{hardware} {mode} {precision}"


def interval_for(
    info: Mapping[str, Any], hardware: str, mode: str, precision: str
) -> tuple[list[float], str]:
    """A checkpoint's interval (log bounds) for a query, and its scope.

    ``"group"``: from the validation rows of this device, mode and precision (checkpoints since 2026-12-05 store
    them as ``interval_log_ratio_by_group``); ``"pooled"``: from every validation row.
    """
    own = info.get("interval_log_ratio_by_group", {}).get(group_key(hardware, mode, precision))
    if own is not None:
        return own, "group"
    return info.get("interval_log_ratio", [math.nan, math.nan]), "pooled"


def groups_of(rows: Any) -> list[str]:
    """:func:`group_key` of each row of a frame with ``hardware``, ``mode`` and ``precision`` columns."""
    return [group_key(*r) for r in rows[["hardware", "mode", "precision"]].to_numpy()]


def group_intervals(
    log_ratio: np.ndarray, groups: Sequence[str], coverage: float, min_rows: int = MIN_GROUP_ROWS
) -> dict[str, list[float]]:
    """:func:`conformal_bounds` of each group (:func:`group_key`) with at least ``min_rows`` rows, by name."""
    log_ratio, groups = np.asarray(log_ratio, dtype=float), np.asarray(groups)
    names, counts = np.unique(groups, return_counts=True)
    return {
        str(name): conformal_bounds(log_ratio[groups == name], coverage)
        for name, count in zip(names, counts)
        if count >= min_rows
    }


def covered(log_ratio: np.ndarray, groups: Sequence[str], pooled: list[float], by_group: dict) -> np.ndarray:
    """Whether each row lies in the interval a prediction for it prints (its group's, else the pooled one)."""
    bounds = np.array([by_group.get(str(g), pooled) for g in groups], dtype=float).reshape(-1, 2)
    log_ratio = np.asarray(log_ratio, dtype=float)
    return (log_ratio >= bounds[:, 0]) & (log_ratio <= bounds[:, 1])
