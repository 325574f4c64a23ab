"""Which exported ops PyTorch runs as one eager kernel: the groups :mod:`gnnperf.graph.cost` prices as one pass."""

from __future__ import annotations

import math

from gnnperf.graph.ir import OpGraph


def fused_groups(graph: OpGraph) -> list[list[int]]:
    """Node indices, in order, of the op chains that PyTorch runs as one eager kernel.

    The TorchScript exporter's forms: a Linear's ``MatMul`` then bias ``Add`` (``addmm``); exact GELU
    ``Div, Erf, Add, Mul[, Mul]``; SiLU ``Sigmoid, Mul`` of one input; GroupNorm's ``InstanceNormalization``,
    ``Reshape``, affine ``Mul``, ``Add``. Every intermediate has no other consumer. The tanh GELU, written as ten
    ops, and explicit formulas (GPT-2's ``gelu_new`` with its ``Pow``, which PyTorch runs op by op) are not fused.
    An ``Add`` after a ``MatMul`` is its bias when the parameter holds one value per output feature; an
    attention-score bias (Swin's relative position bias after ``q @ k^T``) is a kernel of its own (until
    ``FEATURE_VERSION`` 6 any parameter counted as a bias, and that pass went unpriced).
    """
    nodes = graph.nodes
    producer = {o: i for i, n in enumerate(nodes) for o in n.outputs}
    consumers: dict[str, list[int]] = {}
    for j, n in enumerate(nodes):
        for v in n.inputs:
            if v:
                consumers.setdefault(v, []).append(j)

    def data(i: int) -> list[str]:
        return [v for v in nodes[i].inputs if v]

    def sole(i: int, *ops: str) -> int | None:
        """The one consumer of node i's one output, when it is one of ``ops``."""
        out = nodes[i].outputs
        users = consumers.get(out[0], []) if len(out) == 1 else []
        return users[0] if len(users) == 1 and nodes[users[0]].op_type in ops else None

    def is_bias(add: int, matmul: int) -> bool:
        """The Add's parameter is one value per output feature, as a Linear's bias (not a (heads, N, N) score bias)."""
        fixed = [f for v, f in zip(nodes[add].inputs, nodes[add].fixed_shapes) if not v and f is not None]
        features = graph.values[nodes[matmul].outputs[0]].shape(1)[-1:]
        return len(fixed) == 1 and math.prod(fixed[0]) == math.prod(features)

    groups: list[list[int]] = []
    for i, n in enumerate(nodes):
        op = n.op_type
        if op == "MatMul":
            j = sole(i, "Add")
            if j is not None and nodes[j].params and len(data(j)) == 1 and is_bias(j, i):
                groups.append([i, j])
        elif op == "Sigmoid" and not n.params and len(data(i)) == 1:
            j = sole(i, "Mul")
            if j is not None and sorted(data(j)) == sorted([data(i)[0], n.outputs[0]]):
                groups.append([i, j])
        elif op == "Erf" and len(data(i)) == 1 and data(i)[0] in producer:
            d = producer[data(i)[0]]
            x = data(d)
            if nodes[d].op_type not in ("Div", "Mul") or len(x) != 1 or sole(d, "Erf") != i:
                continue
            a = sole(i, "Add")
            m = sole(a, "Mul") if a is not None and len(data(a)) == 1 else None
            if m is None or sorted(data(m)) != sorted([x[0], nodes[a].outputs[0]]):
                continue
            half = sole(m, "Mul")
            groups.append([d, i, a, m] + ([half] if half is not None and len(data(half)) == 1 else []))
        elif op == "InstanceNormalization":
            r = sole(i, "Reshape")
            scale = sole(r, "Mul") if r is not None else None
            shift = sole(scale, "Add") if scale is not None and nodes[scale].params else None
            if shift is not None and nodes[shift].params and len(data(scale)) == len(data(shift)) == 1:
                groups.append([i, r, scale, shift])
    return groups
