"""Real timm/torchvision models: matrix FLOPs against torch's FlopCounterMode, substitution, data-flow edges."""

import contextlib
import logging
import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from gnnperf.graph.build import build_graph
from gnnperf.graph.cost import graph_costs
from gnnperf.graph.features import NODE_FEATURES, to_data
from gnnperf.measure.workload import Workload
from gnnperf.zoo.resolve import resolve

MODELS = [
    "timm:resnet50",
    "timm:vit_base_patch16_224",
    "timm:mobilenetv3_large_100",
    "timm:convnext_tiny",
    "timm:efficientnet_b0",
    "timm:swin_tiny_patch4_window7_224",
    "timm:regnety_008",
    "timm:deit_tiny_patch16_224",
    "timm:hieradet_small",  # its export resizes the position embedding inside an If on sizes (shapes.py)
    "torchvision:resnet18",
    "torchvision:densenet121",
    "torchvision:mobilenet_v2",
    "torchvision:vgg11_bn",
    "torchvision:r3d_18",  # 3-D convolutions on a 16-frame clip
    pytest.param("torchvision:mvit_v1_b", marks=pytest.mark.slow),  # built from the dynamo export (build.py)
]


@pytest.mark.parametrize("ref", MODELS)
def test_matrix_flops_match_flop_counter(ref, graph_cache):
    spec = resolve(ref)
    graph = build_graph(spec, cache=graph_cache)
    costs, unknown = graph_costs(graph, 2)
    ours = sum(c.mat_flops for c in costs)
    model = spec.build().train()
    # The math backend decomposes attention into the matmuls FlopCounterMode counts (it skips fused CPU kernels).
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(*spec.make_inputs(2))
    assert ours == pytest.approx(counter.get_total_flops(), rel=0.02)
    assert not unknown


def test_resnet50_total_flops_per_sample(graph_cache):
    costs, _ = graph_costs(build_graph("timm:resnet50", cache=graph_cache), 4)
    per_sample = sum(c.flops for c in costs) / 4
    assert 8.2e9 <= per_sample <= 8.4e9  # 8.18 GFLOPs of convolutions + BN, ReLU, adds


@pytest.mark.parametrize("ref", ["torchvision:resnet18", "timm:deit_tiny_patch16_224"])
def test_substituted_batch_equals_fresh_export(ref, graph_cache):
    workload = Workload(batch_size=8)
    substituted = to_data(build_graph(ref, cache=graph_cache), workload)
    fresh = to_data(build_graph(ref, cache=None, export_batch=8), workload)
    for key in ("x", "edge_index", "edge_attr", "u", "op"):
        assert torch.equal(substituted[key], fresh[key]), key


def producers(graph, node):
    out_of = {o: n for n in graph.nodes for o in n.outputs}
    return [out_of[v] for v in node.inputs if v in out_of]


def test_residual_add_has_two_producers(graph_cache):
    graph = build_graph("tests.graph.factories:residual", (8, 6, 6), cache=graph_cache)
    add = next(n for n in graph.nodes if n.op_type == "Add")
    assert len(add.inputs) == 2 and add.inputs[0] == graph.inputs[0]  # the skip comes straight from the input
    assert [p.op_type for p in producers(graph, add)] == ["Conv"]
    edges = {(graph.nodes[s].op_type, graph.nodes[d].op_type) for s, d, _ in graph.edges()}
    assert ("Conv", "BatchNormalization") in edges and ("BatchNormalization", "Relu") in edges
    # execution order is not an edge: the first conv does not feed the second directly
    first_conv, second_conv = [i for i, n in enumerate(graph.nodes) if n.op_type == "Conv"]
    assert (first_conv, second_conv) not in {(s, d) for s, d, _ in graph.edges()}


def test_attention_edges_follow_data_flow(graph_cache):
    graph = build_graph("timm:deit_tiny_patch16_224", cache=graph_cache)
    softmax = next(n for n in graph.nodes if n.op_type == "Softmax" and "blocks.0/" in n.name)
    consumers = [n for n in graph.nodes if softmax.outputs[0] in n.inputs]
    # scores -> softmax -> dropout -> (attn @ v)
    chain = consumers[0]
    while chain.op_type != "MatMul":
        chain = next(n for n in graph.nodes if chain.outputs[0] in n.inputs)
    srcs = producers(graph, chain)
    assert len(srcs) == 2 and srcs[0].op_type in ("Dropout", "Softmax")
    # the score matmul q @ k^T: both operands come from the qkv projection, not from softmax
    score_src = producers(graph, softmax)[0]
    while score_src.op_type != "MatMul":
        score_src = producers(graph, score_src)[0]
    assert len([v for v in score_src.inputs if v]) == 2
    ancestors = set()
    frontier = [score_src]
    while frontier:
        n = frontier.pop()
        for p in producers(graph, n):
            if p.name not in ancestors:
                ancestors.add(p.name)
                frontier.append(p)
    assert any(name.endswith("qkv/MatMul") for name in ancestors)


