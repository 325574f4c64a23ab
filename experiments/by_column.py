"""Test metrics of gnnperf-train jobs split by a sample column the run's tables do not group by (e.g. layout).

Joins each job's ``predictions.csv`` with the sample stores on ``sample_id`` and prints MAPE per predictor and
value of ``--column`` for every job, then the mean over jobs; ``--out`` also writes them as JSON.

    .venv/bin/python experiments/by_column.py multirun/timm_train_family/0 ... --store .cache/stores/timm \
        --column memory_format --out experiments/timm_train_family/results_by_layout.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from gnnperf.data.store import SampleStore
from gnnperf.errors import run_script
from gnnperf.eval.compare import read_predictions
from gnnperf.eval.metrics import grouped_metrics


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("jobs", type=Path, nargs="+", help="job folders holding predictions.csv")
    p.add_argument("--store", type=Path, action="append", required=True, help="sample store (repeatable)")
    p.add_argument("--column", required=True, help="sample column to split by, e.g. memory_format")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    samples = pd.concat(SampleStore(s, readonly=True).read(status="ok") for s in args.store)
    samples = samples[["sample_id", args.column]].drop_duplicates("sample_id")
    tables = []
    for job in args.jobs:
        preds = read_predictions(job)
        joined = preds.merge(samples, on="sample_id", how="left")
        if joined[args.column].isna().any():
            missing = int(joined[args.column].isna().sum())
            raise SystemExit(f"error: {job}: {missing} predictions name samples not in the given stores")
        table = grouped_metrics(joined, ["predictor", args.column])[["mape", "within_10", "n"]].reset_index()
        tables.append(table.assign(job=str(job)))
    every = pd.concat(tables, ignore_index=True)
    wide = every.pivot_table(index=["job", args.column], columns="predictor", values="mape").round(1)
    mean = every.groupby([args.column, "predictor"])["mape"].mean().unstack().round(1)
    with pd.option_context("display.width", 200):
        print(wide.to_string(), "\n\nmean MAPE over the jobs\n", mean.to_string(), sep="")
    if args.out:
        doc = {
            "column": args.column,
            "jobs": every.round(4).to_dict(orient="records"),
            "mean_mape": mean.to_dict(orient="index"),
        }
        args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
