"""Two checkpoints on the test rows that neither trained on: for comparing runs whose splits differ.

Each job folder is a finished ``gnnperf-train`` or ``gnnperf-eval`` run on the same test part (its
``predictions.csv``); each checkpoint lists its training rows (``train_sample_ids``, since 2026-12-03). The GNN rows
of both jobs are scored on the samples that are in both tables and in no checkpoint's training rows, in all and per
source. ``gnnperf-eval`` of an older checkpoint on a newer run's split warns how many of its rows it trained on;
this keeps the others.

    .venv/bin/python experiments/all_sources/unseen_by_both.py \\
        --job v19=multirun/all_sources_v19 --job v18=multirun/eval_v18_on_v19split \\
        --checkpoint multirun/all_sources_v19/predictor.ckpt /tmp/v18.ckpt \\
        --out experiments/all_sources/results_v19_v18_unseen_by_both.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gnnperf.errors import GnnperfError, run_script
from gnnperf.eval.compare import read_predictions
from gnnperf.eval.metrics import regression_metrics
from gnnperf.predictor.checkpoint import read_checkpoint


def trained_ids(path: str) -> set[str]:
    extras = read_checkpoint(path).get("gnnperf", {})
    if "train_sample_ids" not in extras:
        raise GnnperfError(
            f"{path} lists no training rows (train_sample_ids; checkpoints since 2026-12-03 do)"
        )
    return set(map(str, extras["train_sample_ids"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--job", action="append", required=True, help="NAME=JOB_DIR, twice or more")
    ap.add_argument(
        "--checkpoint", nargs="+", required=True, help="checkpoints whose training rows are left out"
    )
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    pairs = [j.partition("=") for j in args.job]
    jobs = {name: job for name, _, job in pairs}
    if len(jobs) < 2 or any(not (name and sep and job) for name, sep, job in pairs):
        raise GnnperfError(f"give two or more --job NAME=JOB_DIR with distinct names, got {args.job}")
    trained = set().union(*(trained_ids(c) for c in args.checkpoint))
    gnn = {}
    for name, job in jobs.items():
        p = read_predictions(job)
        gnn[name] = p[p["predictor"] == "gnn"].set_index("sample_id")
    common = set.intersection(*(set(t.index) for t in gnn.values())) - trained
    if not common:
        raise GnnperfError("no test row is in every job and in no checkpoint's training rows")
    rows = sorted(common)
    first = next(iter(gnn.values())).loc[rows]
    out: dict = {"jobs": jobs, "checkpoints": args.checkpoint, "n": len(rows), "all": {}, "per_source": {}}
    for name, table in gnn.items():
        t = table.loc[rows]
        out["all"][name] = regression_metrics(t["pred_ms"], first["true_ms"])
        for source in sorted(first["source"].unique()):
            part = first["source"] == source
            out["per_source"].setdefault(source, {"n": int(part.sum())})[name] = regression_metrics(
                t["pred_ms"][part], first["true_ms"][part]
            )
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    for name in jobs:
        m = out["all"][name]
        per = ", ".join(f"{s} {v[name]['mape']:.1f}" for s, v in out["per_source"].items())
        print(f"{name}: {len(rows)} rows, MAPE {m['mape']:.1f} (median {m['median_ape']:.1f}); {per}")


if __name__ == "__main__":
    run_script(main)
