"""Test rows whose network was in the training part under another name, for a run made before splits grouped them.

Until 2026-12-03 the splits grouped rows by ``model_ref``, so a deprecated timm alias (``ssl_resnet50``), a DeiT
that is a ViT or torchvision's ResNet-50 could be tested while the same network (``graph_digest``) was trained on.
This re-creates such a split (grouped by ``model_ref`` only) on a processed dataset, names the test rows whose
``graph_digest`` is among the training rows' and scores a run's ``predictions.csv`` with and without them::

    .venv/bin/python experiments/twin_rows.py --dataset .cache/datasets/all --split holdout_model \\
        --kwargs '{"test_frac": 0.1, "val_frac": 0.1}' --predictions multirun/all_sources_v14/predictions.csv \\
        --out experiments/all_sources/results_v14_twins.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from gnnperf.data.splits import make_split
from gnnperf.eval.metrics import regression_metrics


def twin_rows(samples: pd.DataFrame, split: str, seed: int, fold: int, num_folds: int, **kw) -> pd.DataFrame:
    """The test rows of the split grouped by ``model_ref`` alone, with ``twin``: their network was trained on."""
    parts = make_split(split, samples.drop(columns="graph_digest"), seed, fold, num_folds, **kw)
    trained = set(samples["graph_digest"].to_numpy()[parts["train"]])
    test = samples.iloc[parts["test"]]
    return test.assign(twin=test["graph_digest"].isin(trained).to_numpy())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dataset", required=True, type=Path, help="a processed dataset root (its processed/ folder)"
    )
    ap.add_argument("--split", default="holdout_model")
    ap.add_argument(
        "--kwargs",
        default="{}",
        help="the split's options as JSON (holdout_model: order permutation unless given)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--folds", default="0", help="comma-separated folds")
    ap.add_argument("--num-folds", type=int, default=5)
    ap.add_argument("--predictions", type=Path, nargs="*", default=[], help="one predictions.csv per fold")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    samples = pd.read_parquet(args.dataset / "processed" / "samples.parquet")
    folds = [int(f) for f in args.folds.split(",")]
    kwargs = json.loads(args.kwargs)
    if args.split == "holdout_model":  # the runs this script is for drew their models before the hash order
        kwargs.setdefault("order", "permutation")
    report: dict = {
        "dataset": str(args.dataset),
        "split": args.split,
        "kwargs": kwargs,
        "folds": [],
    }
    for k, fold in enumerate(folds):
        test = twin_rows(samples, args.split, args.seed, fold, args.num_folds, **kwargs)
        twins = test[test.twin]
        row: dict = {
            "fold": fold,
            "test_rows": len(test),
            "twin_rows": len(twins),
            "twin_models": sorted(twins["model_ref"].unique()),
        }
        if k < len(args.predictions):
            pred = pd.read_csv(args.predictions[k])
            pred = pred.assign(twin=pred["sample_id"].isin(set(twins["sample_id"])))
            scores = {}
            for name, rows in pred.groupby("predictor"):
                y, p = rows["true_ms"].to_numpy(), rows["pred_ms"].to_numpy()
                kept = ~rows["twin"].to_numpy()
                scores[name] = {
                    "mape_all": regression_metrics(p, y)["mape"],
                    "mape_twins": regression_metrics(p[~kept], y[~kept])["mape"] if (~kept).any() else None,
                    "mape_without_twins": regression_metrics(p[kept], y[kept])["mape"],
                    "within_10_without_twins": regression_metrics(p[kept], y[kept])["within_10"],
                    "n_without_twins": int(kept.sum()),
                }
            row["scores"] = scores
        report["folds"].append(row)
        print(
            f"fold {fold}: {len(twins)} of {len(test)} test rows ({twins.model_ref.nunique()} models) were trained"
        )
        for name, s in row.get("scores", {}).items():
            twins_mape = "-" if s["mape_twins"] is None else f"{s['mape_twins']:.2f}"
            print(
                f"  {name:16s} all {s['mape_all']:6.2f}  twins {twins_mape:>6s}  without {s['mape_without_twins']:6.2f}"
            )
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
