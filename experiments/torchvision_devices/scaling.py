"""A device count the predictor never trained on, beside two references built from the measured counts.

Per ``gnnperf-train`` job of ``experiment=torchvision_devices`` (one device count held out of the torchvision GPU
benchmark's DataParallel rows), the GNN and the run's baselines are scored on the held-out rows, beside:

- ``ideal scaling``: the same model, GPU and precision measured on one GPU (each device runs its own batch of 12 in
  parallel at no cost: what a user who assumes perfect data-parallel scaling would say);
- ``line through measured counts``: a least-squares line in the device count through the same model's measured
  times on that GPU and precision at the trained counts, evaluated at the held-out count. It uses exactly the
  measurements the GNN trained on for that model; a user who timed the model at the other counts would do this.

Both references use the rows of the same software set-up as the test row. Printed and written: MAPE (and median APE, share within 10%) per held-out count, overall and per GPU.

    .venv/bin/python experiments/torchvision_devices/scaling.py --jobs multirun/tv_devices/0 multirun/tv_devices/1 \\
        --store .cache/stores/torchvision --out experiments/torchvision_devices/results.json
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
from gnnperf.eval.metrics import regression_metrics

# one model's DataParallel series on one GPU, in one software set-up (the RTX 2080 Ti's multi-GPU rows are its
# PyTorch 1.4 run's; its three other set-ups have one-GPU rows only)
KEY = ["hardware", "software", "model_ref", "precision"]


def references(test: pd.DataFrame, measured: pd.DataFrame, held_out: int) -> pd.DataFrame:
    """``ideal scaling`` and ``line through measured counts`` for each test row (columns of ``test`` + the two)."""
    trained = measured[measured["num_devices"] != held_out]
    series = trained.groupby([*KEY, "num_devices"], as_index=False)["iteration_time_ms"].median()
    one = series[series["num_devices"] == 1].set_index(KEY)["iteration_time_ms"].rename("ideal scaling")

    def line(group: pd.DataFrame) -> float:
        if group["num_devices"].nunique() < 2:  # a set-up measured on one GPU only: no line
            return float("nan")
        slope, intercept = np.polyfit(group["num_devices"], group["iteration_time_ms"], 1)
        return float(intercept + slope * held_out)

    fitted = series.groupby(KEY).apply(line, include_groups=False).rename("line through measured counts")
    return test.join(one, on=KEY).join(fitted, on=KEY)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", nargs="+", required=True, help="torchvision_devices job folders")
    parser.add_argument("--store", required=True, help="the torchvision benchmark's sample store")
    parser.add_argument("--out", required=True, help="results JSON")
    args = parser.parse_args()

    measured = SampleStore(args.store, readonly=True).read(status="ok")
    measured = measured[(measured["mode"] == "train") & (measured["precision"] != "fp64")]
    results: dict[str, dict] = {"jobs": args.jobs, "store": args.store, "held_out": {}}
    for job in args.jobs:
        long = read_predictions(job)
        wide = long.pivot_table(index="sample_id", columns="predictor", values="pred_ms")
        rows = measured.set_index("sample_id").loc[wide.index]
        counts = rows["num_devices"].unique()
        if len(counts) != 1:
            raise SystemExit(f"error: {job} tests {len(counts)} device counts, not one held out")
        held_out = int(counts[0])
        test = rows[[*KEY, "iteration_time_ms"]].join(wide)
        test = test.groupby(KEY).median()  # one row per workload (a repeated measurement at its median)
        test = references(test.reset_index(), measured, held_out)
        predictors = [*wide.columns, "ideal scaling", "line through measured counts"]
        scores = {}
        for name in predictors:
            part = test.dropna(subset=[name])
            scores[name] = {
                "all": regression_metrics(part[name], part["iteration_time_ms"]),
                "per_gpu": {
                    gpu: regression_metrics(g[name], g["iteration_time_ms"])["mape"]
                    for gpu, g in part.groupby("hardware")
                },
            }
        results["held_out"][str(held_out)] = {"job": job, "workloads": len(test), "predictors": scores}
        print(f"\nheld out: {held_out} GPUs ({job}; {len(test)} workloads)")
        print(f"{'predictor':<30} {'MAPE':>6} {'median':>7} {'<=10%':>6}   per GPU MAPE")
        for name, s in sorted(scores.items(), key=lambda kv: kv[1]["all"]["mape"]):
            a = s["all"]
            gpus = "  ".join(f"{g} {m:.1f}" for g, m in s["per_gpu"].items())
            print(f"{name:<30} {a['mape']:>6.1f} {a['median_ape']:>7.1f} {a['within_10']:>6.0%}   {gpus}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