@pytest.mark.parametrize(
    "ref",
    [
        "torchvision:resnet18",
        "timm:regnety_002",
        "timm:swin_tiny_patch4_window7_224",
        "timm:vit_tiny_patch16_224",
    ],
)
def test_lean_export_is_identical(ref, monkeypatch, caplog):
    """Export traces without autograd, with shape-only convolutions and linear layers, and skips the exporter's
    whole-graph typing; the graph must not change."""
    from gnnperf.graph import export

    spec = resolve(ref)
    with caplog.at_level(logging.DEBUG, logger="gnnperf.graph.export"):
        fast = build_graph(spec, cache=None).to_dict()
    assert "fast TorchScript export failed" not in caplog.text  # the lean path itself produced the graph
    monkeypatch.setattr(export, "_lean_export", contextlib.nullcontext)
    shipped = build_graph(spec, cache=None).to_dict()
    assert fast == shipped


def test_grouped_convolution_features(graph_cache):
    from gnnperf.data.aggregate import AGG_FEATURES, aggregate_features

    graph = build_graph("tests.graph.factories:grouped_convs", (3, 8, 8), cache=graph_cache)
    data = to_data(graph, Workload(batch_size=2))
    col = {name: k for k, (name, _) in enumerate(NODE_FEATURES)}
    convs = [i for i, n in enumerate(graph.nodes) if n.op_type == "Conv"]
    assert len(convs) == 3
    rows = data.x[convs]
    assert rows[:, col["grouped"]].tolist() == [0.0, 1.0, 0.0]
    assert rows[:, col["depthwise"]].tolist() == [0.0, 0.0, 1.0]
    expected = [math.log1p(3), math.log1p(4), math.log1p(1)]  # input channels per group
    assert rows[:, col["log_channels_per_group"]].tolist() == pytest.approx(expected)
    costs, _ = graph_costs(graph, 2)
    share = costs[convs[1]].flops / sum(c.flops for c in costs)
    for layout, interaction in (("contiguous", 0.0), ("channels_last", share)):
        agg = aggregate_features(graph, Workload(batch_size=2, memory_format=layout))
        assert agg[AGG_FEATURES.index("flops_share=grouped_conv")] == pytest.approx(share)
        assert agg[AGG_FEATURES.index("grouped_conv_x_channels_last")] == pytest.approx(interaction)


def test_misaligned_matrix_widths(graph_cache):
    graph = build_graph("tests.graph.factories:misaligned_matrices", (8, 8, 8), cache=graph_cache)
    matrix = [i for i, n in enumerate(graph.nodes) if n.op_type in ("Conv", "Gemm", "MatMul")]
    data = to_data(graph, Workload(batch_size=3))
    column = data.x[:, [name for name, _ in NODE_FEATURES].index("misaligned8")]
    assert column[matrix].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert column.sum().item() == 2.0  # no other op is flagged


@pytest.mark.parametrize("batch", [2, 6])
def test_einsum_flops_count_the_ellipsis_dims(batch):
    spec = resolve("tests.graph.factories:einsums")
    costs, _ = graph_costs(build_graph(spec, (5, 7, 16)), batch)
    with FlopCounterMode(display=False) as counter:
        spec.build()(torch.randn(batch, 5, 7, 16))
    assert sum(c.mat_flops for c in costs) == counter.get_total_flops() == 3 * 2 * batch * 5 * 7 * 16 * 24


def _torchvision_models() -> list[str]:
    from torchvision.models import list_models

    return list_models()


@pytest.mark.slow
@pytest.mark.parametrize("name", _torchvision_models())
def test_every_torchvision_model_builds_a_graph_or_is_refused_by_name(name, graph_cache):
    from gnnperf.errors import GnnperfError
    from gnnperf.zoo.tv import UNSUPPORTED_TORCHVISION_TASKS

    try:
        spec = resolve(f"torchvision:{name}")
    except GnnperfError as e:
        assert any(why in str(e) for why in UNSUPPORTED_TORCHVISION_TASKS.values())
        return
    graph = build_graph(spec, cache=graph_cache)
    assert graph.param_count() > 0 and sum(c.mat_flops for c in graph_costs(graph, 1)[0]) > 0


def test_a_vit_built_for_another_size_is_the_graph_of_the_vit_defined_at_that_size(graph_cache):
    at_384 = build_graph("timm:vit_tiny_patch16_224", (3, 384, 384), cache=graph_cache)
    native = build_graph("timm:vit_tiny_patch16_384", cache=graph_cache)
    assert at_384.param_count() == native.param_count()  # the position table has 24 x 24 + 1 rows in both
    ours, theirs = graph_costs(at_384, 2)[0], graph_costs(native, 2)[0]
    assert [c.flops for c in ours] == [c.flops for c in theirs]
