"""The roofline time of every op, from the raw (unstandardised) node, workload and hardware features.

A GNN that learns how time depends on the device from three or four training GPUs extrapolates badly to a
faster one (the A100 beside TITANs): nothing in an MLP over spec features says that twice the FLOP/s halves a
compute-bound op. The ``roofline`` readout therefore predicts each op's time as its roofline time on the
device, ``(work * flops / peak + work * bytes / bandwidth)``, times a learned, bounded inefficiency, plus a learned
fixed cost per op. The device enters through its data-sheet numbers first, so an unseen GPU is predicted by
physics, corrected by what the GNN learned (the NeuSight idea of predicting utilisation instead of time).

This recomputes in torch what :mod:`gnnperf.baselines.registry` computes in numpy for the roofline baseline:
the baseline works on plain arrays, the readout on batches inside the autograd graph.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gnnperf.baselines.registry import WORK_MULTIPLIER
from gnnperf.graph.features import GRAPH_FEATURES, NODE_FEATURES
from gnnperf.hardware.vector import HARDWARE_FEATURES, PEAK_FIELD

# Which peak a precision runs at: the hardware-vector column of the spec field the baselines read
# (:func:`~gnnperf.hardware.vector.precision_peak_tflops`); a device without that number falls back to its FP32 peak.
_PEAK = {p: f"log1p_{field}" for p, field in PEAK_FIELD.items()} | {"tf32": "log1p_peak_tf32_tflops"}


class RooflinePrior(nn.Module):
    """``forward(batch, node_batch) -> (compute ms [N], memory ms [N])`` of each op on its graph's device."""

    def __init__(self) -> None:
        super().__init__()
        node, graph = ([n for n, _ in f] for f in (NODE_FEATURES, GRAPH_FEATURES))
        hw = list(HARDWARE_FEATURES)
        self.i_flops = node.index("log_flops")
        self.i_bytes = [node.index("log_bytes_read"), node.index("log_bytes_written")]
        self.i_bandwidth = hw.index("log1p_mem_bandwidth_gbs")
        self.i_fp32 = hw.index("log1p_peak_fp32_tflops")
        precisions = [n.split("=", 1)[1] for n in graph if n.startswith("precision=")]
        self.i_precision = [graph.index(f"precision={p}") for p in precisions]
        self.register_buffer("peak_column", torch.tensor([hw.index(_PEAK[p]) for p in precisions]))
        timed = [n.split("=", 1)[1] for n in graph if n.startswith("timed=")]
        self.i_timed = [graph.index(f"timed={t}") for t in timed]
        self.register_buffer("work", torch.tensor([WORK_MULTIPLIER[t] for t in timed]))

    def forward(self, batch, node_batch: Tensor) -> tuple[Tensor, Tensor]:
        """Each op's compute time and memory time in ms on its graph's device, ``([N], [N])``."""
        x, u, hw = batch.x, batch.u, batch.hw
        precision = u[:, self.i_precision].argmax(dim=1)
        peak_tflops = torch.expm1(hw.gather(1, self.peak_column[precision].unsqueeze(1)).squeeze(1))
        peak_tflops = torch.where(peak_tflops > 0, peak_tflops, torch.expm1(hw[:, self.i_fp32]))
        bandwidth_gbs = torch.expm1(hw[:, self.i_bandwidth])
        work = self.work[u[:, self.i_timed].argmax(dim=1)]
        # ms per FLOP and per byte of each graph's device; a spec without a number gets a neutral large rate
        ms_per_flop = work / (peak_tflops.clamp_min(1e-3) * 1e9)
        ms_per_byte = work / (bandwidth_gbs.clamp_min(1e-3) * 1e6)
        flops = torch.expm1(x[:, self.i_flops]).clamp_min(0.0)
        moved = torch.expm1(x[:, self.i_bytes]).clamp_min(0.0).sum(dim=1)
        return flops * ms_per_flop[node_batch], moved * ms_per_byte[node_batch]
