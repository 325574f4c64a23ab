"""The only GPU steps measured with an Adam-type update here, against the predictor's step with and without one.

``datasets/h200`` timed 13 zoo models' training steps with AdamW on an H200 (this project's harness; the rest of
that store used SGD, and no model was timed with both). For each, a checkpoint predicts the same step with AdamW,
with SGD and without an update; scored against the measured AdamW step. The question: is the network's price of an
AdamW update over SGD (1.2x the step on the grid of ``run.py``, far above the update's memory traffic on a large
model) also what these measured steps show, or would the SGD step plus the traffic of the extra update
(:func:`gnnperf.predictor.optimizer_step.update_floor_ms`) do better?

    .venv/bin/python experiments/optimizer_step/gpu_adamw.py --store datasets/h200 \\
        --out experiments/optimizer_step/results_gpu_adamw.json
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from gnnperf.data.store import SampleStore
from gnnperf.errors import run_script
from gnnperf.graph.build import GraphCache, build_graph
from gnnperf.hardware.table import get_spec
from gnnperf.predict import Predictor, Query
from gnnperf.predictor.optimizer_step import update_floor_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="a GPU store with AdamW training rows")
    parser.add_argument("--checkpoint", default=None, help="default: the shipped predictor")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rows = SampleStore(args.store).read()
    rows = rows[(rows["mode"] == "train") & (rows["status"] == "ok") & (rows["optimizer"] == "adamw")]
    predictor = Predictor.from_checkpoint(args.checkpoint)
    queries = [Query.from_sample(r) for _, r in rows.iterrows()]
    predicted = {
        opt: np.array([r["iteration_time_ms"] for r in predictor.predict([replace(q, optimizer=opt, timed=timed) for q in queries])])
        for opt, timed in (("adamw", "fwd+bwd+opt"), ("sgd", "fwd+bwd+opt"), ("none", "fwd+bwd"))
    }  # fmt: skip

    def extra_ms(q: Query) -> float:  # the least time of what AdamW's update moves beyond SGD's
        params = build_graph(q.model, q.input_shape, cache=GraphCache()).param_count()
        bandwidth = get_spec(q.hardware).mem_bandwidth_gbs
        return update_floor_ms(params, "adamw", q.precision, bandwidth) - update_floor_ms(
            params, "sgd", q.precision, bandwidth
        )

    extra = np.array([extra_ms(q) for q in queries])
    predicted["sgd_plus_traffic"] = predicted["sgd"] + extra
    measured = rows["iteration_time_ms"].to_numpy()
    result = {
        "what": "AdamW training steps measured on an H200 (datasets/h200) against the checkpoint's step with AdamW, "
        "with SGD, without an update, and with SGD plus the least time of AdamW's extra update traffic",
        "checkpoint": str(predictor.path),
        "n": len(rows),
        "mape": {k: float(np.mean(np.abs(v / measured - 1)) * 100) for k, v in predicted.items()},
        "median_measured_over": {k: float(np.median(measured / v)) for k, v in predicted.items()},
        "max_extra_traffic_ms": float(extra.max()),
        "rows": [
            {"model": q.model, "batch_size": q.batch_size, "precision": q.precision, "measured_ms": float(m)}
            | {f"{k}_ms": float(v[i]) for k, v in predicted.items()}
            for i, (q, m) in enumerate(zip(queries, measured, strict=True))
        ],
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        json.dumps(
            {k: result[k] for k in ("n", "mape", "median_measured_over", "max_extra_traffic_ms")}, indent=1
        )
    )


if __name__ == "__main__":
    run_script(main)
