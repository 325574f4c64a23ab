"""Checkpoints on every row of one store, by model kind, precision and optimizer (their own training rows included).

For comparing how two shipped checkpoints fit a small store both learned, e.g. the H200 rows:

    .venv/bin/python experiments/all_sources/store_rows.py datasets/h200 \\
        --checkpoint v20=/tmp/v20.ckpt --checkpoint v23=gnnperf/predictor/shipped/predictor.ckpt \\
        --out experiments/all_sources/results_v23_v20_h200_rows.json

Each row is predicted as ``gnnperf predict`` would without the update floor (the network's step, as the scores of
``gnnperf-train`` are); a model kind is the reference's scheme (``timm``, ``zoo``, ...).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError, run_script
from gnnperf.eval.metrics import regression_metrics
from gnnperf.predict import Predictor, Query

GROUP = ["kind", "precision", "optimizer"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--checkpoint", action="append", required=True, help="NAME=PATH, once per checkpoint")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    named = dict(c.split("=", 1) for c in args.checkpoint if "=" in c)
    if len(named) != len(args.checkpoint):
        raise GnnperfError("--checkpoint takes NAME=PATH")
    rows = SampleStore(args.store, readonly=True).read()
    queries = [Query.from_sample(r) for _, r in rows.iterrows()]
    rows = rows.assign(kind=rows.model_ref.str.split(":").str[0])
    out: dict = {"store": str(args.store), "checkpoints": named, "n": len(rows), "all": {}, "groups": []}
    true = rows.iteration_time_ms.to_numpy()
    for name, path in named.items():
        predicted = Predictor.from_checkpoint(path).predict(queries, update_floor=False)
        rows[name] = [r["iteration_time_ms"] for r in predicted]
        out["all"][name] = round(regression_metrics(rows[name], true)["mape"], 2)
    for key, g in rows.groupby(GROUP):
        entry = dict(zip(GROUP, key, strict=True), n=len(g))
        for name in named:
            entry[name] = {
                "mape": round(regression_metrics(g[name], g.iteration_time_ms)["mape"], 2),
                "mean_measured_over_predicted": round(float((g.iteration_time_ms / g[name]).mean()), 3),
            }
        out["groups"].append(entry)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}: MAPE " + ", ".join(f"{n} {m}" for n, m in out["all"].items()))


if __name__ == "__main__":
    run_script(main)
