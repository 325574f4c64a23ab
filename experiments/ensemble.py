"""Seed ensembles of gnnperf-train jobs: the GNN's test predictions of several jobs on one split, combined.

Each ``--fold`` names the job folders of one fold (same split and test part, different ``seed``: other weights and
another validation draw), comma-separated; the first job's baselines are the comparison. Per fold it scores: the
members alone (and their mean), ``gnn-ens`` (geometric mean of the members' predictions), and ``gnn-ens+gbm``
(geometric mean of the ensemble and the gradient-boosted baseline, weights fixed at 1/2 beforehand, not tuned on
any part of the data; ``--blend-with NAME`` blends another baseline of the jobs instead). Then the mean over
folds. Test metrics only; every job must have scored the same samples.

``--calibrate-with MODEL`` also scores every predictor after one measurement on the test device: each prediction
is divided by the predictor's own predicted/measured ratio on MODEL's test rows of the same device and precision
(geometric mean over them), the rows ``<predictor> @MODEL``. MODEL's own rows are then exact and stay in.

    .venv/bin/python experiments/ensemble.py \\
        --fold multirun/timm_train_family_all/0,multirun/timm_train_family_all_s1/0,... --fold ... \\
        --out experiments/timm_train_family/results_ensemble.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from gnnperf.errors import run_script
from gnnperf.eval.compare import member_predictions, read_predictions
from gnnperf.eval.metrics import prediction_frame
from gnnperf.eval.tables import comparison_table, to_markdown


def calibrated(pred: np.ndarray, true: np.ndarray, rows: pd.DataFrame, reference: str) -> np.ndarray:
    """``pred`` divided by its ratio to ``true`` on ``reference``'s rows of each (hardware, precision)."""
    log_ratio = pd.Series(np.log(pred / true), index=rows.index)
    ref = rows["model_ref"] == reference
    keys = [rows["hardware"], rows["precision"]]
    scale = log_ratio[ref].groupby([k[ref] for k in keys]).mean()
    if scale.empty:
        raise SystemExit(f"error: {reference} has no test rows to calibrate with")
    shift = pd.MultiIndex.from_arrays(keys).map(scale.to_dict().get).to_numpy(dtype=float)
    return pred / np.exp(np.nan_to_num(shift))  # groups without the reference keep their prediction


def fold_table(jobs: list[Path], calibrate_with: str | None = None, blend_with: str = "gbm") -> pd.DataFrame:
    """Comparison table of one fold: members, their ensemble, the blend, and the first job's baselines."""
    members = member_predictions(jobs)
    ids = members[0].index
    true = members[0]["true_ms"].to_numpy()
    log_preds = np.log(np.stack([m["pred_ms"].to_numpy() for m in members]))
    frames = {f"gnn[{k}]": prediction_frame(np.exp(lp), true) for k, lp in enumerate(log_preds)}
    ensemble = log_preds.mean(0)
    frames["gnn-ens"] = prediction_frame(np.exp(ensemble), true)
    baselines = {
        name: group.set_index("sample_id").loc[ids, "pred_ms"].to_numpy()
        for name, group in read_predictions(jobs[0]).groupby("predictor")
        if name != "gnn"
    }
    if blend_with in baselines:
        blend = np.exp((ensemble + np.log(baselines[blend_with])) / 2)
        frames[f"gnn-ens+{blend_with}"] = prediction_frame(blend, true)
    frames.update({name: prediction_frame(pred, true) for name, pred in baselines.items()})
    if calibrate_with:
        rows = members[0]
        for name, pred in [("gnn-ens", np.exp(ensemble)), *baselines.items()]:
            frames[f"{name} @{calibrate_with}"] = prediction_frame(
                calibrated(pred, true, rows, calibrate_with), true
            )
    table = comparison_table(frames)
    member_rows = table.loc[[f"gnn[{k}]" for k in range(len(jobs))]]
    table.loc["gnn (member mean)"] = member_rows.mean()
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fold", action="append", required=True, help="comma-separated job folders of one fold")
    p.add_argument("--out", type=Path, help="write the tables as JSON")
    p.add_argument(
        "--calibrate-with", metavar="MODEL", help="also score after one measurement of MODEL (see above)"
    )
    p.add_argument("--blend-with", default="gbm", metavar="NAME", help="baseline blended with the ensemble")
    args = p.parse_args()
    tables = []
    for k, group in enumerate(args.fold):
        jobs = [Path(j) for j in group.split(",") if j]
        table = fold_table(jobs, args.calibrate_with, args.blend_with)
        print(f"\nfold group {k}: {', '.join(map(str, jobs))}\n{to_markdown(table)}")
        tables.append(table)
    shared = ["gnn (member mean)", "gnn-ens", f"gnn-ens+{args.blend_with}", f"gnn-ens @{args.calibrate_with}"]
    rows = [
        r for r in shared + [r for r in tables[0].index if not r.startswith("gnn")] if r in tables[0].index
    ]
    mean = pd.concat([t.loc[rows] for t in tables]).groupby(level=0, sort=False).mean()
    print(f"\nmean over {len(tables)} folds\n{to_markdown(mean.drop(columns='n'))}")
    if args.out:
        doc = {
            "folds": [
                {"jobs": group.split(","), "table": t.round(4).to_dict(orient="index")}
                for group, t in zip(args.fold, tables)
            ],
            "mean": mean.drop(columns="n").round(4).to_dict(orient="index"),
        }
        args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
