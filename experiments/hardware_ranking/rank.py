"""Does a predictor put a GPU it never saw on the right side of the GPUs it knows?

``gnnperf predict --hardware all`` ranks devices; for a device without training rows that ranking rests on a
prediction from its data sheet. This script scores exactly that on leave-one-GPU-out jobs: for every test row
(the held-out GPU ``h``, a model and workload) and every other GPU ``g`` on which the same model and workload was
measured, is the held-out GPU predicted faster than ``g`` exactly when it was measured faster? ``g``'s time is its
measurement (what a user comparing against a GPU they know has); repeated measurements of one workload on one GPU
(the RTX 2080 Ti's several software set-ups) are taken at their median, and so are the predictions for them.

Pairs are split by how far apart the two measured times are: a pair within 10% is a near tie, which no
predictor of 15-25% MAPE can be expected to order. Also printed: for every workload measured on the held-out GPU
and at least two others, how often the fastest of them is picked right.

    .venv/bin/python experiments/hardware_ranking/rank.py --jobs multirun/rank_tv/* \\
        --store .cache/stores/torchvision --benchmark torchvision --out experiments/hardware_ranking/results.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from gnnperf.data.store import SampleStore
from gnnperf.errors import run_script
from gnnperf.eval.compare import read_predictions

# What makes two rows the same measurement on two devices (the sample schema's workload columns).
WORKLOAD = [
    "model_ref", "input_shape", "batch_size", "mode", "precision", "optimizer", "timed", "memory_format",
    "num_devices",
]  # fmt: skip
GAPS = {"all pairs": 0.0, "measured >= 10% apart": np.log(1.1), "measured >= 25% apart": np.log(1.25)}


def job_pairs(job: Path, measured: pd.DataFrame) -> pd.DataFrame:
    """Every predictor's held-out time against each other GPU's measured time, for one leave-one-GPU-out job.

    One row per (predictor, workload, other GPU), with the held-out GPU's ``pred_ms`` and ``true_ms``, the other
    GPU's ``iteration_time_ms``, and ``log_true`` / ``log_pred`` = log(held-out time / other GPU's time).
    """
    long = read_predictions(job)
    ids = long["sample_id"].unique()
    rows = measured.set_index("sample_id").loc[ids].reset_index()
    if rows["hardware"].nunique() != 1:
        raise SystemExit(
            f"error: {job}'s test rows are on {rows['hardware'].nunique()} devices, not one held out"
        )
    held_out = rows["hardware"].iloc[0]
    test = long[["predictor", "sample_id", "pred_ms", "true_ms"]].merge(
        rows[["sample_id", *WORKLOAD]], on="sample_id"
    )
    test = test.groupby(["predictor", *WORKLOAD], as_index=False, dropna=False)[
        ["pred_ms", "true_ms"]
    ].median()
    others = (
        measured[measured["hardware"] != held_out]
        .groupby(["hardware", *WORKLOAD], as_index=False, dropna=False)["iteration_time_ms"]
        .median()
    )
    pairs = test.merge(others, on=WORKLOAD)
    pairs = pairs.assign(
        held_out=held_out,
        log_true=np.log(pairs["true_ms"] / pairs["iteration_time_ms"]),
        log_pred=np.log(pairs["pred_ms"] / pairs["iteration_time_ms"]),
    )
    return pairs


def order_scores(pairs: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Share of pairs ordered right, by measured gap, with the number of pairs."""
    out = {}
    for name, gap in GAPS.items():
        part = pairs[pairs["log_true"].abs() >= gap]
        right = np.sign(part["log_pred"]) == np.sign(part["log_true"])
        out[name] = {
            "ordered_right": float(right.mean()) if len(part) else float("nan"),
            "pairs": int(len(part)),
        }
    return out


def fastest_pick(pairs: pd.DataFrame) -> dict[str, float]:
    """Per workload with the held-out GPU and >= 2 others measured: is the fastest device picked right?"""
    right, total = 0, 0
    for _, group in pairs.groupby([*WORKLOAD, "held_out"], dropna=False):
        if len(group) < 2:
            continue
        others = group["iteration_time_ms"].to_numpy()
        truly_fastest = group["true_ms"].iloc[0] < others.min()
        picked = group["pred_ms"].iloc[0] < others.min()
        right += int(truly_fastest == picked)
        total += 1
    return {"picked_right": right / total if total else float("nan"), "workloads": total}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--jobs", nargs="+", required=True, help="leave-one-GPU-out job folders (predictions.csv)"
    )
    parser.add_argument(
        "--store", nargs="+", required=True, help="sample stores holding every GPU's measurements"
    )
    parser.add_argument(
        "--out", required=True, help="results JSON; this run goes under --benchmark, other keys kept"
    )
    parser.add_argument("--benchmark", required=True, help="the key of this run in --out, e.g. torchvision")
    args = parser.parse_args()

    measured = pd.concat(
        [SampleStore(s, readonly=True).read(status="ok") for s in args.store], ignore_index=True
    )
    pairs = pd.concat([job_pairs(Path(job), measured) for job in args.jobs], ignore_index=True)
    results: dict[str, dict] = {"jobs": [str(j) for j in args.jobs], "stores": args.store, "predictors": {}}
    for predictor, part in pairs.groupby("predictor"):
        per_gpu = {gpu: order_scores(g) for gpu, g in part.groupby("held_out")}
        results["predictors"][predictor] = {
            "pooled": order_scores(part),
            "mean_over_held_out_gpus": {
                name: float(np.nanmean([s[name]["ordered_right"] for s in per_gpu.values()])) for name in GAPS
            },
            "per_held_out_gpu": per_gpu,
            "fastest_pick": fastest_pick(part),
        }
    out = Path(args.out)
    everything = json.loads(out.read_text()) if out.exists() else {}
    everything[args.benchmark] = results
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(everything, indent=1) + "\n")

    print(f"{'predictor':<12} " + " ".join(f"{name:>24}" for name in GAPS) + f" {'fastest picked':>16}")
    for predictor, r in sorted(
        results["predictors"].items(), key=lambda kv: -kv[1]["pooled"]["all pairs"]["ordered_right"]
    ):
        cells = [f"{s['ordered_right']:>17.1%} ({s['pairs']:>4})" for s in r["pooled"].values()]
        pick = r["fastest_pick"]
        print(
            f"{predictor:<12} " + " ".join(cells) + f" {pick['picked_right']:>9.1%} ({pick['workloads']:>3})"
        )


if __name__ == "__main__":
    run_script(main)
