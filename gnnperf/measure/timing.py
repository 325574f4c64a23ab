"""Timing loops and their summary: per-iteration times until the median is pinned down.

The stopping rule is distribution-free: the 95% confidence bound of the median is a pair of order statistics
(ranks from the normal approximation to Binomial(n, 1/2)), checked every ~10% more iterations. CPU iterations
are timed with ``perf_counter_ns``; CUDA iterations with a pair of CUDA events each, read back only at the
checks so the host does not stall the device in between.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from gnnperf.measure.workload import MeasureSettings

Z_95 = 1.959964


def result(
    status: str,
    error: str | None = None,
    times_ns: list[int] | None = None,
    peak_memory_mb: float | None = None,
) -> dict[str, Any]:
    """The harness's result fields of a sample (GUIDE "Sample"); times are summarised from ``times_ns``."""
    out: dict[str, Any] = {
        "iteration_time_ms": None,
        "time_p10_ms": None,
        "time_p90_ms": None,
        "time_cv": None,
        "n_iters": 0,
        "peak_memory_mb": peak_memory_mb,
        "status": status,
        "error": error,
    }
    if times_ns:
        ms = np.asarray(times_ns, dtype=np.float64) / 1e6
        p10, p50, p90 = np.percentile(ms, [10, 50, 90])
        mean = float(ms.mean())
        out.update(
            iteration_time_ms=float(p50),
            time_p10_ms=float(p10),
            time_p90_ms=float(p90),
            time_cv=float(ms.std(ddof=1) / mean) if len(ms) > 1 and mean > 0 else 0.0,
            n_iters=len(ms),
        )
    return out


def median_rel_ci(sorted_times: list[int] | list[float]) -> float:
    """Relative half-width of the distribution-free 95% confidence bound of the median (``inf`` if too few).

    The bound is the pair of order statistics whose ranks come from the normal approximation to
    Binomial(n, 1/2); it assumes nothing about the shape of the timing distribution.
    """
    n = len(sorted_times)
    half = Z_95 * math.sqrt(n) / 2
    lo = math.floor(n / 2 - half)  # 1-based rank of the lower bound
    hi = math.ceil(n / 2 + 1 + half)  # 1-based rank of the upper bound
    if lo < 1 or hi > n:
        return math.inf
    mid = n // 2
    med = sorted_times[mid] if n % 2 else (sorted_times[mid - 1] + sorted_times[mid]) / 2
    if med <= 0:
        return math.inf
    return max(med - sorted_times[lo - 1], sorted_times[hi - 1] - med) / med


def time_cpu(step: Callable[[], None], settings: MeasureSettings) -> list[int]:
    """Per-iteration wall times in ns; nothing but the clock reads and one list store around ``step``."""
    clock = time.perf_counter_ns
    max_iters, min_iters, target = settings.max_iters, settings.min_iters, settings.target_rel_ci
    times = [0] * max_iters
    deadline = clock() + int(settings.max_time_s * 1e9)
    next_check = min_iters
    n = 0
    while n < max_iters:
        t0 = clock()
        step()
        t1 = clock()
        times[n] = t1 - t0
        n += 1
        if n >= min_iters and t1 >= deadline:
            break
        if n >= next_check:
            if target > 0 and median_rel_ci(sorted(times[:n])) <= target:
                break
            next_check = n + max(1, n // 10)
    return times[:n]


def time_cuda(step: Callable[[], None], settings: MeasureSettings, device: torch.device) -> list[int]:
    """Per-iteration device times in ns between CUDA events recorded around ``step`` on the current stream."""
    max_iters, min_iters, target = settings.max_iters, settings.min_iters, settings.target_rel_ci
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(max_iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(max_iters)]
    times: list[int] = []
    torch.cuda.synchronize(device)
    clock = time.perf_counter_ns
    deadline = clock() + int(settings.max_time_s * 1e9)
    next_check = min_iters
    n = 0
    while n < max_iters:
        starts[n].record()
        step()
        ends[n].record()
        n += 1
        late = n >= min_iters and clock() >= deadline
        if n >= next_check or late or n == max_iters:
            ends[n - 1].synchronize()  # only here does the host wait for the device
            times.extend(int(starts[i].elapsed_time(ends[i]) * 1e6) for i in range(len(times), n))
            if late or (target > 0 and median_rel_ci(sorted(times)) <= target):
                break
            next_check = n + max(1, n // 10)
    return times
