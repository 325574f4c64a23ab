"""How a grouped convolution's channels-last slowdown follows its channels per group, on timm's RTX 3090 table.

Per model with at least ``--min-share`` of its forward FLOPs in grouped convolutions that are not depthwise (1 <
groups < input channels): the measured channels-last / NCHW training step ratio (the rows of ``--software``, torch
1.12 unless told, same batch), against the FLOP-weighted geometric mean of those convolutions' input channels per
group, from gnnperf's cached graphs. With ``--jobs`` (held-out-family job folders, several seeds of one fold set as
comma-separated folders, combined by the geometric mean), also the GNN's measured / predicted ratio per layout for
the same models, and the ceiling of any prior that prices the channels-last slowdown by channels per group alone:
every scored row scored again with its band's measured / predicted (channels-last rows of those models only, fitted
on the scored rows themselves, so an upper bound, not a result). With ``--trees``, whether the issue's five-feature
boosted trees (``five_features.py``, both layouts, layout as a sixth feature, gnnperf's family and random folds)
score better with the grouped FLOP share times the layout flag, or with that share split at ``--band`` channels per
group (two features), over all the table's training rows.

    .venv/bin/python experiments/timm_train_family/grouped_layout.py \\
        --jobs multirun/align_v7/0,multirun/align_v7_s1/0 ... \\
        --out experiments/timm_train_family/results_grouped_layout.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from five_features import features, fold_scores, model_costs  # this folder: run the script by its path

from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError, run_script
from gnnperf.eval.compare import ensemble_predictions
from gnnperf.eval.metrics import regression_metrics
from gnnperf.graph.build import GraphCache, build_graph
from gnnperf.graph.cost import graph_costs
from gnnperf.graph.features import conv_groups

BINS = [0, 8, 16, 32, 64, 4096]


def grouped_profile(ref: str, shape: str, cache: GraphCache, band: int = 16) -> tuple[float, ...] | None:
    """Share of forward FLOPs in grouped convolutions, their FLOP-weighted geometric mean channels per group, and
    the shares in those with at most and with more than ``band`` channels per group."""
    try:
        graph = build_graph(ref, tuple(int(d) for d in shape.split(",")), cache=cache, cached_only=True)
    except GnnperfError:  # not in the cache (failed export): left out
        return None
    costs, _ = graph_costs(graph, 1)
    total = sum(c.flops for c in costs)
    grouped = []
    for i, node in enumerate(graph.nodes):
        if node.op_type == "Conv":
            groups, in_channels = conv_groups(graph, i)
            if 1 < groups < in_channels and costs[i].flops > 0:
                grouped.append((in_channels // groups, costs[i].flops))
    if not grouped or total <= 0:
        return 0.0, 0.0, 0.0, 0.0
    flops = sum(f for _, f in grouped)
    narrow = sum(f for c, f in grouped if c <= band)
    # rounded: the mean of equal widths comes back a hair off them (16.000000000000004), across a bin edge
    cpg = round(float(np.exp(sum(np.log(c) * f for c, f in grouped) / flops)), 6)
    return flops / total, cpg, narrow / total, (flops - narrow) / total


def gnn_ratios(jobs: list[str]) -> pd.DataFrame:
    """Measured / predicted per sample of the seed ensembles of ``jobs`` (each a comma-separated fold group)."""
    frames = [ensemble_predictions(group.split(",")) for group in jobs]
    return pd.concat([pd.DataFrame({"ratio": f["true_ms"] / f["pred_ms"]}) for f in frames])


def band_ceiling(rows: pd.DataFrame, min_share: float) -> dict:
    """MAPE and within 10% of the GNN's scored rows as predicted and with the channels-last rows of models with at
    least ``min_share`` of their FLOPs grouped multiplied by their band's geometric-mean measured / predicted."""
    scored = rows.dropna(subset=["gnn_ratio"])
    chosen = (scored["memory_format"] == "channels_last") & (scored["share"] >= min_share)
    band = pd.cut(scored["cpg"], BINS)
    factor = np.exp(np.log(scored["gnn_ratio"][chosen]).groupby(band[chosen], observed=True).mean())
    corrected = scored["gnn_ratio"].where(~chosen, scored["gnn_ratio"] / band.map(factor).astype(float))

    def score(ratio: pd.Series) -> dict:
        metrics = regression_metrics(
            1 / ratio.to_numpy(), np.ones(len(ratio))
        )  # predicted / measured against 1
        return {"mape": round(metrics["mape"], 2), "within_10pct": round(metrics["within_10"], 3)}

    out = {
        "rows": len(scored),
        "corrected_rows": int(chosen.sum()),
        "band_factor": {str(b): round(float(v), 3) for b, v in factor.items()},
        "as_predicted": score(scored["gnn_ratio"]),
        "band_exact": score(corrected),
        "corrected_rows_as_predicted": score(scored["gnn_ratio"][chosen]),
    }
    print(
        f"band ceiling: {out['as_predicted']} -> {out['band_exact']} ({out['corrected_rows']} rows corrected)"
    )
    return out


