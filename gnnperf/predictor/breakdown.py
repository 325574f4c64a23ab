"""A per-op breakdown grouped the way a reader looks for the time: repeated ops together, and by op class.

A deep network repeats its blocks, so a plain list of its costliest ops is one op many times over (GPT-2 large:
the 24 costliest ops after the LM head were 24 of the 36 blocks' identical MLP projections). Here ops that sit at
the same place in the module tree once block indices are taken out (``/m/transformer/h.19/mlp/c_proj/Gemm`` and
``.../h.20/...``) and compute the same thing (op type, attributes, shapes, parameter shapes) form one group,
named with the indices it spans (``/m/transformer/h.[0-35]/mlp/c_proj/Gemm``); ops of one place that differ, such
as the first block of a ResNet stage, which changes the stride or the width, stay apart. Ops without repeats are
groups of one under their own name.

The op classes are the aggregate features' (:func:`gnnperf.data.aggregate.op_class`): conv, matmul, norm,
elementwise, pooling, movement, other.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from gnnperf.data.aggregate import op_class
from gnnperf.graph.ir import OpGraph

__all__ = ["by_class", "index_ranges", "op_fields", "top_groups"]

# A block index in an exported node name: a module path segment that ends in ``.<digits>`` (``h.19``, ``layer1.0``,
# ``blocks.3``) or is one (``/3/``, a top-level Sequential's child), the way torch.onnx scopes a ModuleList's or a
# Sequential's children.
_BLOCK_INDEX = re.compile(r"(?<=[./])(\d+)(?=/)")


def index_ranges(values: Sequence[int]) -> str:
    """``[0-35]``, ``[1,3,5-7]``: sorted distinct ints, runs of three or more written as a range."""
    vals = sorted(set(values))
    parts, start = [], 0
    for i in range(1, len(vals) + 1):
        if i == len(vals) or vals[i] != vals[i - 1] + 1:
            run = vals[start:i]
            parts.extend([f"{run[0]}-{run[-1]}"] if len(run) > 2 else map(str, run))
            start = i
    return "[" + ",".join(parts) + "]"


def _signature(graph: OpGraph, j: int) -> str:
    node = graph.nodes[j]

    def value(v: str) -> Any:
        val = graph.values.get(v)
        return None if val is None else [val.dtype, val.coef, val.const]

    params = [graph.params[p].shape for p in node.params if p in graph.params]
    rows = [
        node.attrs,
        [value(v) for v in node.inputs],
        [value(v) for v in node.outputs],
        params,
        node.fixed_shapes,
    ]
    return json.dumps(rows, sort_keys=True, default=repr)


def top_groups(graph: OpGraph, node_ms: Sequence[float], k: int) -> list[dict[str, Any]]:
    """The ``k`` groups of repeated ops (see the module docstring) with the most predicted time in all.

    Args:
        graph: the graph the times are of.
        node_ms: predicted ms of each of ``graph.nodes``.
        k: how many groups.

    Returns:
        ``{"op", "name", "count", "ms", "nodes"}`` per group, ``ms`` the group's total, largest first; ``name`` is
        the node's own where the group has one op, else its place with the block indices it spans; ``nodes`` are
        the group's ops, as indices into ``graph.nodes``.
    """
    groups: dict[tuple, list[tuple[list[str], float]]] = defaultdict(list)
    for j, node in enumerate(graph.nodes):
        parts = _BLOCK_INDEX.split(node.name)
        groups[(node.op_type, tuple(parts[0::2]), _signature(graph, j))].append((parts[1::2], j))
    out = []
    for (op, template, _), members in groups.items():
        name = [template[0]]
        for pos, text in enumerate(template[1:]):
            at = sorted({int(idx[pos]) for idx, _ in members})
            name += [str(at[0]) if len(at) == 1 else index_ranges(at), text]
        nodes = [j for _, j in members]
        ms = sum(float(node_ms[j]) for j in nodes)
        out.append({"op": op, "name": "".join(name), "count": len(nodes), "ms": ms, "nodes": nodes})
    out.sort(key=lambda g: g["ms"], reverse=True)
    return out[:k]


def by_class(graph: OpGraph, node_ms: Sequence[float]) -> list[dict[str, Any]]:
    """Predicted ms and op count per op class, largest first: ``{"class", "count", "ms"}``."""
    ms: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for node, t in zip(graph.nodes, node_ms, strict=True):
        cls = op_class(node.op_type)
        ms[cls] += float(t)
        count[cls] += 1
    return sorted(
        ({"class": c, "count": count[c], "ms": ms[c]} for c in ms), key=lambda r: r["ms"], reverse=True
    )


def op_fields(graph: OpGraph, ops_ms: Any, step_ms: float, breakdown: int) -> dict[str, Any]:
    """A prediction row's ``breakdown`` fields from its ops' predicted times ``ops_ms`` (of the step ``step_ms``):
    ``breakdown`` (the ``breakdown`` costliest groups, :func:`top_groups`), ``breakdown_by_class``,
    ``breakdown_all_ops_ms`` and ``breakdown_step_ms``."""
    return {
        "breakdown": top_groups(graph, ops_ms, breakdown),
        "breakdown_by_class": by_class(graph, ops_ms),
        # the rest of the time is the readout's per-iteration overhead (and any fallback blend)
        "breakdown_all_ops_ms": float(ops_ms.sum()),
        # the network's step the ops are of: what is composed on it (collectives, recomputation, the accumulated
        # passes) is the row's own
        "breakdown_step_ms": float(step_ms),
    }
