"""Static SplitToSequence/SequenceAt patterns (dynamo's torch.split) become Split, so the IR can type them."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from gnnperf.graph.ir import build_ir


def _split_model(split: list[int], indices: list[int], out_dims: list | None = None) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("SplitToSequence", ["r", "sizes"], ["seq"], axis=1),
    ]
    outs = []
    for j, k in enumerate(indices):
        nodes.append(helper.make_node("Constant", [], [f"i{j}"], value=numpy_helper.from_array(np.array(k))))
        nodes.append(helper.make_node("SequenceAt", ["seq", f"i{j}"], [f"item{j}"]))
        outs.append(f"item{j}")
    nodes.append(helper.make_node("Concat", outs, ["y"], axis=1))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 10, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_dims)],
        [numpy_helper.from_array(np.array(split, dtype=np.int64), "sizes")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_static_split_sequence_becomes_split_with_typed_items():
    graph = build_ir(_split_model([2, 3, 5], [2, 0, -3]), "m", (10, 4), "dynamo", ["x"])
    ops = [n.op_type for n in graph.nodes]
    assert "SplitToSequence" not in ops and "SequenceAt" not in ops
    split = next(n for n in graph.nodes if n.op_type == "Split")
    # items 2 and 0 are read by the concat; index -3 is item 0 again, lowered to an Identity the IR folds away
    assert [graph.values[o].shape(4) for o in split.outputs] == [(4, 2, 4), (4, 3, 4), (4, 5, 4)]
    assert "Identity" not in ops
    assert graph.values["y"].shape(4) == (4, 9, 4)
    concat = next(n for n in graph.nodes if n.op_type == "Concat")
    assert concat.inputs == [split.outputs[2], split.outputs[0], split.outputs[0]]


def test_scalar_chunk_size_is_expanded_from_the_recorded_axis_length():
    """``torch.split(x, 4, dim=1)`` on 10 channels: chunks 4, 4, 2 (dynamo types the split input)."""
    size = numpy_helper.from_array(np.array(4, dtype=np.int64))
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Constant", [], ["size"], value=size),
        helper.make_node("SplitToSequence", ["r", "size"], ["seq"], axis=1),
        helper.make_node("Constant", [], ["i0"], value=numpy_helper.from_array(np.array(2))),
        helper.make_node("SequenceAt", ["seq", "i0"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 10, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        value_info=[helper.make_tensor_value_info("r", TensorProto.FLOAT, ["batch", 10, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    ir = build_ir(model, "m", (10, 4), "dynamo", ["x"])
    split = next(n for n in ir.nodes if n.op_type == "Split")
    assert [ir.values[o].shape(3) for o in split.outputs] == [(3, 4, 4), (3, 4, 4), (3, 2, 4)]
    assert ir.values["y"].shape(3) == (3, 2, 4) and not ir.params


def test_lowered_model_is_valid_onnx_after_lowering():
    from gnnperf.graph.sequences import lower_split_sequences

    model = lower_split_sequences(_split_model([4, 6], [1, 0], ["batch", 10, 4]))
    onnx.checker.check_model(model, full_check=True)
