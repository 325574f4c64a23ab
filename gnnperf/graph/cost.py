"""Per-op forward cost from shapes: FLOPs (a multiply-add is 2), bytes read and written, parameters.

``mat_flops`` counts only the products of matrix-like ops (Conv, ConvTranspose, Gemm, MatMul, Einsum,
recurrent cells) without bias adds: that is what ``torch.utils.flop_counter.FlopCounterMode`` counts, and the
tests hold it to that. ``flops`` adds bias, elementwise, normalisation, softmax, pooling and reduction work with
the per-element counts in :data:`PER_ELEMENT`. Data movement ops (Transpose, Concat, ...) cost bytes but no
FLOPs; the ops PyTorch runs as views (:data:`VIEWS`) cost none (a reshape after a transpose copies once: the
Transpose's bytes). An op type without a rule costs nothing and is reported in :data:`OTHER` by
:func:`graph_costs`.

Bytes are those of PyTorch's eager kernels, not of the ONNX ops: where the exporter writes one kernel as several
ops (a Linear's bias add, GELU, SiLU, GroupNorm's affine; :func:`gnnperf.graph.kernels.fused_groups`), the group
reads its input once and writes its output once (``FEATURE_VERSION`` 5; before, every op read and wrote its whole
tensor: ConvNeXt-T's training graph moved 44.0 GB at batch 64, now 18.7; ``FEATURE_VERSION`` 6 adds slicing,
``expand`` and ``select`` to the views and prices a Gather by the rows it picks). Not fused: attention that PyTorch
runs as one scaled-dot-product kernel is priced as the exported MatMul / Softmax / MatMul, with its score matrix.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gnnperf.errors import GnnperfError
from gnnperf.graph.ir import DTYPE_BYTES, Node, OpGraph
from gnnperf.graph.kernels import fused_groups

log = logging.getLogger(__name__)
OTHER = "OTHER"


@dataclass
class Cost:
    flops: float = 0.0
    mat_flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    params: int = 0
    known: bool = True  # False: no rule for the op type (FLOPs zero, bytes still counted)

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.flops / max(self.bytes_read + self.bytes_written, 1.0)


Shape = tuple[int, ...]

# FLOPs per output element (per input element for reductions). Simple arithmetic counts 1; composite
# activations count the arithmetic of their usual formula; training-mode normalisation computes statistics
# (mean: 1, variance: 3) then normalises and applies the affine (4).
PER_ELEMENT: dict[str, float] = {
    **dict.fromkeys(
        [
            "Add",
            "Sub",
            "Mul",
            "Div",
            "Relu",
            "LeakyRelu",
            "PRelu",
            "Neg",
            "Abs",
            "Max",
            "Min",
            "Sqrt",
            "Reciprocal",
            "Pow",
            "Exp",
            "Log",
            "Erf",
            "Tanh",
            "Sigmoid",
            "Sign",
            "Ceil",
            "Floor",
            "Round",
            "Clip",
            "Where",
            "Equal",
            "Less",
            "Greater",
            "LessOrEqual",
            "GreaterOrEqual",
            "And",
            "Or",
            "Not",
            "Mod",
            "Sin",
            "Cos",
        ],
        1.0,
    ),
    "Elu": 3.0,
    "Selu": 4.0,
    "Celu": 4.0,
    "Softplus": 3.0,
    "Softsign": 3.0,
    "HardSigmoid": 3.0,
    "HardSwish": 4.0,
    "Mish": 6.0,
    "Gelu": 8.0,
    "ThresholdedRelu": 1.0,
    "Dropout": 2.0,  # draw the mask, apply it
    "BatchNormalization": 8.0,
    "LayerNormalization": 8.0,
    "InstanceNormalization": 8.0,
    "GroupNormalization": 8.0,
    "LpNormalization": 3.0,
    "Softmax": 5.0,  # max, subtract, exp, sum, divide
    "LogSoftmax": 5.0,
    "CumSum": 1.0,
    "RandomUniformLike": 1.0,
    "RandomNormalLike": 1.0,
    "Bernoulli": 1.0,
    "Resize": 4.0,  # linear interpolation weights
}
REDUCTIONS = {
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL2",
    "ReduceSumSquare",
}
REDUCTIONS |= {"ReduceL1", "ReduceLogSumExp", "ArgMax", "ArgMin", "GlobalAveragePool", "GlobalMaxPool"}
MOVEMENT = set(
    [
        "Reshape",
        "Transpose",
        "Concat",
        "Split",
        "Slice",
        "Gather",
        "GatherElements",
        "GatherND",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Expand",
        "Identity",
        "Pad",
        "Cast",
        "CastLike",
        "Tile",
        "ScatterND",
        "ScatterElements",
        "Shape",
        "Size",
        "ConstantOfShape",
        "Range",
        "DepthToSpace",
        "SpaceToDepth",
        "Trilu",
        "NonZero",
        "TopK",
        "Einsum",
    ]
) - {"Einsum"}
# Ops PyTorch runs as views of their input: no kernel, no bytes (``x.view``, ``flatten``, ``squeeze``, ``split``,
# basic slicing ``x[:, a:b]``, ``expand``; a Gather of one constant index is ``x[:, 0]``, also a view: _gather_bytes). The
# copy comes where a consumer needs the view contiguous, and is priced only where that consumer is a Transpose
# (a reshape after it copies once: the Transpose's bytes); a Slice with a negative step (``flip``, a copy in
# PyTorch) is taken for a view too: the IR keeps no constant values.
VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Split", "Slice", "Expand"})
# For ablations (experiments/timm_train_family): a comma-separated subset of "fusion" (every exported op its own
# pass, as before FEATURE_VERSION 5) and "views" (views and Gathers read and write their whole tensors, as before
# versions 5 and 6). Part of a processed dataset's fingerprint (gnnperf.data.dataset); unset in normal use.
ABLATE_VAR = "GNNPERF_COST_ABLATE"
ABLATIONS = ("fusion", "views")


def ablated() -> frozenset[str]:
    """The cost rules switched off through :data:`ABLATE_VAR`; an unknown name raises ``GnnperfError``."""
    text = os.environ.get(ABLATE_VAR)
    if not text:  # the normal case
        return frozenset()
    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    if names - set(ABLATIONS):
        raise GnnperfError(
            f"{ABLATE_VAR}: unknown {sorted(names - set(ABLATIONS))}; known: {', '.join(ABLATIONS)}"
        )
    return names


def _numel(shape: Shape | None) -> int:
    # math.prod, not np.prod: called for every tensor of every node at every batch a prediction needs (5x faster
    # on these short tuples; exact past int64 too)
    return math.prod(shape) if shape else (1 if shape == () else 0)


def _has(ins: list, slot: int) -> bool:
    return len(ins) > slot and ins[slot] is not None


def _conv(node: Node, ins: list, outs: list) -> tuple[float, float]:
    mat = 2.0 * _numel(outs[0]) * _numel(ins[1][1:])  # weight (Cout, Cin/groups, *k)
    return mat, mat + (_numel(outs[0]) if _has(ins, 2) else 0)


def _conv_transpose(node: Node, ins: list, outs: list) -> tuple[float, float]:
    mat = 2.0 * _numel(ins[0]) * _numel(ins[1][1:])  # weight (Cin, Cout/groups, *k)
    return mat, mat + (_numel(outs[0]) if _has(ins, 2) else 0)


def _matmul_shapes(a: Shape, b: Shape) -> tuple[int, int, int, int]:
    """(batch, M, K, N) of numpy-style matmul with broadcasting; 1-D operands are promoted."""
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    batch = np.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2]))
    return _numel(batch), a2[-2], a2[-1], b2[-1]


def _matmul(node: Node, ins: list, outs: list) -> tuple[float, float]:
    try:
        batch, m, k, n = _matmul_shapes(ins[0], ins[1])
    except ValueError:
        # A non-data operand whose shape follows the batch (a parameter expanded to the batch size, as in
        # LambdaNet's positional term) is recorded at the probe batch only; the output's shape is exact.
        _, m, k, n = _matmul_shapes(ins[0][-2:], ins[1][-2:])
        batch = _numel(outs[0]) // max(m * n, 1)
    mat = 2.0 * batch * m * k * n
    return mat, mat


def _gemm(node: Node, ins: list, outs: list) -> tuple[float, float]:
    k = ins[0][0] if node.attrs.get("transA", 0) else ins[0][-1]
    mat = 2.0 * _numel(outs[0]) * k
    return mat, mat + (_numel(outs[0]) if _has(ins, 2) else 0)


def _einsum(node: Node, ins: list, outs: list) -> tuple[float, float]:
    eq = str(node.attrs.get("equation", "")).replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    operands = lhs.split(",")
    shapes = [s for s in ins if s is not None]
    sizes: dict[str, int] = {}
    ellipsis: list[int] = []  # the broadcast shape of the operands' "..." dims, which every product runs over
    for letters, shape in zip(operands, shapes):
        head, _, tail = letters.partition("...")
        for ch, d in [*zip(head, shape[: len(head)]), *zip(tail, shape[len(shape) - len(tail) :])]:
            sizes[ch] = max(sizes.get(ch, 1), d)  # a size-1 operand dim broadcasts against the others
        dims = list(shape[len(head) : len(shape) - len(tail)]) if "..." in letters else []
        if len(dims) > len(ellipsis):
            ellipsis = [1] * (len(dims) - len(ellipsis)) + ellipsis
        for i, d in enumerate(dims, start=len(ellipsis) - len(dims)):  # right-aligned, as broadcasting
            ellipsis[i] = max(ellipsis[i], d)
    if len(operands) < 2:
        return 0.0, float(_numel(shapes[0]))
    # torch.einsum contracts left to right, one pair at a time; the intermediate keeps the letters still needed
    keep = [
        set(rhs.replace("...", "")) | set("".join(operands[i + 1 :]).replace("...", ""))
        for i in range(len(operands))
    ]
    mat, acc = 0.0, set(operands[0].replace("...", ""))
    for i, letters in enumerate(operands[1:], start=1):
        both = acc | set(letters.replace("...", ""))
        mat += 2.0 * math.prod(sizes[c] for c in both) * math.prod(ellipsis)
        acc = both & keep[i]
    return mat, mat


def _rnn(node: Node, ins: list, outs: list) -> tuple[float, float]:
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[node.op_type]
    x = ins[0]  # (seq, batch, input) in ONNX layout
    hidden = int(node.attrs.get("hidden_size", 0))
    directions = 2 if node.attrs.get("direction") == "bidirectional" else 1
    steps = x[0] * x[1] * directions
    mat = 2.0 * steps * gates * hidden * (x[2] + hidden)
    return mat, mat + steps * gates * hidden * 4  # gate bias, activations, state update


def _pool(node: Node, ins: list, outs: list) -> tuple[float, float]:
    return 0.0, float(_numel(outs[0]) * math.prod(node.attrs.get("kernel_shape", [1])))


RULES: dict[str, Callable[[Node, list, list], tuple[float, float]]] = {
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Einsum": _einsum,
    "LSTM": _rnn,
    "GRU": _rnn,
    "RNN": _rnn,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "LpPool": _pool,
}


def _param_bytes(graph: OpGraph, node: Node) -> int:
    return sum(
        _numel(tuple(graph.params[p].shape)) * DTYPE_BYTES.get(graph.params[p].dtype, 4) for p in node.params
    )


def _gather_bytes(graph: OpGraph, node: Node, ins: list, written: int) -> tuple[int, int]:
    """(read, written) of a Gather: the rows it picks and its indices, not the whole table or tensor.

    One constant index (``x[:, 0]``, a class token) is PyTorch's ``select``, a view: no bytes. Otherwise
    ``index_select`` / an embedding lookup reads as many elements as it writes, and the indices.
    """
    if not node.inputs[1] and len(ins[1]) == 0:
        return 0, 0
    index = _numel(ins[1]) * (
        graph.values[node.inputs[1]].itemsize if node.inputs[1] else DTYPE_BYTES["int64"]
    )
    return written + index, written


def node_cost(graph: OpGraph, node: Node, batch_size: int, views: bool = True) -> Cost:
    """Cost of one node at ``batch_size``; ``views=False`` prices views and gathers by their tensors (ablation)."""
    fixed = node.fixed_shapes or [None] * len(node.inputs)
    ins = [
        graph.values[v].shape(batch_size) if v else (tuple(f) if f is not None else None)
        for v, f in zip(node.inputs, fixed)
    ]
    outs = [graph.values[v].shape(batch_size) for v in node.outputs]
    pshapes = [tuple(graph.params[p].shape) for p in node.params]
    pbytes = _param_bytes(graph, node)
    read = sum(_numel(s) * graph.values[v].itemsize for v, s in zip(node.inputs, ins) if v) + pbytes
    written = sum(_numel(s) * graph.values[v].itemsize for v, s in zip(node.outputs, outs))
    op = node.op_type
    if op in VIEWS and views:
        read = written = 0
    elif op == "Gather" and _has(ins, 1) and views:
        read, written = _gather_bytes(graph, node, ins, written)
    cost = Cost(bytes_read=float(read), bytes_written=float(written), params=sum(map(_numel, pshapes)))
    if op in RULES:
        cost.mat_flops, cost.flops = RULES[op](node, ins, outs)
    elif op in PER_ELEMENT:
        cost.flops = PER_ELEMENT[op] * _numel(outs[0])
    elif op in REDUCTIONS:
        cost.flops = float(_numel(ins[0]))
    elif op not in MOVEMENT:
        cost.known = False
    return cost


_WARNED_UNKNOWN: set[str] = set()  # op types already reported by graph_costs in this process


def _fuse(costs: list[Cost], group: list[int], graph: OpGraph) -> None:
    """One kernel: the first op reads the group's input, the last writes its output; parameters stay read."""
    for k in group[1:]:
        costs[k].bytes_read = float(_param_bytes(graph, graph.nodes[k]))
    for k in group[:-1]:
        costs[k].bytes_written = 0.0


def graph_costs(
    graph: OpGraph, batch_size: int, off: frozenset[str] | None = None
) -> tuple[list[Cost], dict[str, int]]:
    """Costs of every node, and the op types that had no rule (counted; costed as zero).

    ``off``: the rules switched off (:data:`ABLATIONS`); by default those of :data:`ABLATE_VAR`.
    """
    if off is None:  # read once per graph: node_cost is the hot path of `gnnperf predict`
        off = ablated()
    costs = [node_cost(graph, node, batch_size, views="views" not in off) for node in graph.nodes]
    for group in fused_groups(graph) if "fusion" not in off else []:
        _fuse(costs, group, graph)
    unknown: dict[str, int] = {}
    for node, c in zip(graph.nodes, costs):
        if not c.known:
            unknown[node.op_type] = unknown.get(node.op_type, 0) + 1
    new = sorted(set(unknown) - _WARNED_UNKNOWN)
    if new:  # once per op type and process: a training run costs each graph at every batch size it loads
        _WARNED_UNKNOWN.update(new)
        log.warning("no cost rule for %s; counted as %s with zero cost", ", ".join(new), OTHER)
    return costs, unknown
