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
