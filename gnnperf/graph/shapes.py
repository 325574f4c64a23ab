"""Concrete shape inference for an exported graph at a given batch size.

``onnx.shape_inference.infer_shapes(data_prop=True)`` leaves shapes unknown wherever a shape is computed at run
time through ops its data propagation does not cover (Swin's window padding, DropPath's ``ConstantOfShape``),
and onnxruntime's symbolic inference is slow there and loses the batch symbol. So this walks the graph once in
topological order: shape-computation nodes (``Shape``, ``Constant`` and anything fed only by them) are evaluated
with ONNX's reference operator implementations on tiny integer tensors, and every other node gets its output
types from ONNX's own per-node inference, given those computed values. Swin-T (4,600 nodes) takes ~0.2 s.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import defs, helper, numpy_helper, shape_inference
from onnx.reference.ops import load_op

from gnnperf.errors import GnnperfError

SHAPE_OPS = ("Shape", "Size")
# Values larger than this are typed but not kept: shape computations need small tensors, and keeping every
# evaluated value held 0.7-1.8 GB for MViTv2-tiny (relative-position index tensors that grow with the batch),
# more than 16 GB for MViTv2-huge. Downstream ops of a value not kept are typed by ONNX shape inference.
MAX_STATIC_NUMEL = 1 << 16


@dataclass
class InferredShapes:
    """Result of one pass: types of all values, and the values of shape-computation tensors."""

    types: dict[str, onnx.TypeProto]
    static: dict[str, np.ndarray] = field(default_factory=dict)

    def shape(self, name: str) -> tuple[int, ...] | None:
        t = self.types.get(name)
        if t is None or not t.tensor_type.HasField("shape"):
            return None
        dims = t.tensor_type.shape.dim
        if not all(d.HasField("dim_value") for d in dims):
            return None
        return tuple(int(d.dim_value) for d in dims)

    def dtype(self, name: str) -> int:
        t = self.types.get(name)
        return int(t.tensor_type.elem_type) if t is not None else 0


def _reference_op(node: onnx.NodeProto, opsets: dict[str, int]):
    cls = load_op(node.domain, node.op_type, opsets.get(node.domain, opsets.get("", 17)))
    return cls(node, {"log": lambda *a: None, "opsets": opsets, "verbose": 0, "new_ops": None})


def infer_shapes(model: onnx.ModelProto, batch_inputs: dict[str, int], batch_size: int) -> InferredShapes:
    """Infer every value's concrete type with the batch dimension of ``batch_inputs`` set to ``batch_size``.

    Args:
        model: the exported model (topologically sorted, as ONNX requires).
        batch_inputs: graph input name -> index of its batch dimension.
        batch_size: the concrete batch size.
    """
    graph = model.graph
    opsets = {o.domain: o.version for o in model.opset_import}
    types: dict[str, onnx.TypeProto] = {}
    for vi in graph.input:
        t = copy.deepcopy(vi.type)
        if vi.name in batch_inputs:
            d = t.tensor_type.shape.dim[batch_inputs[vi.name]]
            d.ClearField("dim_param")
            d.dim_value = batch_size
        types[vi.name] = t
    static: dict[str, np.ndarray] = {}
    for init in graph.initializer:
        types[init.name] = helper.make_tensor_type_proto(init.data_type, list(init.dims))
        if int(np.prod(init.dims)) <= 64:  # small constants can feed shape computations
            static[init.name] = numpy_helper.to_array(init)

    for node in graph.node:
        ins = [i for i in node.input if i]
        # a Shape of a tensor with an unknown dim (NonZero's count) is typed below, never evaluated as 0
        is_shape = node.op_type in SHAPE_OPS and ins and ins[0] in types and _dims_known(types[ins[0]])
        if node.op_type == "Constant" or is_shape or (ins and all(i in static for i in ins)):
            try:
                results = _evaluate(node, ins, types, static, opsets)
            except GnnperfError:
                if node.op_type == "Constant" or is_shape:
                    raise
                # ONNX's reference kernels do not cover every op and broadcast case (BERT's gather of its
                # token-type buffer); the outputs are then typed by inference below and not kept as values
                results = None
            if results is not None:
                for name, value in zip(node.output, results):
                    value = np.asarray(value)
                    if value.size <= MAX_STATIC_NUMEL:
                        static[name] = value
                    types[name] = helper.make_tensor_type_proto(
                        helper.np_dtype_to_tensor_dtype(value.dtype), value.shape
                    )
                continue
        try:
            schema = defs.get_schema(node.op_type, opsets.get(node.domain, 17), node.domain)
            in_types = {i: types[i] for i in ins if i in types}
            in_data = {i: numpy_helper.from_array(static[i], i) for i in ins if i in static}
            types.update(shape_inference.infer_node_outputs(schema, node, in_types, in_data))
        except Exception as e:  # onnx raises several exception types here
            raise GnnperfError(f"shape inference failed at {node.op_type} node '{node.name}': {e}") from None
    return InferredShapes(types=types, static=static)


def _dims_known(t: onnx.TypeProto) -> bool:
    return t.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in t.tensor_type.shape.dim)


def _evaluate(node, ins, types, static, opsets) -> list:
    if node.op_type == "Shape":
        dims = np.array([d.dim_value for d in types[ins[0]].tensor_type.shape.dim], dtype=np.int64)
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        return [dims[attrs.get("start", 0) : attrs.get("end")]]
    if node.op_type == "Size":
        dims = [d.dim_value for d in types[ins[0]].tensor_type.shape.dim]
        return [np.array(int(np.prod(dims)), dtype=np.int64)]
    try:
        # shape computations divide by values that are zero at some probe (Hiera-Det's size ratios); the
        # result is only typed or discarded, so numpy's warnings would only reach the user's terminal
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = _reference_op(node, opsets).run(*[static[i] for i in ins])
    except Exception as e:
        raise GnnperfError(f"cannot evaluate shape computation {node.op_type} '{node.name}': {e}") from None
    return list(out) if isinstance(out, (tuple, list)) else [out]


def inline_static_ifs(
    model: onnx.ModelProto, batch_inputs: dict[str, int], batch_sizes: tuple[int, int]
) -> onnx.ModelProto:
    """Replace every ``If`` whose condition is known before run time by the nodes of the branch it takes.

    Exporters keep Python branches on sizes as ``If`` nodes when the condition is computed from shapes (timm's
    Hiera-Det and SAM2 Hiera: resizing the position embedding only if the input size differs). ONNX's per-node
    inference cannot type an ``If``'s outputs, so everything after it had no shape. The condition must be the
    same at two batch sizes (a branch on the batch size is left alone, and the graph then fails as before). The
    branch's outputs are renamed to the ``If``'s by ``Identity`` nodes; nested ``If`` nodes go one level a round.
    """
    for _ in range(16):
        if not any(n.op_type == "If" for n in model.graph.node):
            return model
        passes = [infer_shapes(model, batch_inputs, b) for b in batch_sizes]
        taken = {}
        for i, node in enumerate(model.graph.node):
            cond = node.input[0] if node.op_type == "If" else None
            if cond and all(cond in p.static for p in passes):
                values = {bool(np.asarray(p.static[cond]).reshape(-1)[0]) for p in passes}
                if len(values) == 1:
                    taken[i] = "then_branch" if values.pop() else "else_branch"
        if not taken:
            return model
        model = copy.deepcopy(model)
        nodes = []
        for i, node in enumerate(model.graph.node):
            if i not in taken:
                nodes.append(node)
                continue
            branch = next(helper.get_attribute_value(a) for a in node.attribute if a.name == taken[i])
            model.graph.initializer.extend(branch.initializer)
            nodes.extend(branch.node)
            for inner, outer in zip(branch.output, node.output):
                identity = helper.make_node("Identity", [inner.name], [outer], name=f"{node.name}/{outer}")
                # the If's module path, which names a dynamo-exported node in the IR (see ir._scoped_name)
                identity.metadata_props.extend(node.metadata_props)
                nodes.append(identity)
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    return model
