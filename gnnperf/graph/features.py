"""OpGraph at a batch size + workload -> ``torch_geometric.data.Data``.

Every feature is named in :data:`NODE_FEATURES`, :data:`EDGE_FEATURES` or :data:`GRAPH_FEATURES` together with
its meaning; the README's feature table is checked against these lists by a test. Features are raw (logs of
counts, flags); standardisation belongs to the predictor, with statistics from its train split.
Bump :data:`FEATURE_VERSION` whenever a feature or the IR changes meaning: cached graphs and checkpoints carry it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from gnnperf.graph.cost import Cost, graph_costs
from gnnperf.graph.ir import OpGraph
from gnnperf.measure.workload import MODES, OPTIMIZERS, PRECISIONS, TIMED, Workload

if TYPE_CHECKING:
    from torch_geometric.data import Data

# 2: grouped-convolution features (node `grouped`, `log_channels_per_group`); 3: IR 2; 4: IR 3; 5: bytes of
# eager kernels (views free, fused bias / GELU / SiLU / GroupNorm affine; kernels.fused_groups), einsum pairwise;
# 6: Slice, Expand and a one-index Gather are views, a Gather reads the rows it picks, a bias is one per feature;
# 7: node flag `misaligned8` (matrix widths not multiples of 8)
FEATURE_VERSION = 7

# Op types seen in exported timm/torchvision/transformers graphs; anything else is OTHER.
OP_VOCAB: tuple[str, ...] = tuple(
    [
        "Conv",
        "ConvTranspose",
        "Gemm",
        "MatMul",
        "Einsum",
        "LSTM",
        "GRU",
        "RNN",
        "BatchNormalization",
        "LayerNormalization",
        "InstanceNormalization",
        "GroupNormalization",
        "Relu",
        "LeakyRelu",
        "PRelu",
        "Sigmoid",
        "Tanh",
        "Erf",
        "Gelu",
        "HardSigmoid",
        "HardSwish",
        "Softplus",
        "Mish",
        "Elu",
        "Clip",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Sqrt",
        "Exp",
        "Log",
        "Neg",
        "Abs",
        "Reciprocal",
        "Max",
        "Min",
        "Where",
        "Softmax",
        "LogSoftmax",
        "Dropout",
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "GlobalMaxPool",
        "ReduceMean",
        "ReduceSum",
        "ReduceMax",
        "Resize",
        "Reshape",
        "Transpose",
        "Concat",
        "Split",
        "Slice",
        "Gather",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Expand",
        "Pad",
        "Cast",
        "Tile",
        "Equal",
        "Less",
        "Greater",
        "Not",
        "CumSum",
        "RandomUniformLike",
        "ScatterND",
        "Identity",
    ]
) + ("OTHER",)
OP_INDEX = {op: i for i, op in enumerate(OP_VOCAB)}
EDGE_DTYPES = ("float32", "float16", "bfloat16", "int64", "bool")

NODE_FEATURES: list[tuple[str, str]] = [
    *((f"op={op}", f"one-hot: ONNX op type {op}") for op in OP_VOCAB),
    ("log_flops", "log1p forward FLOPs of the op (multiply-add = 2)"),
    ("log_mat_flops", "log1p FLOPs of matrix products (Conv, Gemm, MatMul, Einsum, RNN)"),
    ("log_bytes_read", "log1p bytes of data inputs and parameters read"),
    ("log_bytes_written", "log1p bytes of outputs written"),
    ("log_params", "log1p parameter count consumed"),
    ("log_intensity", "log1p FLOPs per byte moved"),
    ("out_rank", "rank of the first output"),
    ("log_out_numel", "log1p elements of the first output"),
    *((f"log_out_dim{-i}", f"log1p of the first output's dim -{i} (0 if absent)") for i in (1, 2, 3, 4)),
    ("log_in_numel", "log1p elements of the first data input"),
    ("kernel_h", "kernel height (Conv/pool; 0 otherwise)"),
    ("kernel_w", "kernel width (Conv/pool; 0 otherwise)"),
    ("stride", "mean stride (Conv/pool; 0 otherwise)"),
    ("dilation", "mean dilation (Conv; 0 otherwise)"),
    ("log_groups", "log1p of Conv groups"),
    ("depthwise", "1 if a grouped Conv with one input channel per group"),
    ("grouped", "1 if a grouped Conv that is not depthwise (1 < groups < input channels)"),
    ("log_channels_per_group", "log1p input channels per group (Conv; 0 otherwise)"),
    ("share_flops", "the op's share of the graph's forward FLOPs"),
    ("misaligned8", "1 if a Conv (per group, not depthwise), Gemm or MatMul has a width not a multiple of 8"),
]
EDGE_FEATURES: list[tuple[str, str]] = [
    ("log_bytes", "log1p bytes of the tensor carried"),
    ("rank", "rank of the tensor"),
    *((f"dtype={d}", f"one-hot: tensor dtype {d}") for d in EDGE_DTYPES),
]
# The graph-level features that describe the workload rather than the model; they open GRAPH_FEATURES.
WORKLOAD_FEATURES: list[tuple[str, str]] = [
    ("log2_batch", "log2 of the batch size"),
    *((f"precision={p}", f"one-hot: precision {p}") for p in PRECISIONS),
    *((f"mode={m}", f"one-hot: mode {m}") for m in MODES),
    *((f"optimizer={o}", f"one-hot: optimizer {o}") for o in OPTIMIZERS),
    *((f"timed={t}", f"one-hot: timed region {t}") for t in TIMED),
    ("h2d", "1 if the host-to-device input copy is inside the timed region"),
    ("channels_last", "1 if inputs and weights use channels-last memory format"),
    ("log2_devices", "log2 of the number of devices"),
]
GRAPH_FEATURES: list[tuple[str, str]] = [
    *WORKLOAD_FEATURES,
    *((f"log_input_dim{i}", f"log1p of per-sample input dim {i} (0 if absent)") for i in (0, 1, 2)),
    ("log_total_flops", "log1p forward FLOPs of the whole graph"),
    ("log_total_bytes", "log1p bytes moved by the whole graph"),
    ("log_params", "log1p trainable parameters"),
    ("log_num_nodes", "log1p number of op nodes"),
]


def _l(x: float) -> float:
    return math.log1p(max(float(x), 0.0))


def _one_hot(value: str, choices: tuple[str, ...]) -> list[float]:
    return [1.0 if value == c else 0.0 for c in choices]


def conv_groups(graph: OpGraph, i: int) -> tuple[int, int]:
    """(the ``group`` attribute, input channels): channels are those of a Conv's data input, 0 for other ops.

    Grouped convolutions that are not depthwise are a kernel-selection regime of their own: in timm's RTX 3090
    training table the median model with one runs 1.22x slower channels-last than NCHW, the median model
    without one 0.86x (``experiments/timm_train_family/grouped_conv.py``).
    """
    node = graph.nodes[i]
    groups = int(node.attrs.get("group", 1))
    first_in = next((v for v in node.inputs if v), None)
    if node.op_type != "Conv" or not first_in or len(graph.values[first_in].shape(1)) < 2:
        return groups, 0
    return groups, int(graph.values[first_in].shape(1)[1])


def matrix_widths(graph: OpGraph, i: int) -> tuple[int, int] | None:
    """(reduction width, output width) of a Conv (per group), Gemm or MatMul; ``None`` for other ops.

    Depthwise convolutions give ``None`` too: they run on no tensor-core kernel, so their widths do not matter.
    Tensor-core kernels (AMP fp16) want both widths in multiples of 8; other widths are padded or fall back to
    slower kernels. In timm's RTX 3090 training table a node flag for them scores the held-out families'
    models with over a tenth of their matrix FLOPs misaligned (ReXNet, GhostNet, PiT, HRNet, ...) 10.6% vs 12.6%
    MAPE over two seeds (``experiments/timm_train_family``, "Matrix widths that are not multiples of 8").
    """
    node = graph.nodes[i]
    out = graph.values[node.outputs[0]].shape(1) if node.outputs else ()
    if node.op_type == "Conv" and len(out) > 1:
        groups, in_channels = conv_groups(graph, i)
        if groups > 1 and groups == in_channels:
            return None
        return in_channels // max(groups, 1), out[1] // max(groups, 1)
    data = [v for v in node.inputs if v]
    if node.op_type in ("Gemm", "MatMul") and data and out and graph.values[data[0]].shape(1):
        return graph.values[data[0]].shape(1)[-1], out[-1]
    return None


def misaligned8(graph: OpGraph, i: int) -> bool:
    """Whether node ``i`` is a matrix op with a width not a multiple of 8 (:func:`matrix_widths`)."""
    widths = matrix_widths(graph, i)
    return widths is not None and any(d % 8 for d in widths)


def _node_row(graph: OpGraph, i: int, cost: Cost, batch: int, total_flops: float) -> list[float]:
    node = graph.nodes[i]
    row = [0.0] * len(OP_VOCAB)
    row[OP_INDEX.get(node.op_type, OP_INDEX["OTHER"])] = 1.0
    out = graph.values[node.outputs[0]].shape(batch) if node.outputs else ()
    first_in = next((v for v in node.inputs if v), None)
    in_numel = math.prod(graph.values[first_in].shape(batch)) if first_in else 0
    kernel = node.attrs.get("kernel_shape") or []
    strides = node.attrs.get("strides") or []
    dilations = node.attrs.get("dilations") or []
    groups, in_channels = conv_groups(graph, i)
    row += [
        _l(cost.flops),
        _l(cost.mat_flops),
        _l(cost.bytes_read),
        _l(cost.bytes_written),
        _l(cost.params),
        _l(cost.intensity),
        float(len(out)),
        _l(math.prod(out)),
        *(_l(out[-k]) if len(out) >= k else 0.0 for k in (1, 2, 3, 4)),
        _l(in_numel),
        float(kernel[0]) if kernel else 0.0,
        float(kernel[-1]) if kernel else 0.0,
        sum(strides) / len(strides) if strides else 0.0,
        sum(dilations) / len(dilations) if dilations else 0.0,
        _l(groups),
        1.0 if groups > 1 and groups == in_channels else 0.0,
        1.0 if 1 < groups < in_channels else 0.0,
        _l(in_channels / groups),
        cost.flops / total_flops if total_flops > 0 else 0.0,
        float(misaligned8(graph, i)),
    ]
    return row


def to_data(graph: OpGraph, workload: Workload, costs: list[Cost] | None = None) -> Data:
    """PyG ``Data`` with ``x``, ``edge_index``, ``edge_attr``, ``u`` (1 x graph features), ``op`` (vocab index).

    The workload's ``input_shape`` is ignored: the graph was built for one (``graph.input_shape``).
    """
    if costs is None:  # callers that also need the costs (aggregate features) pass them in
        costs, _ = graph_costs(graph, workload.batch_size)
    data = node_edge_data(graph, workload.batch_size, costs)
    data.u = torch.tensor([graph_vector(graph, workload, costs)], dtype=torch.float32)
    return data


def node_edge_data(graph: OpGraph, batch: int, costs: list[Cost]) -> Data:
    """:func:`to_data` without ``u``: what depends on the batch size only, shared by the workloads of one batch."""
    from torch_geometric.data import Data

    total_flops = sum(c.flops for c in costs)
    x = torch.tensor(
        [_node_row(graph, i, c, batch, total_flops) for i, c in enumerate(costs)], dtype=torch.float32
    )
    edges = graph.edges()
    edge_attr = []
    for _, _, v in edges:
        val = graph.values[v]
        shape = val.shape(batch)
        edge_attr.append(
            [_l(math.prod(shape) * val.itemsize), float(len(shape)), *_one_hot(val.dtype, EDGE_DTYPES)]
        )
    return Data(
        x=x,
        edge_index=torch.tensor([[s for s, _, _ in edges], [d for _, d, _ in edges]], dtype=torch.long).view(
            2, -1
        ),
        edge_attr=torch.tensor(edge_attr, dtype=torch.float32).view(-1, len(EDGE_FEATURES)),
        op=torch.tensor([OP_INDEX.get(n.op_type, OP_INDEX["OTHER"]) for n in graph.nodes], dtype=torch.long),
        num_nodes=len(graph.nodes),
    )


def graph_vector(graph: OpGraph, workload: Workload, costs: list[Cost]) -> list[float]:
    """The graph-level features ``u`` of ``graph`` under ``workload``, from the per-node ``costs`` at its batch.

    Apart from :func:`node_edge_data` (the batch size only), so that the workloads of one batch can share that.
    """
    batch = workload.batch_size
    total_flops = sum(c.flops for c in costs)
    dims = list(graph.input_shape)[:3] + [0] * (3 - min(3, len(graph.input_shape)))
    return [
        math.log2(batch),
        *_one_hot(workload.precision, PRECISIONS),
        *_one_hot(workload.mode, MODES),
        *_one_hot(workload.optimizer, OPTIMIZERS),
        *_one_hot(workload.timed, TIMED),
        float(workload.h2d),
        float(workload.memory_format == "channels_last"),
        math.log2(workload.num_devices),
        *(_l(d) for d in dims),
        _l(total_flops),
        _l(sum(c.bytes_read + c.bytes_written for c in costs)),
        _l(graph.param_count()),
        _l(len(graph.nodes)),
    ]
