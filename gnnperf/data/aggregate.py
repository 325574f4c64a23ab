"""Whole-model aggregate features for the ORION/PreNeT-style baselines (one fixed-length vector per sample).

The graph is reduced to totals and an op-type mix at the sample's batch size, followed by the workload.

| feature | value |
|---|---|
| log_total_flops | log1p forward FLOPs of the graph (multiply-add = 2) |
| log_mat_flops | log1p FLOPs of matrix products (Conv, Gemm, MatMul, Einsum, RNN cells) |
| log_bytes | log1p bytes read plus bytes written by all ops |
| log_params | log1p trainable parameters |
| log_activations | log1p elements written by all ops (sum of output numel) |
| log_num_nodes | log1p op nodes |
| log2_batch | log2 of the batch size |
| flops_share=CLASS | share of forward FLOPs in op class CLASS (0 when the graph has no FLOPs) |
| node_share=CLASS | share of op nodes in op class CLASS |
| flops_share=grouped_conv | share of forward FLOPs in grouped convolutions that are not depthwise |
| grouped_conv_x_channels_last | that share with channels-last memory format, else 0 (a slow kernel regime, see
  :func:`gnnperf.graph.features.conv_groups`) |
| precision=P, mode=M, optimizer=O, timed=T | one-hots of the workload |
| h2d | 1 if the host-to-device input copy is timed |
| channels_last | 1 for channels-last memory format |
| log2_devices | log2 of the number of devices |

Op classes (CLASS): ``conv`` (Conv, ConvTranspose), ``matmul`` (Gemm, MatMul, Einsum, LSTM/GRU/RNN),
``norm`` (batch/layer/instance/group/Lp normalisation), ``elementwise`` (activations, arithmetic, softmax,
dropout, reductions other than global pooling), ``pooling`` (max/average/Lp pooling, global pooling),
``movement`` (reshape, transpose, concat, slice, gather, cast, ...: bytes but no FLOPs), ``other`` (the rest,
e.g. op types without a cost rule).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from gnnperf.graph.cost import MOVEMENT, PER_ELEMENT, REDUCTIONS, Cost, graph_costs
from gnnperf.graph.features import conv_groups
from gnnperf.graph.ir import OpGraph
from gnnperf.measure.workload import MODES, OPTIMIZERS, PRECISIONS, TIMED, Workload

OP_CLASSES: tuple[str, ...] = ("conv", "matmul", "norm", "elementwise", "pooling", "movement", "other")
_NORMS = {
    "BatchNormalization",
    "LayerNormalization",
    "InstanceNormalization",
    "GroupNormalization",
    "LpNormalization",
}
_POOLS = {"MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool"}
_CLASS_OF: dict[str, str] = {
    **dict.fromkeys(PER_ELEMENT, "elementwise"),
    **dict.fromkeys(REDUCTIONS, "elementwise"),
    **dict.fromkeys(MOVEMENT, "movement"),
    **dict.fromkeys(_NORMS, "norm"),
    **dict.fromkeys(_POOLS, "pooling"),
    **dict.fromkeys(("Conv", "ConvTranspose"), "conv"),
    **dict.fromkeys(("Gemm", "MatMul", "Einsum", "LSTM", "GRU", "RNN"), "matmul"),
}

AGG_FEATURES: list[str] = [
    "log_total_flops",
    "log_mat_flops",
    "log_bytes",
    "log_params",
    "log_activations",
    "log_num_nodes",
    "log2_batch",
    *(f"flops_share={c}" for c in OP_CLASSES),
    *(f"node_share={c}" for c in OP_CLASSES),
    "flops_share=grouped_conv",
    "grouped_conv_x_channels_last",
    *(f"precision={p}" for p in PRECISIONS),
    *(f"mode={m}" for m in MODES),
    *(f"optimizer={o}" for o in OPTIMIZERS),
    *(f"timed={t}" for t in TIMED),
    "h2d",
    "channels_last",
    "log2_devices",
]


def op_class(op_type: str) -> str:
    """The op class (one of :data:`OP_CLASSES`) of an ONNX op type."""
    return _CLASS_OF.get(op_type, "other")


def _one_hot(value: str | None, choices: Sequence[str]) -> list[float]:
    return [1.0 if value == c else 0.0 for c in choices]


def grouped_conv_share(graph: OpGraph, costs: list[Cost]) -> float:
    """Share of the forward FLOPs of ``costs`` in grouped convolutions that are not depthwise (0 without FLOPs)."""
    total = sum(c.flops for c in costs)
    grouped = 0.0
    for i, cost in enumerate(costs):
        groups, in_channels = conv_groups(graph, i)
        grouped += cost.flops if 1 < groups < in_channels else 0.0
    return grouped / total if total > 0 else 0.0


def aggregate_features(graph: OpGraph, workload: Workload, costs: list[Cost] | None = None) -> np.ndarray:
    """The float32 vector of :data:`AGG_FEATURES` for ``graph`` at ``workload.batch_size``.

    Args:
        costs: per-node costs at that batch size (from :func:`gnnperf.graph.cost.graph_costs`), when the
            caller already has them; computed otherwise.
    """
    batch = workload.batch_size
    if costs is None:
        costs, _ = graph_costs(graph, batch)
    total_flops = sum(c.flops for c in costs)
    activations = sum(math.prod(graph.values[v].shape(batch)) for n in graph.nodes for v in n.outputs)
    flops_by_class = dict.fromkeys(OP_CLASSES, 0.0)
    nodes_by_class = dict.fromkeys(OP_CLASSES, 0.0)
    for node, cost in zip(graph.nodes, costs, strict=True):
        cls = op_class(node.op_type)
        flops_by_class[cls] += cost.flops
        nodes_by_class[cls] += 1.0
    grouped_share = grouped_conv_share(graph, costs)
    channels_last = float(workload.memory_format == "channels_last")
    num_nodes = len(graph.nodes)
    values = [
        math.log1p(total_flops),
        math.log1p(sum(c.mat_flops for c in costs)),
        math.log1p(sum(c.bytes_read + c.bytes_written for c in costs)),
        math.log1p(graph.param_count()),
        math.log1p(activations),
        math.log1p(num_nodes),
        math.log2(batch),
        *(flops_by_class[c] / total_flops if total_flops > 0 else 0.0 for c in OP_CLASSES),
        *(nodes_by_class[c] / num_nodes if num_nodes else 0.0 for c in OP_CLASSES),
        grouped_share,
        grouped_share * channels_last,
        *_one_hot(workload.precision, PRECISIONS),
        *_one_hot(workload.mode, MODES),
        *_one_hot(workload.optimizer, OPTIMIZERS),
        *_one_hot(workload.timed, TIMED),
        float(workload.h2d),
        channels_last,
        math.log2(workload.num_devices),
    ]
    return np.asarray(values, dtype=np.float32)
