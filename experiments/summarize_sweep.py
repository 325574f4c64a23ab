"""Collect gnnperf-train sweeps into results.json: every job's test metrics, and means per group.

    .venv/bin/python experiments/summarize_sweep.py multirun/<task>/<time> [more sweep dirs] \
        --group model.readout --out experiments/<study>/results.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

import pandas as pd
import yaml


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("sweep_dirs", type=Path, nargs="+", help="sweep folders (a study split over several runs)")
    p.add_argument("--group", action="append", default=[], help="override key to group by (repeatable)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    jobs = []
    files = [
        f for d in args.sweep_dirs for f in sorted(d.glob("*/metrics.json"), key=lambda f: int(f.parent.name))
    ]
    for metrics_file in files:
        overrides = yaml.safe_load((metrics_file.parent / ".hydra" / "overrides.yaml").read_text()) or []
        params = dict(o.split("=", 1) for o in overrides if "=" in o)
        metrics = json.loads(metrics_file.read_text())
        comparison = json.loads((metrics_file.parent / "comparison.json").read_text())
        job = {
            "sweep": str(metrics_file.parent.parent),
            "job": int(metrics_file.parent.name),
            "overrides": params,
            "test": comparison,
        }
        for name in (
            "per_device",
            "per_family",
            "per_source",
        ):  # what the test part held, and per-group scores
            table = metrics_file.parent / f"{name}.csv"
            if table.exists():
                job[name] = pd.read_csv(table).round(4).to_dict(orient="records")
        jobs.append(job)
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for job in jobs:
        key = ",".join(f"{g}={job['overrides'].get(g, '')}" for g in args.group) or "all"
        for predictor, row in job["test"].items():
            for metric in ("mape", "median_ape", "within_10", "within_20", "spearman"):
                groups[key][f"{predictor}/{metric}"].append(row[metric])
    # a predictor missing from some jobs (gnn_no_fallback appears only where the fallback changed something)
    # is averaged over the jobs that have it: "<predictor>/jobs" says over how many
    summary = {
        k: {
            **{m: statistics.mean(v) for m, v in sorted(d.items())},
            **{m.replace("/mape", "/jobs"): len(v) for m, v in d.items() if m.endswith("/mape")},
        }
        for k, d in groups.items()
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"sweeps": [str(d) for d in args.sweep_dirs], "mean_over_jobs": summary, "jobs": jobs}, indent=1
        )
    )
    for key, metrics in summary.items():
        print(key)
        for m, v in metrics.items():
            if m.endswith("/mape"):
                print(f"  {m:<22} {v:8.2f}")


if __name__ == "__main__":
    main()
