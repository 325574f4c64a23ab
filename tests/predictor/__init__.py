"""Synthetic PyG graphs in the issue-4 batch format, with the real feature widths."""

from __future__ import annotations

import torch

from gnnperf.data.aggregate import AGG_FEATURES
from gnnperf.graph.features import EDGE_FEATURES, GRAPH_FEATURES, NODE_FEATURES, OP_VOCAB
from gnnperf.hardware import HARDWARE_FEATURES

F_NODE, F_EDGE, F_GRAPH = len(NODE_FEATURES), len(EDGE_FEATURES), len(GRAPH_FEATURES)
F_HW, F_AGG = len(HARDWARE_FEATURES), len(AGG_FEATURES)
# The node feature the synthetic target depends on.
SIGNAL = [n for n, _ in NODE_FEATURES].index("log_flops")


def make_graph(
    num_nodes: int, seed: int, hw: torch.Tensor | None = None, hw_id: int = 0, y_ms: float | None = None
):
    """A DAG (chain + skip edges) with random features; ``y`` grows with the sum of exp(x[:, SIGNAL])."""
    from torch_geometric.data import Data

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, F_NODE, generator=g)
    x[:, SIGNAL] = torch.rand(num_nodes, generator=g) * 2.0
    src = torch.arange(num_nodes - 1)
    skips = torch.arange(0, num_nodes - 2, 3)
    edge_index = torch.stack([torch.cat([src, skips]), torch.cat([src + 1, skips + 2])])
    y = y_ms if y_ms is not None else 0.5 * float(torch.exp(x[:, SIGNAL]).sum())
    return Data(
        x=x,
        edge_index=edge_index,
        edge_attr=torch.randn(edge_index.shape[1], F_EDGE, generator=g),
        op=torch.randint(0, len(OP_VOCAB), (num_nodes,), generator=g),
        u=torch.randn(1, F_GRAPH, generator=g),
        hw=torch.randn(1, F_HW, generator=g) if hw is None else hw.view(1, -1),
        hw_id=torch.tensor([hw_id]),
        agg=torch.randn(1, F_AGG, generator=g),
        y=torch.tensor([y], dtype=torch.float32),
        batch_size=torch.tensor([8]),
        model_ref=f"zoo:synthetic?seed={seed}",
        family="synthetic",
        hardware="cpu-test",
        sample_id=f"s{seed}",
        num_nodes=num_nodes,
    )


def make_batch(sizes=(7, 12, 5), seed: int = 0):
    from torch_geometric.data import Batch

    return Batch.from_data_list([make_graph(n, seed + i) for i, n in enumerate(sizes)])


def stats_of(graphs) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Per-feature mean/std over ``graphs``, the ``feature_stats`` contract."""
    out = {}
    for key in ("x", "edge_attr", "u", "hw", "agg"):
        v = torch.cat([getattr(g, key) for g in graphs])
        out[key] = (v.mean(0), v.std(0))
    return out
