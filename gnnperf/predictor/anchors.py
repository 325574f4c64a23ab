"""Predictions anchored on measured times: calibration factors and transfers from another device.

:meth:`gnnperf.predict.Predictor.calibrate` turns measured (query, ms) pairs into one factor per device and
workload (:func:`calibration_factors`), which later predictions of that key are scaled by;
:meth:`gnnperf.predict.Predictor.transfer` scales a prediction by the measured / predicted ratio of the same step
on another device (:func:`transferred`). Either way a row's time, interval and per-op breakdown scale alike.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from gnnperf.errors import GnnperfError

# what a calibration factor applies to: one device and workload as asked
CALIBRATION_KEYS = ("hardware", "precision", "mode", "timed", "memory_format", "num_devices", "parallel")


def calibration_key(row: Mapping[str, Any]) -> tuple:
    return tuple(row[k] for k in CALIBRATION_KEYS)


def _positive_ms(ms: Any) -> bool:
    return isinstance(ms, (int, float)) and not isinstance(ms, bool) and math.isfinite(ms) and ms > 0


def check_calibration(measured_ms: Sequence[Any]) -> None:
    """Raise :class:`GnnperfError` for no measurements or a time that is not a positive number of ms."""
    bad = [ms for ms in measured_ms if not _positive_ms(ms)]
    if not measured_ms or bad:
        raise GnnperfError(f"calibration needs measured times > 0 ms, got {bad[0] if bad else 'none'}")


def check_transfer(measured_ms: Any) -> None:
    """Raise :class:`GnnperfError` unless ``measured_ms`` is a positive number."""
    if not _positive_ms(measured_ms):
        raise GnnperfError(f"a measured time must be a positive number of ms, got {measured_ms!r}")


def calibration_factors(
    rows: Sequence[Mapping[str, Any]], measured_ms: Sequence[float]
) -> dict[tuple, float]:
    """exp(mean log(measured / predicted)) per :func:`calibration_key` of the uncalibrated ``rows``."""
    logs: dict[tuple, list[float]] = defaultdict(list)
    for row, ms in zip(rows, measured_ms, strict=True):
        logs[calibration_key(row)].append(math.log(ms / row["iteration_time_ms"]))
    return {key: math.exp(sum(v) / len(v)) for key, v in logs.items()}


def scale(row: dict, factor: float) -> None:
    """Multiply ``row``'s time, its interval and its per-op breakdown by ``factor``, in place."""
    row["iteration_time_ms"] *= factor
    row["interval_ms"] = [v * factor for v in row["interval_ms"]]
    for op in (*row.get("breakdown", []), *row.get("breakdown_by_class", [])):
        op["ms"] *= factor
    for key in ("breakdown_all_ops_ms", "breakdown_step_ms"):
        if key in row:
            row[key] *= factor


def transferred(row: dict, there: Mapping[str, Any], measured_ms: float) -> dict:
    """``row`` scaled by ``measured_ms`` over ``there``'s prediction (the same step on the measured device).

    The row gains ``measured_on`` (that device, the measured and predicted times, and what the prediction there
    extrapolated) and ``transfer_factor``.
    """
    from gnnperf.predictor.report import NOTES

    factor = measured_ms / there["iteration_time_ms"]
    scale(row, factor)
    row["measured_on"] = {
        "hardware": there["hardware"],
        "ms": float(measured_ms),
        "predicted_ms": there["iteration_time_ms"],
        "flags": {k: there[k] for k in NOTES if there.get(k)},
    }
    row["transfer_factor"] = factor
    return row
