"""Normalisation statistics of a :class:`~gnnperf.data.dataset.PerfDataset` over its train samples."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch

from gnnperf.data.dataset import STAT_KEYS, PerfDataset
from gnnperf.errors import GnnperfError

STD_FLOOR = 1e-6  # constant columns standardise to 0
# A device column whose training devices' values span less than this counts as constant too. Two CPU hosts'
# records reported 25.33 and 25.32 GB of memory: standardised by that spread, a third host's 25.28 GB sat 16
# deviations out along a direction no gradient shaped (experiments/cpu_unseen_host). The columns are logs or flags: 1%.
MIN_SPAN = 1e-2


class _Moments:
    """Weighted column sums in float64, for means and standard deviations."""

    def __init__(self) -> None:
        self.total: torch.Tensor | float = 0.0
        self.total_sq: torch.Tensor | float = 0.0
        self.count = 0

    def add(self, rows: torch.Tensor, weight: int) -> None:
        rows = rows.double()
        self.total = self.total + weight * rows.sum(0)
        self.total_sq = self.total_sq + weight * rows.square().sum(0)
        self.count += weight * rows.shape[0]

    def result(self, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.count == 0:  # e.g. no train graph has an edge
            return torch.zeros(width), torch.ones(width)
        mean = self.total / self.count
        std = (self.total_sq / self.count - mean.square()).clamp_min(0).sqrt().clamp_min(STD_FLOOR)
        return mean.float(), std.float()


def feature_stats(
    dataset: PerfDataset, indices: Sequence[int] | np.ndarray
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Per-column (mean, std) of ``x``, ``edge_attr``, ``u``, ``hw`` and ``agg`` over the samples ``indices``.

    Pass the TRAIN indices only (positions in ``dataset.samples``). ``x`` and ``edge_attr`` are taken over every
    node and edge of every listed sample (a graph measured on two devices counts twice); the others over
    samples. ``std`` is floored at ``1e-6`` so constant columns standardise to 0; so is that of a device column the
    training devices span less than :data:`MIN_SPAN` in.
    """
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    if indices.size == 0:
        raise GnnperfError("feature_stats needs at least one (train) sample")
    moments = {k: _Moments() for k in STAT_KEYS}
    groups = Counter((int(dataset._graph_idx[i]), dataset._workloads[i]) for i in indices)
    widths: dict[str, int] = {}
    by_graph = sorted(groups.items(), key=lambda kv: kv[0][0])  # a graph's batch sizes in a row: parsed once
    for (graph_idx, workload), n in by_graph:
        base, u, agg = dataset._features(graph_idx, workload)
        for key, rows in (("x", base.x), ("edge_attr", base.edge_attr), ("u", u), ("agg", agg)):
            moments[key].add(rows, n)
            widths[key] = rows.shape[1]
    devices = Counter(dataset._hw_id[indices].tolist())
    for hw_id, n in devices.items():
        moments["hw"].add(dataset._hw[hw_id : hw_id + 1], n)
    widths["hw"] = dataset._hw.shape[1]
    stats = {k: moments[k].result(widths[k]) for k in STAT_KEYS}
    hw = torch.as_tensor(dataset._hw[sorted(devices)], dtype=torch.float64)
    mean, std = stats["hw"]
    stats["hw"] = (
        mean,
        torch.where(hw.amax(0) - hw.amin(0) < MIN_SPAN, torch.full_like(std, STD_FLOOR), std),
    )
    return stats
