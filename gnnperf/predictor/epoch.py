"""Epoch and run times from a prediction row (``gnnperf predict --epoch-samples``, ``--epochs``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def samples_per_iteration(row: Mapping[str, Any]) -> int:
    """Training samples one iteration of a prediction row takes: batch size x devices x accumulated micro-batches."""
    return row["batch_size"] * row["num_devices"] * row.get("grad_accum", 1)


def epoch_estimate(row: Mapping[str, Any], samples: int, epochs: int = 1) -> dict[str, Any]:
    """Time of one pass over ``samples`` training samples, and of ``epochs`` such passes, from a prediction row.

    ceil(samples / (batch size x devices x accumulated micro-batches)) iterations at the predicted iteration time (and its interval) of a row
    of :meth:`Predictor.predict`: the data loader, evaluation and checkpointing are not in it, nor a smaller last
    batch (counted as a full one). The run's interval is the epoch's times ``epochs``: one model's iterations share
    one prediction error, which does not average out over them.

    Raises:
        GnnperfError: ``samples`` or ``epochs`` is not a positive integer.
    """
    from gnnperf.errors import GnnperfError

    for what, n in (("samples per epoch", samples), ("epochs", epochs)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise GnnperfError(f"{what} must be a positive integer, got {n!r}")
    iterations = math.ceil(samples / samples_per_iteration(row))
    lo, hi = row["interval_ms"]
    epoch_s = iterations * row["iteration_time_ms"] / 1e3
    interval_s = [iterations * lo / 1e3, iterations * hi / 1e3]
    return {
        "samples": samples,
        "iterations": iterations,
        "time_s": epoch_s,
        "interval_s": interval_s,
        "epochs": epochs,
        "run_time_s": epochs * epoch_s,
        "run_interval_s": [epochs * v for v in interval_s],
    }
