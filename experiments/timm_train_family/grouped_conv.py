"""Where the held-out-family error sits: NHWC rows of models with grouped convolutions.

Three parts, on timm's RTX 3090 training tables:

1. Measured layout effect: per model, NHWC time / NCHW time, for models with and without a grouped convolution
   that is not depthwise (1 < groups < input channels), read from gnnperf's op graphs (``--graphs``).
2. The GNN's error on held-out families (``--jobs``: gnnperf-train job folders holding ``predictions.csv``), split
   into the NHWC and NCHW rows of models whose NHWC time is over ``--slow`` times their NCHW time, and the rest.
3. Whether a feature would help, tested cheaply on the issue's boosted model (``five_features.py``, both layouts,
   layout as sixth feature) on the same family folds: plus the share of forward FLOPs in grouped convolutions,
   and that share times the channels-last flag.

    .venv/bin/python experiments/timm_train_family/grouped_conv.py --jobs multirun/timm_train_family_all/0 ... \\
        --out experiments/timm_train_family/results_grouped_conv.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from five_features import features, model_costs  # this folder: run the script by its path
from sklearn.ensemble import HistGradientBoostingRegressor

from gnnperf.data.aggregate import grouped_conv_share
from gnnperf.data.splits import make_split
from gnnperf.data.store import SampleStore, select_samples
from gnnperf.errors import run_script
from gnnperf.eval.compare import read_predictions
from gnnperf.eval.metrics import regression_metrics
from gnnperf.graph.build import GraphCache, build_graph
from gnnperf.graph.cost import graph_costs


def grouped_share(ref: str, shape: str, cache: GraphCache) -> float | None:
    """Share of the forward FLOPs (batch 1) in non-depthwise grouped convolutions; None without a graph."""
    try:
        graph = build_graph(ref, tuple(int(d) for d in shape.split(",")), cache=cache, cached_only=True)
    except Exception:  # not in the cache (failed export): the model is left out and counted
        return None
    return grouped_conv_share(graph, graph_costs(graph, 1)[0])


def _ape(pred, true) -> np.ndarray:
    return np.abs(np.asarray(pred, dtype=float) / np.asarray(true, dtype=float) - 1) * 100


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", type=Path, default=Path(".cache/stores/timm"), help="imported timm store")
    p.add_argument(
        "--tables", type=Path, default=Path("../shared/external/timm/head"), help="timm CSV folder"
    )
    p.add_argument("--graphs", type=Path, default=Path(".cache/graphs"), help="graph cache")
    p.add_argument("--jobs", type=Path, nargs="+", required=True, help="gnnperf-train job folders")
    p.add_argument("--slow", type=float, default=1.3, help="NHWC/NCHW time ratio that counts as slow")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()

    rows = select_samples(SampleStore(args.store, readonly=True).read(status="ok"), "mode == 'train'")
    rows = rows.reset_index(drop=True)
    cache = GraphCache(args.graphs)
    keys = rows[["model_ref", "input_shape"]].drop_duplicates()
    share = {(r, s): grouped_share(r, s, cache) for r, s in keys.itertuples(index=False)}
    rows["grouped_share"] = [share[k] for k in zip(rows["model_ref"], rows["input_shape"])]
    no_graph = int(rows["grouped_share"].isna().sum())
    rows = rows.dropna(subset=["grouped_share"]).reset_index(drop=True)

    # 1. the measured layout effect
    wide = rows.pivot_table(index="model_ref", columns="memory_format", values="iteration_time_ms").dropna()
    ratio = (wide["channels_last"] / wide["contiguous"]).rename("nhwc_over_nchw")
    has_grouped = rows.groupby("model_ref")["grouped_share"].max().gt(0).reindex(ratio.index)
    effect = {
        ("with" if flag else "without") + "_grouped_conv": {
            "models": int(len(r)),
            "median_nhwc_over_nchw": round(float(r.median()), 3),
            "slow_models": int((r > args.slow).sum()),
        }
        for flag, r in ratio.groupby(has_grouped)
    }
    slow = ratio[ratio > args.slow].index
    print(f"NHWC/NCHW time by model ({len(ratio)} models with both layouts): {json.dumps(effect)}")

    # 2. the GNN's error on held-out families, by row kind
    preds = pd.concat(read_predictions(j) for j in args.jobs)
    preds = preds.merge(rows[["sample_id", "memory_format"]], on="sample_id", how="inner")
    preds["ape"] = _ape(preds["pred_ms"], preds["true_ms"])
    preds["rows"] = np.where(preds["model_ref"].isin(slow), "slow_nhwc_model/", "other_model/")
    preds["rows"] += preds["memory_format"]
    errors = {}
    for name, g in preds.groupby("predictor"):
        errors[name] = {
            "mape": round(float(g["ape"].mean()), 2),
            "by_rows": {
                k: {"n": len(v), "mape": round(float(v.mean()), 2)} for k, v in g.groupby("rows")["ape"]
            },
            "share_of_error_in_slow_nhwc_rows": round(
                float(g.loc[g["rows"] == "slow_nhwc_model/channels_last", "ape"].sum() / g["ape"].sum()), 3
            ),
        }
        print(f"{name}: {json.dumps(errors[name])}")

    # 3. the boosted model with and without the grouped-convolution features, family folds
    costs = model_costs(args.tables)
    x, dropped = features(rows, costs, layout=True)
    kept = rows.loc[x.index].reset_index(drop=True)
    x = x.reset_index(drop=True)
    x_grouped = x.assign(
        grouped_share=kept["grouped_share"].to_numpy(),
        grouped_share_x_channels_last=kept["grouped_share"].to_numpy() * x["channels_last"].to_numpy(),
    )
    y = kept["iteration_time_ms"].to_numpy()
    nhwc_slow = ((kept["memory_format"] == "channels_last") & kept["model_ref"].isin(slow)).to_numpy()
    boosted = {}
    for name, feats in (("five_plus_layout", x), ("five_plus_layout_plus_grouped", x_grouped)):
        pred = np.full(len(kept), np.nan)
        for fold in range(5):
            part = make_split("holdout_family", kept, seed=0, fold=fold, num_folds=5)
            fit = np.concatenate([part["train"], part["val"]])
            model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, random_state=0)
            model.fit(feats.iloc[fit], np.log(y[fit]))
            pred[part["test"]] = np.exp(model.predict(feats.iloc[part["test"]]))
        m = regression_metrics(pred, y)
        boosted[name] = {
            "mape": round(float(m["mape"]), 2),
            "within_10": round(float(m["within_10"]), 3),
            "mape_slow_nhwc_rows": round(float(_ape(pred[nhwc_slow], y[nhwc_slow]).mean()), 2),
            "mape_other_rows": round(float(_ape(pred[~nhwc_slow], y[~nhwc_slow]).mean()), 2),
        }
        print(f"boosted {name}: {json.dumps(boosted[name])}")
    doc = {
        "rows": len(rows),
        "rows_without_graph": no_graph,
        "rows_without_timm_costs": dropped,
        "slow_ratio": args.slow,
        "slow_models": sorted(slow),
        "layout_effect": effect,
        "gnn_jobs": [str(j) for j in args.jobs],
        "errors": errors,
        "boosted_family_folds": boosted,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
