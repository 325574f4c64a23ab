"""The same networks with the other fallback baseline: flops blend vs opcost blend, recomputed from one run.

A run trained with ``unseen_op_fallback=opcost`` writes the blended prediction (``gnn``), the network alone
(``gnn_no_fallback``) and both baselines' predictions for every test sample. The blend is
``log gnn = (1 - w) log net + w log baseline`` with one weight ``w`` per sample (the unseen op types' share of
roofline time, the same whichever baseline is blended), so ``w`` is recovered from the opcost blend and applied
to the flops baseline: both fallbacks scored on the same networks, without training twice (two training runs
differ: fold 4's network alone scored 70.0% in one and 109.9% in another).

    .venv/bin/python experiments/cpu_holdout_family/fallback_compare.py multirun/cpu_fb_opcost_a/0 \
        multirun/cpu_fb_opcost_a/1 multirun/cpu_fb_opcost_b/0 multirun/cpu_fb_opcost_b/1 \
        multirun/cpu_fb_opcost_b/2 --out experiments/cpu_holdout_family/results_v2_fallback_opcost.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from gnnperf.errors import run_script
from gnnperf.eval.compare import read_predictions


def _mape(pred: np.ndarray, true: np.ndarray) -> float:
    return round(float(100 * np.mean(np.abs(pred - true) / true)), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "jobs", type=Path, nargs="+", help="job folders of runs with unseen_op_fallback=opcost"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    jobs = {}
    for job in args.jobs:
        long = read_predictions(job)
        wide = long.pivot(index="sample_id", columns="predictor", values="pred_ms")
        true = long.groupby("sample_id").true_ms.first().reindex(wide.index)
        net = wide["gnn_no_fallback"] if "gnn_no_fallback" in wide else wide["gnn"]
        log_net, log_opc = np.log(net), np.log(wide["opcost"])
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(
                np.abs(log_opc - log_net) > 1e-9, (np.log(wide["gnn"]) - log_net) / (log_opc - log_net), 0.0
            )
        w = np.clip(np.nan_to_num(w), 0.0, 1.0)
        flops_blend = np.exp((1 - w) * log_net + w * np.log(wide["flops"]))
        jobs[str(job)] = {
            "network_alone": _mape(net.to_numpy(), true.to_numpy()),
            "flops_fallback": _mape(flops_blend.to_numpy(), true.to_numpy()),
            "opcost_fallback": _mape(wide["gnn"].to_numpy(), true.to_numpy()),
            "flops": _mape(wide["flops"].to_numpy(), true.to_numpy()),
            "opcost": _mape(wide["opcost"].to_numpy(), true.to_numpy()),
            "samples_blended": int((w > 1e-6).sum()),
            "n": len(true),
        }
        print(job, jobs[str(job)])
    mean = {k: round(float(np.mean([j[k] for j in jobs.values()])), 2) for k in next(iter(jobs.values()))}
    print("mean", mean)
    args.out.write_text(json.dumps({"jobs": jobs, "mean": mean}, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
