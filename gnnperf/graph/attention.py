"""The ops of eager attention in a graph: what a fused attention kernel (PyTorch's sdpa) runs as one.

Eager attention is exported as ``MatMul(q, k^T)``, its scaling and mask (``Mul``, ``Div``, ``Add``, ``Where``, a
``Cast``), ``Softmax``, a ``Dropout``, ``MatMul(p, v)``: two matrix products of activations (no weight) around a
Softmax. Those ops write and read the score matrix (batch x heads x queries x keys) that sdpa's flash and
memory-efficient kernels never materialise; :func:`eager_attention_nodes` names them so that an sdpa model's
prediction can price them as the fused kernel instead (:mod:`gnnperf.predictor.fused_attention`).
"""

from __future__ import annotations

from gnnperf.graph.ir import OpGraph

__all__ = ["eager_attention_nodes"]

# what lies between the score product and the Softmax, and between the Softmax and the product with the values
_BETWEEN = {
    "Mul",
    "Div",
    "Add",
    "Sub",
    "Where",
    "Cast",
    "Dropout",
    "Reshape",
}  # Reshape: Swin adds its mask per window
_DEPTH = 6  # ops walked each way from a Softmax


def eager_attention_nodes(graph: OpGraph) -> list[int]:
    """Indices of the nodes of every eager attention in ``graph`` (see the module doc): for each Softmax fed, through
    scaling and masking, by a product of two activations and feeding, through a Dropout or a Cast, a product of two
    activations, those two products, the Softmax and the ops between them. Sorted; empty where there is none."""
    producer = {o: i for i, n in enumerate(graph.nodes) for o in n.outputs}
    consumers: dict[str, list[int]] = {}
    for j, n in enumerate(graph.nodes):
        for v in n.inputs:
            consumers.setdefault(v, []).append(j)

    def activations_product(i: int) -> bool:
        node = graph.nodes[i]
        return node.op_type == "MatMul" and not node.params and all(v in producer for v in node.inputs[:2])

    found: set[int] = set()
    for s, softmax in enumerate(graph.nodes):
        if softmax.op_type != "Softmax":
            continue
        before, i = [], s
        for _ in range(_DEPTH):  # back along the scores: the input produced by the product or an op between
            sources = [producer[v] for v in graph.nodes[i].inputs if v in producer]
            step = next((p for p in sources if activations_product(p)), None)
            if step is None:
                step = next((p for p in sources if graph.nodes[p].op_type in _BETWEEN), None)
            if step is None:
                break
            before.append(step)
            if activations_product(step):
                break
            i = step
        after, i = [], s
        for _ in range(_DEPTH):  # on along the probabilities, to the product with the values
            users = consumers.get(graph.nodes[i].outputs[0], [])
            if len(users) != 1 or not (
                activations_product(users[0]) or graph.nodes[users[0]].op_type in _BETWEEN
            ):
                break
            after.append(users[0])
            if activations_product(users[0]):
                break
            i = users[0]
        if before and after and activations_product(before[-1]) and activations_product(after[-1]):
            found.update((*before, s, *after))
    return sorted(found)
