"""Deep stacks without all their weights: export two blocks, repeat the second one in the IR.

A GPT-3-shaped config (32 blocks, 2.7B parameters) would need ~11 GB of fp32 weights just to be traced. Its
blocks are identical, so the model is exported with two of them; block 1's nodes are then cloned ``depth - 2``
times. Block 0 is kept as exported, because a first block can differ from later ones (it consumes the
embedding). A clone's inputs that came from block 0 are wired to the previous clone's matching outputs, and
everything after the stack reads from the last clone. Parameters are cloned under their block's index, so
parameter counts and bytes match the full model (tested against a full export of a small config).
"""

from __future__ import annotations

import re
from copy import deepcopy
from dataclasses import replace

from gnnperf.errors import GnnperfError
from gnnperf.graph.ir import OpGraph


def repeat_block(graph: OpGraph, depth: int, layer_scope: str) -> OpGraph:
    """Return ``graph`` (exported with blocks 0 and 1) grown to ``depth`` blocks by cloning block 1."""
    scope = re.compile(layer_scope)

    def block_of(name: str) -> int | None:
        m = scope.search(name)
        return int(m.group(1)) if m else None

    blocks = [block_of(n.name) for n in graph.nodes]
    idx1 = [i for i, b in enumerate(blocks) if b == 1]
    if not idx1 or not any(b == 0 for b in blocks) or any(b not in (None, 0, 1) for b in blocks):
        raise GnnperfError(f"{graph.model_ref}: cannot find two repeated blocks matching {layer_scope!r}")
    if depth <= 2:
        return graph

    def renamed(text: str, k: int) -> str:
        return scope.sub(lambda m: m.group(0).replace(m.group(1), str(k)), text, count=1)

    producer = {o: i for i, n in enumerate(graph.nodes) for o in n.outputs}
    by_name = {n.name: i for i, n in enumerate(graph.nodes)}
    # value of block 0 -> the matching value of block 1 (same op, same output slot)
    to_block1: dict[str, str] = {}
    for i in idx1:
        twin = by_name.get(renamed(graph.nodes[i].name, 0))
        if twin is not None:
            to_block1.update(zip(graph.nodes[twin].outputs, graph.nodes[i].outputs))
    block1_values = {o for i in idx1 for o in graph.nodes[i].outputs}

    def clone_value(v: str, k: int) -> str:
        return v if k == 1 else f"{v}@{k}"

    nodes = list(graph.nodes[: idx1[-1] + 1])
    values = dict(graph.values)
    params = dict(graph.params)
    for k in range(2, depth):
        for i in idx1:
            src = graph.nodes[i]
            ins = []
            for v in src.inputs:
                if v in block1_values:
                    ins.append(clone_value(v, k))
                elif v in producer and blocks[producer[v]] == 0:
                    if v not in to_block1:
                        raise GnnperfError(f"{graph.model_ref}: block 1 input '{v}' has no twin in block 1")
                    ins.append(clone_value(to_block1[v], k - 1))
                else:
                    ins.append(v)
            new_params = []
            for p in src.params:
                q = renamed(p, k)
                params.setdefault(q, deepcopy(params[p]))
                new_params.append(q)
            outs = [clone_value(o, k) for o in src.outputs]
            for o, new in zip(src.outputs, outs):
                values[new] = deepcopy(values[o])
            nodes.append(replace(src, name=renamed(src.name, k), inputs=ins, outputs=outs, params=new_params))
    last = {v: clone_value(v, depth - 1) for v in block1_values}
    for n in graph.nodes[idx1[-1] + 1 :]:
        nodes.append(replace(n, inputs=[last.get(v, v) for v in n.inputs]))
    meta = {**graph.meta, "repeated_blocks": {"exported": 2, "depth": depth}}
    return OpGraph(
        graph.model_ref,
        graph.input_shape,
        graph.exporter,
        graph.opset,
        nodes,
        values,
        params,
        graph.inputs,
        meta,
    )
