"""Forward latency of the default PerfGNN on one synthetic 1,000-node op graph, per backbone, at 1 and 2 threads.

Usage: .venv/bin/python experiments/gnn_forward_speed/run.py [--repeats 50] [--warmup 5]
Writes results.json next to this file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from torch_geometric.data import Batch, Data

from gnnperf.data.aggregate import AGG_FEATURES
from gnnperf.graph.features import EDGE_FEATURES, GRAPH_FEATURES, NODE_FEATURES, OP_VOCAB
from gnnperf.hardware import HARDWARE_FEATURES
from gnnperf.predictor.backbones import BACKBONES
from gnnperf.predictor.model import PerfGNN

NUM_NODES = 1000
SKIP_EVERY = 10  # a skip edge i -> i+2 every 10 nodes: 999 chain + 100 skip edges, like a ResNet's residuals


def synthetic_graph(seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    chain = torch.arange(NUM_NODES - 1)
    skips = torch.arange(0, NUM_NODES - 2, SKIP_EVERY)
    edge_index = torch.stack([torch.cat([chain, skips]), torch.cat([chain + 1, skips + 2])])
    data = Data(
        x=torch.randn(NUM_NODES, len(NODE_FEATURES), generator=g),
        edge_index=edge_index,
        edge_attr=torch.randn(edge_index.shape[1], len(EDGE_FEATURES), generator=g),
        op=torch.randint(0, len(OP_VOCAB), (NUM_NODES,), generator=g),
        u=torch.randn(1, len(GRAPH_FEATURES), generator=g),
        hw=torch.randn(1, len(HARDWARE_FEATURES), generator=g),
        agg=torch.randn(1, len(AGG_FEATURES), generator=g),
        num_nodes=NUM_NODES,
    )
    return Batch.from_data_list([data])


def time_forward_ms(
    model: PerfGNN, batch: Batch, threads: int, warmup: int, repeats: int
) -> dict[str, float]:
    torch.set_num_threads(threads)
    with torch.no_grad():
        for _ in range(warmup):
            model(batch)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            model(batch)
            times.append((time.perf_counter() - start) * 1e3)
    q = statistics.quantiles(times, n=10)
    return {"median_ms": statistics.median(times), "p10_ms": q[0], "p90_ms": q[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    batch = synthetic_graph()
    dims = {
        "node_dim": len(NODE_FEATURES),
        "edge_dim": len(EDGE_FEATURES),
        "graph_dim": len(GRAPH_FEATURES),
        "hw_dim": len(HARDWARE_FEATURES),
        "agg_dim": len(AGG_FEATURES),
    }
    results = {
        "question": "forward latency of the default PerfGNN (hidden=128, layers=4, additive readout) per 1,000-node graph",
        "num_nodes": NUM_NODES,
        "num_edges": int(batch.edge_index.shape[1]),
        "repeats": args.repeats,
        "warmup": args.warmup,
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average_1min_before": os.getloadavg()[0],
        "target_ms": 20.0,
        "backbones": {},
    }
    for name in sorted(BACKBONES):
        torch.manual_seed(0)
        model = PerfGNN(**dims, backbone=name).eval()
        params = sum(p.numel() for p in model.parameters())
        row = {"params": params}
        for threads in (1, 2):
            row[f"threads_{threads}"] = time_forward_ms(model, batch, threads, args.warmup, args.repeats)
        results["backbones"][name] = row
        print(
            f"{name:12s} params={params:>8,d}  "
            + "  ".join(
                f"{t} thr: median {row[f'threads_{t}']['median_ms']:6.2f} ms "
                f"(p10 {row[f'threads_{t}']['p10_ms']:.2f}, p90 {row[f'threads_{t}']['p90_ms']:.2f})"
                for t in (1, 2)
            ),
            flush=True,
        )
    results["load_average_1min_after"] = os.getloadavg()[0]
    out = Path(__file__).with_name("results.json")
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
