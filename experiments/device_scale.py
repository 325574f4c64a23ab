"""Each predictor's ranking of models, moved to another predictor's level on each (device, precision).

For held-out-device jobs: per job and per (hardware, precision) group of its test rows, every predictor's
predictions are multiplied by one factor, the median ratio of the ``--scale-from`` predictor's predictions to its
own over the group's rows. No measurement on the test device is used (unlike ``ensemble.py --calibrate-with``):
the learned predictors keep how they rank the models within a device, and take the device's level from a
predictor whose device dependence is physics (``opcost``: shared per-op-class rates on data-sheet peaks). Rows
``<predictor>@<scale-from>``; test metrics only.

    .venv/bin/python experiments/device_scale.py multirun/tv_nohw_opcost/0 ... --scale-from opcost \\
        --out experiments/torchvision_lodo/results_device_scale.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from gnnperf.errors import GnnperfError, run_script
from gnnperf.eval.compare import read_predictions
from gnnperf.eval.metrics import regression_metrics


def rescaled(wide: pd.DataFrame, predictor: str, scale_from: str) -> np.ndarray:
    """``wide[predictor]`` times the median ratio ``wide[scale_from] / wide[predictor]`` of its group."""
    log_ratio = np.log(wide[scale_from] / wide[predictor])
    shift = log_ratio.groupby([wide["hardware"], wide["precision"]]).transform("median")
    return (wide[predictor] * np.exp(shift)).to_numpy()


def job_table(job: Path, scale_from: str) -> dict[str, dict[str, float]]:
    preds = read_predictions(job)
    wide = preds.pivot_table(
        index=["sample_id", "hardware", "precision", "true_ms"], columns="predictor", values="pred_ms"
    ).reset_index()
    if scale_from not in wide:
        raise GnnperfError(f"{job} has no predictions of {scale_from!r}")
    true = wide["true_ms"].to_numpy()
    names = [c for c in wide.columns if c not in ("sample_id", "hardware", "precision", "true_ms")]
    table = {name: regression_metrics(wide[name].to_numpy(), true) for name in names}
    for name in names:
        if name != scale_from:
            table[f"{name}@{scale_from}"] = regression_metrics(rescaled(wide, name, scale_from), true)
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("jobs", type=Path, nargs="+", help="job folders holding predictions.csv")
    p.add_argument("--scale-from", default="opcost", help="predictor whose level per device is kept")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    jobs = {str(job): job_table(job, args.scale_from) for job in args.jobs}
    mape = pd.DataFrame({job: {k: v["mape"] for k, v in t.items()} for job, t in jobs.items()}).T
    mape.loc["mean"] = mape.mean()
    print(mape.round(1).to_string())
    if args.out:
        result = {"scale_from": args.scale_from, "jobs": jobs, "mean_mape": mape.loc["mean"].to_dict()}
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    run_script(main)
