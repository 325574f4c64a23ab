"""Does `--breakdown` put the time where it is? The shipped predictor's per-op times against NeuSight's per-op timings.

NeuSight (``label/<GPU>/<model>-train-<seq>-<batch>.csv``) timed every torch.fx node of a one-block trace of each
transformer it labels (embeddings, block 0, head), forward and backward apart, fp32 with TF32 off; the whole model
is the block times ``num_layer`` plus the rest. Both sides are put into the same categories (``CATEGORIES``):
the weight matrix products of the blocks, the output head's (the vocabulary projection), the attention's products
of two activations, softmax, dropout, layer norm, embedding lookups, and the other element-wise ops. fx nodes that
launch no kernel (``NO_KERNEL``: views, sizes, attribute reads) are counted as zero: NeuSight recorded about 0.01 ms
for each, its timer's floor. The step total of the per-node times is compared with the end-to-end label too.

Beside the network's breakdown, the per-op roofline (forward FLOPs / peak fp32, or bytes / bandwidth, whichever is
larger; no learning) gives the shares a breakdown would have without the network. The shipped predictor trained on
these labels' end-to-end times (a share of them in its test part), never on a per-op time.

    .venv/bin/python experiments/breakdown/run.py --neusight ../shared/external/neusight \\
        --out experiments/breakdown/results.json
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from gnnperf.data.sources import neusight
from gnnperf.graph.build import GraphCache, build_graph
from gnnperf.graph.cost import graph_costs
from gnnperf.hardware.table import get_spec
from gnnperf.predict import Predictor, Query

CATEGORIES = (
    "linear",
    "head",
    "attention_matmul",
    "softmax",
    "dropout",
    "layer_norm",
    "embedding",
    "other_elementwise",
)
HEAD_NAMES = ("lm_head", "cls.predictions.decoder", "cls/predictions/decoder", "cls_predictions_decoder")
# fx targets that run no kernel on the data (views, metadata, Python scalars)
NO_KERNEL = {
    "getitem", "size", "view", "getattr", "permute", "transpose", "dim", "finfo", "expand", "unsqueeze", "split",
    "type", "to", "reshape", "long", "type_as", "bool", "tensor", "contiguous_view",
}  # fmt: skip
BLOCK0 = re.compile(r"\.(?:h|layer|layers)\.0(?:\.|$)")  # block 0's module path in nn_module_stack


def _fx_target(row: dict) -> str:
    target = re.sub(r" at 0x[0-9a-f]+", "", row["target"])
    m = re.search(r"(?:function|method) (\w+)", target)
    return m.group(1) if m else target


def fx_category(row: dict, module_class: str | None) -> str | None:
    """The category of one fx node of NeuSight's trace, ``None`` for no kernel."""
    name, op = row["Name"], row["op"]
    if op in ("placeholder", "get_attr", "output"):
        return None
    if op == "call_module":
        cls = (module_class or "").rsplit(".", 1)[-1]
        if cls == "Linear":
            return "head" if any(h in row["target"] for h in HEAD_NAMES) else "linear"
        return {"Dropout": "dropout", "LayerNorm": "layer_norm", "Embedding": "embedding"}.get(
            cls, "other_elementwise"
        )
    target = _fx_target(row)
    if target in NO_KERNEL or "finfo" in target:
        return None
    if target in ("addmm", "linear"):
        return "head" if any(h in name for h in HEAD_NAMES) else "linear"
    if target in ("matmul", "bmm", "baddbmm"):
        return "attention_matmul"
    return {
        "softmax": "softmax",
        "dropout": "dropout",
        "layer_norm": "layer_norm",
        "embedding": "embedding",
    }.get(target, "other_elementwise")


def measured_by_category(csv_path: Path, num_layer: int) -> tuple[dict[str, float], float]:
    """ms per category of the whole model (block 0 x ``num_layer`` + the rest), and the ms left out as no kernel."""
    out: dict[str, float] = defaultdict(float)
    dropped = 0.0
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            ms = float(row["fw_latency"] or 0) + float(row["bw_latency"] or 0)
            stack = re.findall(r"\('([^']*)', <class '([^']+)'>\)", row["meta"])
            module_class = stack[-1][1] if stack else None
            in_block = any(BLOCK0.search(path) for path, _ in stack)
            cat = fx_category(row, module_class)
            if cat is None:
                dropped += ms * (num_layer if in_block else 1)
                continue
            out[cat] += ms * (num_layer if in_block else 1)
    return dict(out), dropped


def onnx_category(node, name: str) -> str:
    """The category of one node of gnnperf's graph."""
    t = node.op_type
    if t in ("Gemm", "MatMul", "Einsum"):
        if node.params:
            return "head" if any(h in name for h in HEAD_NAMES) else "linear"
        return "attention_matmul"
    if t == "Gather" and node.params:
        return "embedding"
    return {"Softmax": "softmax", "Dropout": "dropout", "LayerNormalization": "layer_norm"}.get(
        t, "other_elementwise"
    )


