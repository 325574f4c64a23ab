"""The grouped per-op breakdown: ops repeated across blocks together, and op classes."""

from __future__ import annotations

import pytest

from gnnperf.graph.ir import Node, OpGraph, Param, Value
from gnnperf.predictor.breakdown import by_class, index_ranges, top_groups


@pytest.mark.parametrize(
    ("values", "text"),
    [([0, 1, 2, 3], "[0-3]"), ([2, 1], "[1,2]"), ([7, 1, 3, 5, 6], "[1,3,5-7]"), ([4], "[4]")],
)
def test_index_ranges(values, text):
    assert index_ranges(values) == text


def _graph() -> OpGraph:
    """Three identical blocks (``h.0``-``h.2``) of MatMul + Softmax, and a head whose MatMul is another shape."""
    values = {"x": Value("float32", [1, 0], [0, 8])}
    nodes = []
    prev = "x"
    for i in range(3):
        nodes.append(Node(f"/m/h.{i}/attn/MatMul", "MatMul", [prev], [f"a{i}"], params=[f"w{i}"]))
        nodes.append(Node(f"/m/h.{i}/attn/Softmax", "Softmax", [f"a{i}"], [f"s{i}"], attrs={"axis": -1}))
        values[f"a{i}"] = values[f"s{i}"] = Value("float32", [1, 0], [0, 8])
        prev = f"s{i}"
    nodes.append(Node("/m/head/MatMul", "MatMul", [prev], ["y"], params=["wh"]))
    values["y"] = Value("float32", [1, 0], [0, 4])
    params = {f"w{i}": Param([8, 8], "float32", True) for i in range(3)} | {
        "wh": Param([8, 4], "float32", True)
    }
    return OpGraph("test:blocks", [8], "torchscript", 17, nodes, values, params, ["x"])


def test_ops_at_one_place_in_repeated_blocks_form_one_group():
    graph = _graph()
    ms = [3.0, 1.0, 3.0, 1.0, 2.0, 1.0, 5.0]  # block 2's MatMul is faster; the head has another shape
    groups = top_groups(graph, ms, k=10)
    assert groups == [
        {"op": "MatMul", "name": "/m/h.[0-2]/attn/MatMul", "count": 3, "ms": 8.0, "nodes": [0, 2, 4]},
        {"op": "MatMul", "name": "/m/head/MatMul", "count": 1, "ms": 5.0, "nodes": [6]},
        {"op": "Softmax", "name": "/m/h.[0-2]/attn/Softmax", "count": 3, "ms": 3.0, "nodes": [1, 3, 5]},
    ]
    assert top_groups(graph, ms, k=1) == groups[:1]


def test_ops_of_one_place_that_compute_other_things_stay_apart():
    graph = _graph()
    graph.nodes[2].attrs = {"transB": 1}  # block 1's MatMul now differs from blocks 0 and 2
    names = {g["name"]: g["count"] for g in top_groups(graph, [1.0] * 7, k=10)}
    assert names["/m/h.[0,2]/attn/MatMul"] == 2 and names["/m/h.1/attn/MatMul"] == 1


def test_by_class_sums_every_op():
    graph = _graph()
    rows = by_class(graph, [3.0, 1.0, 3.0, 1.0, 2.0, 1.0, 5.0])
    assert rows == [
        {"class": "matmul", "count": 4, "ms": 13.0},
        {"class": "elementwise", "count": 3, "ms": 3.0},
    ]
