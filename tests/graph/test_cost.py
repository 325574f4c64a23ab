"""Per-op FLOPs against hand-derived formulas."""

import dataclasses

import pytest
import torch
from torch import nn

from gnnperf.errors import GnnperfError
from gnnperf.graph.build import build_graph
from gnnperf.graph.cli import summarize
from gnnperf.graph.cost import graph_costs
from gnnperf.zoo.resolve import ModelSpec


def spec_of(module: nn.Module, shape: tuple[int, ...], name: str) -> ModelSpec:
    return ModelSpec(
        ref=f"test:{name}",
        family="test",
        input_kind="image",
        default_input_shape=shape,
        input_names=("input",),
        builder=lambda _depth: module,
    )


def costs_by_op(module: nn.Module, shape: tuple[int, ...], batch: int, name: str) -> dict:
    graph = build_graph(spec_of(module, shape, name))
    costs, _ = graph_costs(graph, batch)
    out: dict = {}
    for node, c in zip(graph.nodes, costs):
        out.setdefault(node.op_type, []).append(c)
    return out


@pytest.mark.parametrize(
    "cin,cout,k,stride,pad,dil,groups",
    [
        (8, 16, 3, 1, 1, 1, 1),
        (8, 16, 3, 2, 1, 1, 4),
        (8, 8, 3, 1, 2, 2, 8),
        (6, 12, (3, 5), (2, 1), 0, (1, 2), 3),
    ],
)
def test_conv_flops(cin, cout, k, stride, pad, dil, groups):
    conv = nn.Conv2d(cin, cout, k, stride=stride, padding=pad, dilation=dil, groups=groups, bias=True)
    batch, h, w = 5, 17, 19
    with torch.no_grad():
        ho, wo = conv(torch.zeros(1, cin, h, w)).shape[-2:]
    kh, kw = conv.kernel_size
    (c,) = costs_by_op(conv, (cin, h, w), batch, f"conv{cin}{cout}{k}{stride}{pad}{dil}{groups}")["Conv"]
    macs = batch * cout * ho * wo * (cin // groups) * kh * kw
    assert c.mat_flops == 2 * macs
    assert c.flops == 2 * macs + batch * cout * ho * wo  # bias add
    assert c.params == cout * (cin // groups) * kh * kw + cout
    assert c.bytes_written == batch * cout * ho * wo * 4


def test_gemm_flops():
    lin = nn.Linear(24, 10)
    (c,) = costs_by_op(lin, (24,), 7, "gemm")["Gemm"]
    assert c.mat_flops == 2 * 7 * 24 * 10
    assert c.flops == 2 * 7 * 24 * 10 + 7 * 10
    assert c.params == 24 * 10 + 10


class BatchedMatMul(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = x.reshape(x.shape[0], 4, 6, 8)  # (B, heads, L, D)
        return q @ q.transpose(-1, -2)  # (B, heads, L, L)


def test_batched_matmul_flops():
    costs = costs_by_op(BatchedMatMul(), (4 * 6 * 8,), 3, "bmm")
    (c,) = costs["MatMul"]
    assert c.mat_flops == 2 * 3 * 4 * 6 * 8 * 6


def test_linear_on_3d_input_counts_every_position():
    lin = nn.Linear(16, 32, bias=False)
    costs = costs_by_op(lin, (5, 16), 2, "lin3d")
    assert sum(c.mat_flops for c in costs["MatMul"]) == 2 * 2 * 5 * 16 * 32


def test_unknown_op_is_zero_cost_and_reported_once(caplog, monkeypatch):
    monkeypatch.setattr("gnnperf.graph.cost._WARNED_UNKNOWN", set())

    class Odd(nn.Module):
        def forward(self, x):
            return torch.det(x.reshape(x.shape[0], 4, 4))  # ONNX Det: no cost rule

    graph = build_graph(spec_of(Odd(), (16,), "det"))
    with caplog.at_level("WARNING"):
        costs, unknown = graph_costs(graph, 2)
    assert unknown == {"Det": 1}
    det = [c for n, c in zip(graph.nodes, costs) if n.op_type == "Det"][0]
    assert det.flops == 0 and det.bytes_read > 0
    assert "Det" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert graph_costs(graph, 4)[1] == {"Det": 1}  # still counted, not logged again
    assert "Det" not in caplog.text


def test_matmul_with_an_operand_fixed_at_the_probe_batch_uses_the_output_shape():
    from gnnperf.graph.cost import _matmul
    from gnnperf.graph.ir import Node

    node = Node(name="mm", op_type="MatMul", inputs=["a", ""], outputs=["y"])
    # batch 6 data operand against a (2, ...) operand recorded when the graph was probed at batch 2
    mat, flops = _matmul(node, [(6, 4, 8, 16), (2, 4, 16, 32)], [(6, 4, 8, 32)])
    assert mat == flops == 2.0 * 6 * 4 * 8 * 16 * 32


def test_dropout_of_rate_zero_is_folded_away_and_its_consumer_reads_its_input():
    # F.dropout(p=0) returns its input and runs no kernel; p > 0 draws a mask and stays an op
    module = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.0), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 4))
    graph = build_graph(spec_of(module, (16,), "dropout0"))
    ops = [n.op_type for n in graph.nodes]
    assert ops == ["Gemm", "Relu", "Dropout", "Gemm"]
    assert summarize(graph, 2)["folded_ops"] == {"Dropout": 1}  # `gnnperf graph` says what it left out
    assert [(graph.nodes[s].op_type, graph.nodes[d].op_type) for s, d, _ in graph.edges()] == [
        ("Gemm", "Relu"),
        ("Relu", "Dropout"),
        ("Dropout", "Gemm"),
    ]


