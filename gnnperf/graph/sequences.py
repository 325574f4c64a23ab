"""Lower ONNX sequence ops that only split a tensor into a static list of tensors.

The dynamo exporter writes ``torch.split`` (HaloNet, BoTNet attention) as ``SplitToSequence`` followed by
``SequenceAt`` with constant indices. A sequence has no tensor shape, so the IR (whose values are tensors with
shapes affine in the batch) cannot hold it. When the split sizes and every index are constants, the pattern is
exactly a ``Split`` whose outputs are the selected items; this rewrites it so, which is also what PyTorch runs
(one split, views of the input). A scalar chunk size (``torch.split(x, 1, dim)`` in ``bat_resnext26ts``) is
expanded into the list of sizes when the exporter recorded the length of the split axis. Other uses of sequences are left alone and fail later with a clear message.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import onnx
from onnx import helper, numpy_helper


def _constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    out = {i.name: numpy_helper.to_array(i) for i in graph.initializer if int(np.prod(i.dims)) <= 64}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            out[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return out


def _like(old: onnx.NodeProto, new: onnx.NodeProto) -> onnx.NodeProto:
    """``new`` with ``old``'s metadata: the dynamo exporter's module path names the node in the IR."""
    new.metadata_props.extend(old.metadata_props)
    return new


def lower_split_sequences(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return ``model`` with every static ``SplitToSequence`` + ``SequenceAt`` pattern turned into ``Split``.

    The model is modified in place and returned. A pattern is static when the split sizes are a constant 1-D
    list (``keepdims`` is then irrelevant) and every consumer of the sequence is a ``SequenceAt`` with a
    constant index.
    """
    graph = model.graph
    consts = _constants(graph)
    dims = _static_dims(graph)
    consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)

    new_nodes: list[onnx.NodeProto] = []
    replaced: dict[int, list[onnx.NodeProto]] = {}  # id(SequenceAt) -> its replacement (Identity or nothing)
    for node in graph.node:
        if id(node) in replaced:
            new_nodes.extend(replaced[id(node)])
            continue
        split = _static_split(node, consts, dims)
        users = consumers[node.output[0]] if split is not None else []
        if (
            split is None
            or not users
            or any(u.op_type != "SequenceAt" or u.input[1] not in consts for u in users)
            or any(o in (v.name for v in graph.output) for o in node.output)
        ):
            new_nodes.append(node)
            continue
        outputs = [f"{node.output[0]}__item{k}" for k in range(len(split))]
        for user in users:
            k = int(consts[user.input[1]]) % len(split)
            if outputs[k].endswith(f"__item{k}"):  # first user of this item: Split writes its name directly
                outputs[k] = user.output[0]
                replaced[id(user)] = []
            else:  # a second user of the same item reads it through an Identity
                replaced[id(user)] = [
                    _like(user, helper.make_node("Identity", [outputs[k]], [user.output[0]], name=user.name))
                ]
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
        sizes = node.input[1]
        if consts[sizes].ndim == 0:  # Split needs the list of sizes: a Constant (folded out like any other)
            sizes = f"{node.output[0]}__sizes"
            value = numpy_helper.from_array(np.array(split, dtype=np.int64), sizes)
            new_nodes.append(helper.make_node("Constant", [], [sizes], name=sizes, value=value))
        new_nodes.append(
            _like(node, helper.make_node("Split", [node.input[0], sizes], outputs, name=node.name, axis=axis))
        )
    del graph.node[:]
    graph.node.extend(new_nodes)
    return model


def _static_dims(graph: onnx.GraphProto) -> dict[str, list[int | None]]:
    """Dims the exporter recorded for each value (``None`` where symbolic); dynamo graphs are typed."""
    out = {}
    for vi in (*graph.input, *graph.value_info):
        dims = vi.type.tensor_type.shape.dim
        out[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return out


def _static_split(
    node: onnx.NodeProto, consts: dict[str, np.ndarray], dims: dict[str, list[int | None]]
) -> list[int] | None:
    if node.op_type != "SplitToSequence" or len(node.input) < 2 or node.input[1] not in consts:
        return None
    split = consts[node.input[1]]
    if split.ndim == 1:
        return [int(s) for s in split]
    # a scalar is a chunk size (``torch.split(x, 1, dim)``): the chunks follow from the split axis' length
    axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
    shape = dims.get(node.input[0])
    length = shape[axis] if shape and -len(shape) <= axis < len(shape) else None
    if split.ndim != 0 or length is None or int(split) <= 0:
        return None
    size = int(split)
    return [min(size, length - start) for start in range(0, length, size)]
