"""Do matrix ops whose widths are not multiples of 8 explain held-out families' timm training times?

Tensor-core kernels (AMP fp16 on the RTX 3090) want a convolution's channels per group and a matrix product's
reduction and output widths in multiples of 8; other widths are padded or run on slower kernels. No graph feature
says whether a width divides by 8 (the node features hold log widths). Per model this script takes the share of its
matrix FLOPs in ops with such a width (``mis8``; ``mis16`` for 16; ``dw`` depthwise convolutions, which use no
tensor cores) from the cached graph, then asks (training nothing itself):

- do the issue's five-feature boosted trees (``five_features.py``, gnnperf's folds) score better with the share;
- given a run's ``predictions.csv``, does the GNN's error on these rows follow the share (Spearman)?
- given pairs of runs of the same splits (``--pair OLD,NEW``: without and with a node feature for it), how do the
  models with more than a tenth of their matrix FLOPs misaligned, and the others, fare in each?

    .venv/bin/python experiments/timm_train_family/alignment.py --store .cache/stores/timm \\
        --tables ../shared/external/timm/head --graphs .cache/graphs \\
        --predictions multirun/all_sources_v23/predictions.csv \\
        --pair multirun/align_v6/0,multirun/align_v7/0 ... --out experiments/timm_train_family/results_alignment.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from five_features import features, fold_scores, model_costs

from gnnperf.data.store import SampleStore, select_samples
from gnnperf.errors import GnnperfError, run_script
from gnnperf.eval.compare import read_predictions
from gnnperf.eval.metrics import regression_metrics
from gnnperf.graph.build import GraphCache, build_graph
from gnnperf.graph.cost import graph_costs
from gnnperf.graph.features import conv_groups
from gnnperf.graph.ir import OpGraph

SHARES = ["mis8", "mis16", "dw"]


def widths(graph: OpGraph, i: int) -> tuple[int, int] | None:
    """(reduction width, output width) of a Conv (per group), Gemm or MatMul; ``None`` for other ops."""
    node = graph.nodes[i]
    out = graph.values[node.outputs[0]].shape(1) if node.outputs else ()
    if node.op_type == "Conv" and len(out) > 1:
        groups, cin = conv_groups(graph, i)
        return cin // max(groups, 1), out[1] // max(groups, 1)
    data = [v for v in node.inputs if v]
    if node.op_type in ("Gemm", "MatMul") and data and out:
        return graph.values[data[0]].shape(1)[-1], out[-1]
    return None


def shares(graph: OpGraph) -> dict[str, float]:
    """Shares of the graph's matrix FLOPs: widths not multiples of 8 / 16, depthwise convolutions (neither).

    Matrix ops other than Conv, Gemm and MatMul (Einsum, RNN cells) count in the total as aligned.
    """
    costs, _ = graph_costs(graph, 1)
    total, part = 0.0, dict.fromkeys(SHARES, 0.0)
    for i, cost in enumerate(costs):
        total += cost.mat_flops
        if cost.mat_flops <= 0:
            continue
        groups, cin = conv_groups(graph, i)  # (1, 0) for ops other than Conv
        if groups > 1 and groups == cin:
            part["dw"] += cost.mat_flops
            continue
        w = widths(graph, i)
        if w is None:
            continue
        part["mis8"] += cost.mat_flops * any(d % 8 for d in w)
        part["mis16"] += cost.mat_flops * any(d % 16 for d in w)
    return {k: v / max(total, 1.0) for k, v in part.items()}


def compare_pairs(pairs: list[list[str]], rows: pd.DataFrame) -> dict:
    """GNN MAPE of each run of each pair on all rows, on rows of models with ``mis8`` > 0.1, and on the rest."""
    share = rows.set_index("sample_id").mis8
    out: dict = {}
    joined = []
    for old, new in pairs:
        both = [
            read_predictions(job).query("predictor == 'gnn'").set_index("sample_id") for job in (old, new)
        ]
        fold = pd.DataFrame({"true": both[0].true_ms, "old": both[0].pred_ms, "new": both[1].pred_ms})
        joined.append(fold.assign(mis8=share.reindex(fold.index).to_numpy()))
        out[f"{old},{new}"] = _groups(joined[-1])
    out["all folds"] = _groups(pd.concat(joined))
    return out


def _groups(fold: pd.DataFrame) -> dict:
    parts = {"all": fold, "mis8 > 0.1": fold[fold.mis8 > 0.1], "mis8 <= 0.1": fold[fold.mis8 <= 0.1]}
    return {
        name: {
            "n": len(g),
            **{run: round(regression_metrics(g[run], g.true)["mape"], 2) for run in ("old", "new")},
        }
        for name, g in parts.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, default=Path(".cache/stores/timm"), help="imported timm store")
    ap.add_argument(
        "--tables", type=Path, default=Path("../shared/external/timm/head"), help="timm CSV folder"
    )
    ap.add_argument(
        "--graphs", type=Path, default=Path(".cache/graphs"), help="graph cache of the store's models"
    )
    ap.add_argument("--predictions", type=Path, help="a gnnperf-train run's predictions.csv (its gnn rows)")
    ap.add_argument(
        "--pair", action="append", default=[], help="OLD,NEW job folders of one split (repeatable)"
    )
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = select_samples(SampleStore(args.store, readonly=True).read(status="ok"), "mode == 'train'")
    cache, of = GraphCache(args.graphs), {}
    for ref, shape in rows[["model_ref", "input_shape"]].drop_duplicates().itertuples(index=False):
        try:
            graph = build_graph(ref, tuple(int(d) for d in shape.split(",")), cache=cache, cached_only=True)
        except GnnperfError:  # not in the cache: its rows are left out and counted
            continue
        of[ref, shape] = shares(graph)
    known = [(r, s) in of for r, s in zip(rows.model_ref, rows.input_shape, strict=True)]
    result: dict = {"rows": len(rows), "rows_without_graph": len(rows) - sum(known), "studies": {}}
    rows = rows[known].reset_index(drop=True)
    rows = rows.join(pd.DataFrame([of[k] for k in zip(rows.model_ref, rows.input_shape, strict=True)]))

    costs = model_costs(args.tables)
    for name, part, layout in (
        ("nchw_only", rows[rows.memory_format == "contiguous"], False),
        ("both", rows, True),
    ):
        x, _ = features(part.reset_index(drop=True), costs, layout)
        kept = part.reset_index(drop=True).loc[x.index].reset_index(drop=True)
        x = x.reset_index(drop=True)
        for extra in ([], ["mis8"], SHARES):
            for split in ("holdout_family", "random"):
                folds, mean = fold_scores(x.join(kept[extra]), kept, split, args.folds)
                key = f"{name}/five{''.join('+' + e for e in extra)}/{split}"
                result["studies"][key] = {
                    "rows": len(kept),
                    "mean": mean,
                    "fold_mape": [f["mape"] for f in folds],
                }
                print(f"{key}: MAPE {mean['mape']:.1f} (folds {result['studies'][key]['fold_mape']})")

    per_model = rows.drop_duplicates("model_ref")
    fam = per_model.groupby("family")[SHARES].mean().sort_values("mis8", ascending=False)
    result["families_by_mis8"] = fam.head(15).round(3).reset_index().to_dict("records")
    result["models_with_mis8_over_0.1"] = round(float((per_model.mis8 > 0.1).mean()), 3)

    if args.predictions:
        pred = pd.read_csv(args.predictions)
        pred = pred[pred.predictor == "gnn"].merge(
            rows[["sample_id", "memory_format", *SHARES]], on="sample_id"
        )
        pred["log_measured_over_predicted"] = np.log(pred.true_ms / pred.pred_ms)
        result["gnn_error_vs_share"] = {
            layout: {
                "n": len(g),
                **{
                    f"spearman_{s}": round(
                        float(g[[s, "log_measured_over_predicted"]].corr("spearman").iloc[0, 1]), 3
                    )
                    for s in SHARES
                },
            }
            for layout, g in pred.groupby("memory_format")
        }
        print("gnn error vs share:", result["gnn_error_vs_share"])
    if args.pair:
        result["pairs"] = compare_pairs([p.split(",") for p in args.pair], rows)
        print("pairs:", json.dumps(result["pairs"]["all folds"]))
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