class _Clone(nn.Module):
    """A clone between two layers, and a cast to the dtype the tensor has (a no-op in fp32, a cast under AMP)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)).clone().type(x.dtype))


def test_identity_is_folded_away_and_a_cast_to_the_dtype_it_has_stays():
    # dynamo writes the clone as an Identity, which TorchScript drops; TorchScript writes the .type() as a Cast,
    # which dynamo drops: kept, since under AMP such a cast runs
    ops = {}
    for exporter in ("torchscript", "dynamo"):
        graph = build_graph(spec_of(_Clone(), (16,), f"clone-{exporter}"), exporter=exporter)
        ops[exporter] = [n.op_type for n in graph.nodes]
        assert "Identity" not in ops[exporter]
        assert graph.meta.get("folded") == ({"Identity": 1} if exporter == "dynamo" else None)
    assert ops == {"torchscript": ["Gemm", "Relu", "Cast", "Gemm"], "dynamo": ["Gemm", "Relu", "Gemm"]}


class Kernels(nn.Module):
    """(B, 10, 16) through a Linear, exact GELU, SiLU, GroupNorm, and GPT-2's explicit tanh GELU."""

    def __init__(self) -> None:
        super().__init__()
        self.lin, self.gn = nn.Linear(16, 32), nn.GroupNorm(4, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.silu(torch.nn.functional.gelu(self.lin(x)))
        y = self.gn(y.transpose(1, 2)).transpose(1, 2)
        return 0.5 * y * (1.0 + torch.tanh(0.79788456 * (y + 0.044715 * torch.pow(y, 3.0))))  # gelu_new


def test_ops_of_one_eager_kernel_read_their_input_and_write_their_output_once():
    from gnnperf.graph.kernels import fused_groups

    graph = build_graph(spec_of(Kernels(), (10, 16), "kernels"))
    groups = [[graph.nodes[i].op_type for i in g] for g in fused_groups(graph)]
    assert groups == [
        ["MatMul", "Add"],
        ["Div", "Erf", "Add", "Mul", "Mul"],
        ["Sigmoid", "Mul"],
        ["InstanceNormalization", "Reshape", "Mul", "Add"],
    ]  # the explicit formula with its Pow is PyTorch's op by op, as exported
    batch = 3
    costs, _ = graph_costs(graph, batch)
    act = batch * 10 * 32 * 4  # bytes of one (B, 10, 32) fp32 tensor
    for group in fused_groups(graph)[1:3]:  # GELU, SiLU: one read, one write
        assert sum(costs[i].bytes_read for i in group) == act
        assert sum(costs[i].bytes_written for i in group) == act
    bias = [costs[i] for i in fused_groups(graph)[0]]
    assert bias[0].bytes_written == 0 and bias[1].bytes_read == 32 * 4 and bias[1].bytes_written == act


def test_views_move_no_bytes_and_a_reshape_after_a_transpose_copies_once():
    costs = costs_by_op(BatchedMatMul(), (4 * 6 * 8,), 3, "bmm")  # reshape of the input, then a transpose
    assert all(c.bytes_read == c.bytes_written == 0 for c in costs["Reshape"])
    (t,) = costs["Transpose"]
    assert t.bytes_written == 3 * 4 * 6 * 8 * 4


class Einsum3(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 8, 8)
        return torch.einsum("bij,bjk,bkl->bil", x, x, x)


class EinsumBroadcast(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 8, 8) and a (B, 1) operand: i broadcasts
        return torch.einsum("bij,bi->bj", x, x[:, :1, 0])


def test_einsum_contracts_pairwise_and_takes_broadcast_sizes_from_the_larger_operand():
    from torch.utils.flop_counter import FlopCounterMode

    batch = 2
    with FlopCounterMode(display=False) as counter:
        Einsum3()(torch.randn(batch, 8, 8))
    (three,) = costs_by_op(Einsum3(), (8, 8), batch, "einsum3")["Einsum"]
    assert three.mat_flops == counter.get_total_flops() == 2 * (2 * batch * 8**3)  # left to right, two bmm
    (bcast,) = costs_by_op(EinsumBroadcast(), (8, 8), batch, "einsum_bcast")["Einsum"]
    assert bcast.mat_flops == 2 * batch * 8 * 8


class Views(nn.Module):
    """Token ids (B, 10) through an embedding; a MatMul with a (10, 10) score bias; a slice, a select, an expand."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.cls = nn.Embedding(1000, 16), nn.Parameter(torch.zeros(1, 1, 16))
        self.score_bias = nn.Parameter(torch.zeros(10, 10))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        scores = x @ x.transpose(1, 2) + self.score_bias
        y = torch.cat([self.cls.expand(x.shape[0], -1, -1), scores.softmax(-1) @ x], dim=1)
        return y[:, 1:].sum(1) + y[:, 0] + x.amax(1, keepdim=True).expand(-1, 4, -1).sum(1)


def test_slices_expands_and_selects_are_views_and_a_gather_reads_the_rows_it_picks():
    spec = dataclasses.replace(spec_of(Views(), (10,), "views"), input_kind="tokens", vocab_size=1000)
    graph = build_graph(spec)
    batch = 3
    costs, _ = graph_costs(graph, batch)
    by_op: dict = {}
    for node, c in zip(graph.nodes, costs):
        by_op.setdefault(node.op_type, []).append(c)
    for op in ("Slice", "Expand"):
        assert by_op[op] and all(c.bytes_read == c.bytes_written == 0 for c in by_op[op]), op
    select, lookup = sorted(by_op["Gather"], key=lambda c: c.bytes_written)
    assert select.bytes_read == select.bytes_written == 0  # y[:, 0]
    rows = batch * 10 * 16 * 4
    assert (
        lookup.bytes_written == rows and lookup.bytes_read == rows + batch * 10 * 8
    )  # not the 1000-row table
    # the (10, 10) parameter after q @ k^T is no Linear bias: its Add reads the scores, the MatMul writes them
    from gnnperf.graph.kernels import fused_groups

    assert not [g for g in fused_groups(graph) if graph.nodes[g[0]].op_type == "MatMul"]
    scores = batch * 10 * 10 * 4
    (add,) = [c for n, c in zip(graph.nodes, costs) if n.op_type == "Add" and n.params]
    assert add.bytes_read == scores + 10 * 10 * 4 and add.bytes_written == scores


class SiluViews(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 8, 8): a SiLU, then a flatten (a view)
        return nn.functional.silu(x).flatten(1)


def test_ablation_switches_off_the_eager_kernel_rules_and_is_checked(monkeypatch):
    from gnnperf.graph.cost import ABLATE_VAR

    graph = build_graph(spec_of(SiluViews(), (8, 8), "silu_views"))
    tensor = 2 * 8 * 8 * 4

    def bytes_by_op() -> dict:
        costs, _ = graph_costs(graph, 2)
        return {n.op_type: (c.bytes_read, c.bytes_written) for n, c in zip(graph.nodes, costs)}

    normal = bytes_by_op()  # SiLU one pass (Sigmoid reads, Mul writes); the flatten a view
    assert normal["Sigmoid"] == (tensor, 0) and normal["Mul"] == (0, tensor)
    assert normal[next(op for op in normal if op in ("Flatten", "Reshape"))] == (0, 0)
    monkeypatch.setenv(ABLATE_VAR, "fusion,views")
    ablated = bytes_by_op()
    assert ablated["Sigmoid"] == (tensor, tensor) and ablated["Mul"] == (2 * tensor, tensor)
    assert ablated[next(op for op in ablated if op in ("Flatten", "Reshape"))] == (tensor, tensor)
    monkeypatch.setenv(ABLATE_VAR, "views,bias")
    with pytest.raises(GnnperfError, match=f"{ABLATE_VAR}: unknown \\['bias'\\]"):
        bytes_by_op()
