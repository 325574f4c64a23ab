"""The op graph: ONNX ops as nodes, data flow as edges, shapes affine in the batch size.

Only ops that touch data derived from a model input become nodes. Shape computations (``Shape`` and what is
fed only by it), ``Constant`` nodes and weight-only preprocessing (a ``Transpose`` of a weight) are folded away:
PyTorch runs none of them as kernels on the data. Parameters and buffers are attributes of the node that
consumes them, never nodes.

Every value's shape is stored as two integer vectors ``(coef, const)``, so that at batch ``B`` dim ``i`` is
``coef[i] * B + const[i]``. They come from concrete inference at two batch sizes (see :mod:`.shapes`); a third
size checks that the dims are affine. Specialising to a batch size is then a substitution, not a re-export.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from gnnperf.errors import GnnperfError
from gnnperf.graph.sequences import lower_split_sequences
from gnnperf.graph.shapes import infer_shapes, inline_static_ifs

# Bump when what an OpGraph holds changes meaning: the graph cache is keyed by it. Features are computed from the
# IR when a graph is loaded, so a FEATURE_VERSION change alone re-exports nothing.
# 2: Dropout with a static ratio of 0 is folded away (PyTorch runs no kernel for it); 3: so is Identity (see
# _is_noop)
IR_VERSION = 3
PROBE_BATCHES = (2, 3, 5)  # two to solve for (coef, const), the third to check
BUFFER_HINTS = ("running_mean", "running_var", "num_batches_tracked")

DTYPE_NAMES = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.BFLOAT16: "bfloat16",
    onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.UINT8: "uint8",
    onnx.TensorProto.BOOL: "bool",
}
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4, "int8": 1}
DTYPE_BYTES.update({"uint8": 1, "bool": 1})


@dataclass
class Value:
    """A data tensor: dtype and affine shape ``coef * B + const``."""

    dtype: str
    coef: list[int]
    const: list[int]

    def shape(self, batch_size: int) -> tuple[int, ...]:
        return tuple(a * batch_size + c for a, c in zip(self.coef, self.const))

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES.get(self.dtype, 4)


@dataclass
class Node:
    """One ONNX op on data.

    Attributes:
        inputs: data inputs in ONNX order (value names); ``''`` where the slot holds a parameter or a
            shape-computation constant.
        params: parameter/buffer names this op consumes (through weight-only preprocessing too).
        attrs: scalar and list attributes of the ONNX node.
        fixed_shapes: per input slot, the batch-independent shape of a non-data input (a weight as the op
            sees it, after any transpose), ``None`` for data slots and empty slots.
    """

    name: str
    op_type: str
    inputs: list[str]
    outputs: list[str]
    params: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    fixed_shapes: list[list[int] | None] = field(default_factory=list)


@dataclass
class Param:
    shape: list[int]
    dtype: str
    trainable: bool


@dataclass
class OpGraph:
    """The attributed computation graph of one model at one per-sample input shape (batch symbolic)."""

    model_ref: str
    input_shape: list[int]
    exporter: str
    opset: int
    nodes: list[Node]
    values: dict[str, Value]
    params: dict[str, Param]
    inputs: list[str]
    meta: dict[str, Any] = field(default_factory=dict)

    def edges(self) -> list[tuple[int, int, str]]:
        """(producer index, consumer index, value name) for every data-flow edge, in node order."""
        producer = {o: i for i, n in enumerate(self.nodes) for o in n.outputs}
        return [(producer[v], j, v) for j, n in enumerate(self.nodes) for v in n.inputs if v in producer]

    def param_count(self, trainable_only: bool = True) -> int:
        used = {p for n in self.nodes for p in n.params}
        return int(
            sum(
                math.prod(self.params[p].shape)
                for p in used
                if self.params[p].trainable or not trainable_only
            )
        )

    def structure_digest(self) -> str:
        """A digest of the network without its names: two references with the same digest get the same features.

        It covers the input shape, every node's op type, attributes, input wiring (producer and output slot, or
        graph input), output dtypes and shapes, parameter shapes and the shapes of its fixed inputs; not the
        reference, node, value or parameter names, nor ``meta``. A deprecated timm alias and its model
        (``ssl_resnet50``, ``resnet50``), a DeiT and the ViT it is, timm's and torchvision's ResNet-50 export
        the same network under other names: splits keep such references together (:mod:`gnnperf.data.splits`).
        """
        slot = {v: ["in", k] for k, v in enumerate(self.inputs)}
        slot.update({o: [i, k] for i, n in enumerate(self.nodes) for k, o in enumerate(n.outputs)})

        def value(v: str) -> list[Any]:
            val = self.values[v]
            return [val.dtype, val.coef, val.const]

        rows: list[Any] = [self.input_shape, [value(v) for v in self.inputs]]
        for n in self.nodes:
            params = [
                [self.params[p].shape, self.params[p].dtype, self.params[p].trainable] for p in n.params
            ]
            wiring = [slot.get(v) if v else None for v in n.inputs]
            rows.append([n.op_type, n.attrs, wiring, [value(o) for o in n.outputs], params, n.fixed_shapes])
        text = json.dumps(rows, sort_keys=True, separators=(",", ":"), default=repr)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OpGraph:
        return cls(
            model_ref=d["model_ref"],
            input_shape=list(d["input_shape"]),
            exporter=d["exporter"],
            opset=int(d["opset"]),
            nodes=[Node(**n) for n in d["nodes"]],
            values={k: Value(**v) for k, v in d["values"].items()},
            params={k: Param(**p) for k, p in d["params"].items()},
            inputs=list(d["inputs"]),
            meta=dict(d.get("meta", {})),
        )


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode(errors="replace")
        if isinstance(v, (int, float, str)) or (
            isinstance(v, list) and all(isinstance(x, (int, float)) for x in v)
        ):
            out[a.name] = list(v) if isinstance(v, list) else v
    return out


def _scoped_name(node: onnx.NodeProto, per_scope: dict[tuple[str, str], int]) -> str | None:
    """A dynamo-exported node's name from the module that ran it: ``/m.model.layers.3.attn/MatMul_1``.

    TorchScript names nodes by module path already (``/m/model/layers.3/attn/MatMul_1``); dynamo numbers them
    through the whole graph (``node_MatMul_45``) and keeps the path in its ``name_scopes`` metadata (module
    paths, then the FX node). Counting ops per module makes block 1's k-th MatMul the twin of block 0's, which
    :mod:`.repeat` relies on. ``None`` for nodes without that metadata.
    """
    scopes = next((p.value for p in node.metadata_props if p.key == "pkg.torch.onnx.name_scopes"), None)
    if scopes is None:
        return None
    try:
        path = ast.literal_eval(scopes)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(path, list) or len(path) < 2:
        return None
    scope = str(path[-2])
    k = per_scope.get((scope, node.op_type), 0)
    per_scope[(scope, node.op_type)] = k + 1
    return f"/{scope}/{node.op_type}_{k}"


def _is_noop(node: onnx.NodeProto, static: dict[str, np.ndarray]) -> bool:
    """A node folded away, its consumers reading its first input.

    - A Dropout whose ratio is a constant 0: ``F.dropout`` returns its input then, in training too, and runs no
      kernel. timm builds its dropout layers with the default rate 0 (a ViT-B has 38 of them); priced as work they
      were an eighth of a ConvNeXt-T's bytes. Its mask output is never consumed by the forward.
    - Identity: the dynamo exporter writes one for each ``aten.clone`` (torchvision's MViTv2-S: 98 on its data
      path), among them the clones functionalisation adds for in-place ops; the TorchScript exporter removes every
      Identity, and nearly all the graphs the predictors learned from are its. Folding them prices a model alike
      from either exporter; a genuine clone's copy is left to the learned overheads, as it is in those graphs.

    A Cast to the dtype its input has in the fp32 export stays: ``.float()`` is no kernel in fp32 but a real cast
    under AMP, and the graph serves every precision.
    """
    if node.op_type == "Identity":
        return True
    if node.op_type != "Dropout" or len(node.input) < 2 or node.input[1] not in static:
        return False
    return float(np.asarray(static[node.input[1]]).reshape(-1)[0]) == 0.0


def build_ir(
    model: onnx.ModelProto,
    model_ref: str,
    input_shape: tuple[int, ...],
    exporter: str,
    model_inputs: list[str],
    trainable: set[str] | None = None,
) -> OpGraph:
    """Turn an exported ONNX model into an OpGraph.

    Args:
        model_inputs: graph inputs fed by the model's data (batch = dim 0); every other graph input and every
            initializer is a parameter or buffer.
        trainable: names of trainable parameters; other parameter inputs count as buffers. ``None`` guesses
            from the names (``running_mean``/``running_var``/``num_batches_tracked`` are buffers).
    """
    if not model_inputs:
        raise GnnperfError(f"{model_ref}: the ONNX graph has no model input")
    model = inline_static_ifs(model, dict.fromkeys(model_inputs, 0), PROBE_BATCHES[:2])
    graph = lower_split_sequences(model).graph
    init_names = {i.name for i in graph.initializer}
    passes = [infer_shapes(model, dict.fromkeys(model_inputs, 0), b) for b in PROBE_BATCHES]
    base = passes[0]

    param_names = {vi.name for vi in graph.input if vi.name not in model_inputs} | init_names
    params = {}
    for name in param_names:
        shape = base.shape(name)
        if shape is None:
            raise GnnperfError(f"{model_ref}: parameter '{name}' has no static shape")
        dtype = DTYPE_NAMES.get(base.dtype(name), "float32")
        # only floating tensors take gradients (an ONNX file's int64 shape constants are initializers too)
        is_trainable = dtype in FLOAT_DTYPES and (
            name in trainable if trainable is not None else not any(b in name for b in BUFFER_HINTS)
        )
        params[name] = Param(list(shape), dtype, is_trainable)

    data = set(model_inputs)  # values derived from a model input
    origin: dict[str, set[str]] = {p: {p} for p in param_names}  # param-derived value -> its parameters
    same_as: dict[str, str] = {}  # output of a folded no-op -> the value it passes on
    folded: Counter[str] = Counter()
    nodes: list[Node] = []
    per_scope: dict[tuple[str, str], int] = {}
    for node in graph.node:
        ins = [same_as.get(i, i) for i in node.input]
        if ins and ins[0] in data and _is_noop(node, base.static):
            same_as[node.output[0]] = ins[0]
            folded[node.op_type] += 1
            continue
        if any(i in data for i in ins if i) and node.op_type not in ("Shape", "Size"):
            nodes.append(
                Node(
                    name=_scoped_name(node, per_scope) or node.name or f"{node.op_type}_{len(nodes)}",
                    op_type=node.op_type,
                    inputs=[i if i in data else "" for i in ins],
                    outputs=[o for o in node.output if o],
                    params=sorted(set().union(*(origin.get(i, set()) for i in ins if i))),
                    attrs=_attrs(node),
                    fixed_shapes=[None if (not i or i in data) else list(base.shape(i) or []) for i in ins],
                )
            )
            data.update(o for o in node.output if o)
        else:
            src = set().union(*(origin.get(i, set()) for i in ins if i)) if ins else set()
            if src and node.output[0] not in base.static:
                for o in node.output:
                    origin[o] = src

    values = {}
    for name in data:
        shapes = [p.shape(name) for p in passes]
        if any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1:
            raise GnnperfError(f"{model_ref}: no static shape for value '{name}'")
        (b0, b1, b2), (s0, s1, s2) = PROBE_BATCHES, shapes
        coef = [(d1 - d0) // (b1 - b0) for d0, d1 in zip(s0, s1)]
        const = [d0 - a * b0 for d0, a in zip(s0, coef)]
        if any(a * b2 + c != d2 for a, c, d2 in zip(coef, const, s2)):
            raise GnnperfError(f"{model_ref}: shape of '{name}' is not affine in the batch size: {shapes}")
        values[name] = Value(DTYPE_NAMES.get(base.dtype(name), "other"), coef, const)
    return OpGraph(
        model_ref=model_ref,
        input_shape=list(input_shape),
        exporter=exporter,
        opset=next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0),
        nodes=nodes,
        values=values,
        params=params,
        inputs=model_inputs,
        meta={"folded": dict(sorted(folded.items()))} if folded else {},
    )