def predicted_by_category(
    predictor: Predictor, query: Query
) -> tuple[dict[str, float], dict[str, float], float]:
    """(network ms per category, roofline share per category, predicted step ms)."""
    graph = build_graph(query.model, query.input_shape, cache=GraphCache())
    (row,) = predictor.predict([query], breakdown=len(graph.nodes))
    # a group's ops share op type and parameter shapes, so its first one gives its category
    net: dict[str, float] = defaultdict(float)
    for group in row["breakdown"]:
        net[onnx_category(graph.nodes[group["nodes"][0]], group["name"])] += group["ms"]
    spec = get_spec(query.hardware)
    costs, _ = graph_costs(graph, query.batch_size)
    roof: dict[str, float] = defaultdict(float)
    for node, c in zip(graph.nodes, costs, strict=True):
        compute = c.flops / (spec.peak_fp32_tflops * 1e12)
        memory = (c.bytes_read + c.bytes_written) / (spec.mem_bandwidth_gbs * 1e9)
        roof[onnx_category(node, node.name)] += 1e3 * max(compute, memory)
    total_roof = sum(roof.values())
    return dict(net), {k: v / total_roof for k, v in roof.items()}, row["iteration_time_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--neusight", type=Path, default=Path("../shared/external/neusight"))
    parser.add_argument("--checkpoint", default=None, help="default: the shipped predictor")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    predictor = Predictor.from_checkpoint(args.checkpoint)
    samples, _ = neusight.read(args.neusight)
    labels = []
    for s in samples:
        csv_path = (args.neusight / s["source_ref"]).with_suffix(".csv")
        if s["mode"] != "train" or s["num_devices"] != 1 or not csv_path.is_file():
            continue
        num_layer = json.loads((args.neusight / s["source_ref"]).read_text())["num_layer"]
        measured, dropped = measured_by_category(csv_path, num_layer)
        query = Query.from_sample(s)
        net, roof_share, predicted_ms = predicted_by_category(predictor, query)
        per_node_total = sum(measured.values())
        name = Path(s["source_ref"]).stem
        labels.append(
            {
                "label": f"{s['hardware']}/{name}",
                "e2e_ms": round(s["iteration_time_ms"], 2),
                "per_node_total_ms": round(per_node_total, 2),
                "no_kernel_ms": round(dropped, 2),
                "predicted_ms": round(predicted_ms, 2),
                "measured_ms": {k: round(measured.get(k, 0.0), 3) for k in CATEGORIES},
                "predicted_ms_by_category": {k: round(net.get(k, 0.0), 3) for k in CATEGORIES},
                "measured_share": {k: round(measured.get(k, 0.0) / per_node_total, 4) for k in CATEGORIES},
                # of the ops' time (the readout's per-step overhead, about 1 ms, is no op's)
                "predicted_share": {k: round(net.get(k, 0.0) / sum(net.values()), 4) for k in CATEGORIES},
                "roofline_share": {k: round(roof_share.get(k, 0.0), 4) for k in CATEGORIES},
            }
        )
        print(
            f"{labels[-1]['label']}: e2e {s['iteration_time_ms']:.1f} ms, per-node sum {per_node_total:.1f}, "
            f"predicted {predicted_ms:.1f}"
        )

    def share_error(key: str) -> float:
        """Mean over labels of the summed absolute share differences / 2 (the share of time put elsewhere)."""
        return float(
            np.mean([sum(abs(r[key][k] - r["measured_share"][k]) for k in CATEGORIES) / 2 for r in labels])
        )

    per_category = {}
    for k in CATEGORIES:
        ratios = [
            r["predicted_ms_by_category"][k] / r["measured_ms"][k] for r in labels if r["measured_ms"][k] > 0
        ]
        share_ratios = [
            r["predicted_share"][k] / r["measured_share"][k] for r in labels if r["measured_share"][k] > 0
        ]
        per_category[k] = {
            "measured_share_median": round(float(np.median([r["measured_share"][k] for r in labels])), 4),
            "predicted_share_median": round(float(np.median([r["predicted_share"][k] for r in labels])), 4),
            "roofline_share_median": round(float(np.median([r["roofline_share"][k] for r in labels])), 4),
            # the share's error alone, without the step's
            "predicted_share_over_measured_median": round(float(np.median(share_ratios)), 3),
            "predicted_over_measured_median": round(float(np.median(ratios)), 3) if ratios else None,
            "predicted_over_measured_range": [round(min(ratios), 3), round(max(ratios), 3)]
            if ratios
            else None,
        }
    summary = {
        "labels": len(labels),
        "time_put_in_another_category": {
            "network": round(share_error("predicted_share"), 4),
            "roofline": round(share_error("roofline_share"), 4),
        },
        "per_node_total_over_e2e_median": round(
            float(np.median([r["per_node_total_ms"] / r["e2e_ms"] for r in labels])), 3
        ),
        "per_category": per_category,
    }
    result = {
        "source": "neusight per-node training traces (label/<GPU>/<model>-train-<seq>-<batch>.csv)",
        "checkpoint": os.path.relpath(predictor.path),
        "categories": list(CATEGORIES),
        "summary": summary,
        "labels": labels,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
