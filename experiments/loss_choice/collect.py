"""Collect a loss sweep (``model.loss=mape,huber,mse`` x folds) into results.json: scores and which way errors lean.

Per job (a sweep's jobs, or a single run's folder): the GNN's test metrics and the best baseline if the run fitted
any (``comparison.json``), the devices of its test rows, its MAPE per source, and from ``predictions.csv`` the share
of test rows the GNN underpredicts and the median measured / predicted, in all and on the CPU data's LSTM rows at
sequence length 256 (``experiments/rnn_denormals``). Per loss and seed: the means over the folds that seed ran
(``folds``).

    .venv/bin/python experiments/loss_choice/collect.py multirun/loss_cpu_a multirun/loss_cpu_b \\
        --out experiments/loss_choice/results.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import yaml

from gnnperf.errors import GnnperfError, run_script


def job_row(job: Path) -> dict:
    cfg = yaml.safe_load(
        (job / ".hydra" / "config.yaml").read_text()
    )  # the loss even where it was the default
    by_source = pd.read_csv(job / "per_source.csv")  # the run's own evaluation
    scores = json.loads((job / "comparison.json").read_text())
    pred = pd.read_csv(job / "predictions.csv")
    gnn = pred[pred["predictor"] == "gnn"]
    ratio = gnn["true_ms"] / gnn["pred_ms"]
    lstm256 = gnn["model_ref"].str.match(r"zoo:lstm\?.*seq_len=256").to_numpy()
    baselines = {k: v["mape"] for k, v in scores.items() if k not in ("gnn", "gnn_no_fallback")}
    best = min(baselines, key=baselines.get) if baselines else None
    return {
        "job": str(job),
        "fold": int(cfg["split"]["fold"]),
        "seed": int(cfg["seed"]),
        "loss": cfg["model"]["loss"],
        "mape": scores["gnn"]["mape"],
        "median_ape": scores["gnn"]["median_ape"],
        "within_10": scores["gnn"]["within_10"],
        "under_share": float((ratio > 1).mean()),
        "median_measured_over_predicted": float(ratio.median()),
        "lstm256_rows": int(lstm256.sum()),
        "lstm256_median_measured_over_predicted": float(ratio[lstm256].median()) if lstm256.any() else None,
        "test_hardware": ",".join(sorted(gnn["hardware"].unique())),
        "mape_by_source": by_source[by_source["predictor"] == "gnn"].set_index("source")["mape"].to_dict(),
        "best_baseline": best,
        "best_baseline_mape": baselines.get(best),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweeps", nargs="+", type=Path, help="hydra sweep folders, or single runs' folders")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    jobs = sorted(
        {j.parent for s in args.sweeps for j in (*s.glob("comparison.json"), *s.glob("*/comparison.json"))}
    )
    if not jobs:
        raise GnnperfError(f"no finished job (comparison.json) under {', '.join(map(str, args.sweeps))}")
    rows = pd.DataFrame([job_row(j) for j in jobs]).sort_values(["loss", "seed", "fold"])
    scores = [
        "mape",
        "median_ape",
        "within_10",
        "under_share",
        "median_measured_over_predicted",
        "best_baseline_mape",
    ]
    # per loss and seed: a seed run on fewer folds (a spot check) is not averaged into another seed's folds
    grouped = rows.groupby(["loss", "seed"])
    means = grouped[scores].mean().assign(folds=grouped.size())
    means.index = [f"{loss}, seed {seed}" for loss, seed in means.index]
    args.out.write_text(
        json.dumps(
            {
                "jobs": rows.to_dict(orient="records"),
                "mean_over_folds": means.round(4).to_dict(orient="index"),
            },
            indent=1,
        )
        + "\n"
    )
    print(rows.drop(columns=["job", "mape_by_source"]).round(3).to_string(index=False))
    print(means.round(3).to_string())


if __name__ == "__main__":
    run_script(main)