def tree_scores(rows: pd.DataFrame, tables: Path) -> dict:
    """Mean MAPE of the five-feature trees (both layouts) with no share, the share x layout, and the banded shares."""
    x, _ = features(rows, model_costs(tables), layout=True)
    kept = rows.loc[x.index].reset_index(drop=True)
    x = x.reset_index(drop=True)
    channels_last = (kept["memory_format"] == "channels_last").to_numpy(float)
    extras = {
        "five": pd.DataFrame(index=x.index),
        "five+share_x_layout": pd.DataFrame({"share_x_cl": kept["share"] * channels_last}),
        "five+banded_shares_x_layout": pd.DataFrame(
            {
                "narrow_x_cl": kept["share_narrow"] * channels_last,
                "wide_x_cl": kept["share_wide"] * channels_last,
            }
        ),
    }
    result = {}
    for name, extra in extras.items():
        for split in ("holdout_family", "random"):
            folds, mean = fold_scores(x.join(extra), kept, split, 5)
            result[f"{name}/{split}"] = {
                "rows": len(kept),
                "mape": mean["mape"],
                "fold_mape": [f["mape"] for f in folds],
            }
            print(f"trees {name}/{split}: MAPE {mean['mape']:.1f}")
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", type=Path, default=Path(".cache/stores/timm"), help="imported timm store")
    p.add_argument("--graphs", type=Path, default=Path(".cache/graphs"), help="graph cache")
    p.add_argument(
        "--min-share", type=float, default=0.2, help="least share of FLOPs in grouped convolutions"
    )
    p.add_argument(
        "--jobs", nargs="*", default=[], help="fold groups: comma-separated job folders of one fold"
    )
    p.add_argument(
        "--band", type=int, default=16, help="channels per group splitting the two shares (--trees)"
    )
    p.add_argument("--trees", action="store_true", help="also fit the five-feature trees with the shares")
    p.add_argument(
        "--software", default="torch=1.12+cu113", help="the store's rows of this release (the scored table's)"
    )
    p.add_argument(
        "--tables", type=Path, default=Path("../shared/external/timm/head"), help="timm CSV folder"
    )
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()

    rows = SampleStore(args.store, readonly=True).read(status="ok")
    rows = rows[(rows["mode"] == "train") & (rows["software"] == args.software)]
    if rows.empty:
        raise SystemExit(f"error: {args.store} has no training rows of {args.software}")
    cache = GraphCache(args.graphs)
    keys = rows[["model_ref", "input_shape"]].drop_duplicates()
    profile = {(r, s): grouped_profile(r, s, cache, args.band) for r, s in keys.itertuples(index=False)}
    rows = rows[[profile[(r, s)] is not None for r, s in zip(rows["model_ref"], rows["input_shape"])]]
    columns = ["share", "cpg", "share_narrow", "share_wide"]
    rows = rows.reset_index(drop=True).join(
        pd.DataFrame([profile[k] for k in zip(rows["model_ref"], rows["input_shape"])], columns=columns)
    )
    trees = tree_scores(rows, args.tables) if args.trees else None
    ceiling = None
    if args.jobs:
        rows = rows.join(gnn_ratios(args.jobs).rename(columns={"ratio": "gnn_ratio"}), on="sample_id")
        ceiling = band_ceiling(rows, args.min_share)
    rows = rows[rows["share"] >= args.min_share]
    wide = rows.pivot_table(
        index=["model_ref", "input_shape", "share", "cpg"],
        columns="memory_format",
        values="iteration_time_ms",
    ).dropna()
    wide["layout_ratio"] = wide["channels_last"] / wide["contiguous"]
    wide = wide.reset_index()
    wide["bin"] = pd.cut(wide["cpg"], BINS)
    by_bin = wide.groupby("bin", observed=True)["layout_ratio"].describe()[["count", "25%", "50%", "75%"]]
    by_bin.index = by_bin.index.astype(str)
    out = {
        "rows": f"timm RTX 3090 training, {args.software}, models with both layouts",
        "min_share": args.min_share,
        "models": len(wide),
        "spearman_cpg_layout_ratio": float(wide["cpg"].corr(wide["layout_ratio"], method="spearman")),
        "layout_ratio_by_channels_per_group": by_bin.round(3).reset_index().to_dict("records"),
        "per_model": wide[["model_ref", "input_shape", "share", "cpg", "layout_ratio"]]
        .round(3)
        .to_dict("records"),
    }
    print(by_bin.round(2).to_string())
    print(
        f"{len(wide)} models; Spearman(channels per group, NHWC / NCHW) {out['spearman_cpg_layout_ratio']:.2f}"
    )
    if args.jobs:
        scored = rows.dropna(subset=["gnn_ratio"]).copy()
        scored["bin"] = pd.cut(scored["cpg"], BINS)
        log_ratio = np.log(scored["gnn_ratio"]).groupby(
            [scored["bin"], scored["memory_format"]], observed=True
        )
        gnn = np.exp(log_ratio.mean())
        out["gnn_measured_over_predicted"] = {f"{b} {m}": round(float(v), 3) for (b, m), v in gnn.items()}
        nhwc = scored[scored["memory_format"] == "channels_last"]
        per_model = np.exp(np.log(nhwc["gnn_ratio"]).groupby(nhwc["model_ref"]).mean())
        for record in out["per_model"]:
            value = per_model.get(record["model_ref"])
            record["gnn_nhwc_measured_over_predicted"] = None if value is None else round(float(value), 3)
        out["band_ceiling"] = ceiling
        out["jobs"] = args.jobs
        print("GNN measured / predicted (geometric mean) by channels per group and layout:")
        print(gnn.unstack().round(2).to_string())
    if trees is not None:
        out["trees"] = trees
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    run_script(main)
