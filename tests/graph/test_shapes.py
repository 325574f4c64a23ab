"""Concrete shape inference (gnnperf/graph/shapes.py): what is evaluated, what is kept, what falls back."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import gnnperf.graph.shapes as shapes


def _relu_model_with(nodes: list) -> onnx.ModelProto:
    """``nodes`` (which must compute ``y = Relu(x)``) as a model with input x [batch, 6]."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_shape_computation_the_reference_kernels_fail_on_is_typed_by_inference(monkeypatch):
    real = shapes._reference_op

    class Failing:
        def run(self, *args):
            raise RuntimeError("no reference kernel")

    monkeypatch.setattr(shapes, "_reference_op", lambda n, o: Failing() if n.op_type == "Neg" else real(n, o))
    nodes = [
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.zeros((1, 6), np.int64))),
        helper.make_node("Neg", ["c"], ["n"]),  # all-static input: evaluated, which fails here
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    inferred = shapes.infer_shapes(_relu_model_with(nodes), {"x": 0}, 3)
    assert inferred.shape("n") == (1, 6) and "n" not in inferred.static


def test_large_shape_computation_values_are_typed_but_not_kept():
    width = shapes.MAX_STATIC_NUMEL + 1
    nodes = [
        helper.make_node("Shape", ["x"], ["b"], start=0, end=1),
        helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(np.array([width], np.int64))),
        helper.make_node("Concat", ["b", "w"], ["shp"], axis=0),
        helper.make_node("ConstantOfShape", ["shp"], ["big"]),  # batch-dependent, like MViTv2's index tensors
        helper.make_node("Shape", ["big"], ["big_shape"]),
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    inferred = shapes.infer_shapes(_relu_model_with(nodes), {"x": 0}, 3)
    assert inferred.shape("big") == (3, width) and "big" not in inferred.static
    assert inferred.static["big_shape"].tolist() == [3, width]  # shapes computed from it still are


def test_the_shape_of_a_tensor_with_an_unknown_dim_is_not_a_zero():
    count = shapes.MAX_STATIC_NUMEL + 1  # NonZero's output length is unknown until run time
    nodes = [
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones(count, np.float32))),
        helper.make_node("NonZero", ["c"], ["nz"]),
        helper.make_node("Shape", ["nz"], ["nz_shape"]),
        helper.make_node("ConstantOfShape", ["nz_shape"], ["filled"]),
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    inferred = shapes.infer_shapes(_relu_model_with(nodes), {"x": 0}, 3)
    assert "nz_shape" not in inferred.static  # was [1, 0]: the unknown dim read as 0
    assert inferred.shape("filled") is None or 0 not in inferred.shape("filled")


def _branch_on_dim(dim: int) -> onnx.ModelProto:
    """y = Relu(x) if x.shape[dim] > 2 else Neg(x), the branch an ``If`` node whose condition comes from shapes."""

    def branch(op: str, name: str) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None)
        return helper.make_graph([helper.make_node(op, ["x"], [f"{name}_out"])], name, [], [out])

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["i"], value=numpy_helper.from_array(np.array(dim, np.int64))),
        helper.make_node("Gather", ["s", "i"], ["d"]),
        helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2, np.int64))),
        helper.make_node("Greater", ["d", "two"], ["cond"]),
        helper.make_node(
            "If", ["cond"], ["y"], then_branch=branch("Relu", "then"), else_branch=branch("Neg", "else")
        ),
    ]
    return _relu_model_with(nodes)


def test_an_if_on_a_static_size_is_replaced_by_the_branch_it_takes():
    model = _branch_on_dim(1)  # 6 > 2 at every batch size
    assert shapes.infer_shapes(model, {"x": 0}, 3).shape("y") is None  # ONNX cannot type an If's outputs
    inlined = shapes.inline_static_ifs(model, {"x": 0}, (2, 3))
    assert [n.op_type for n in inlined.graph.node][-2:] == ["Relu", "Identity"]
    assert shapes.infer_shapes(inlined, {"x": 0}, 3).shape("y") == (3, 6)
    onnx.checker.check_model(inlined)
    assert any(n.op_type == "If" for n in model.graph.node)  # the input model is left as it was


def test_an_if_on_the_batch_size_is_left_alone():
    model = _branch_on_dim(0)  # batch 2: else, batch 3: then
    assert shapes.inline_static_ifs(model, {"x": 0}, (2, 3)) is model
