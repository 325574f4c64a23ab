"""Predictions monotone in the batch: how often the network predicts a larger batch faster, and what each fix costs.

1. A grid (models x GPUs x precisions x batches 1-256, training steps): how many doublings of the batch the network
   predicts faster than the smaller batch, and by how much (``batch_cap=False``); and how many with the cap.
2. The test part of the checkpoint's own training run (``predictions.csv`` of the ``gnnperf-train`` job): every
   row predicted again at its batch and at batches 1-4096, then made monotone in the batch three ways: ``floor``
   (at least every smaller power of two's prediction), ``cap`` (at most every larger one's, up to 4096: what
   ``Predictor.predict`` does, ``gnnperf/predictor/batch_cap.py``), ``isotonic`` (the least-squares
   non-decreasing fit in log space over the powers of two and the row's batch); MAPE per source and batch range,
   and how many rows each changed. The network's predictions must reproduce the job's, and ``cap``
   ``Predictor.predict``'s (both checked).

    .venv/bin/python experiments/batch_monotone/run.py --job multirun/all_sources_v13 \\
        --store datasets/cpu .cache/stores/timm .cache/stores/torchvision .cache/stores/neusight datasets/h200 \\
        --out experiments/batch_monotone/results.json
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.isotonic import isotonic_regression

from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError, run_script
from gnnperf.eval.compare import read_predictions
from gnnperf.eval.metrics import regression_metrics
from gnnperf.predict import Predictor, Query

MODELS = [
    "timm:resnet50",
    "timm:vit_base_patch16_224",
    "timm:efficientnet_b0",
    "timm:convnext_tiny",
    "timm:mobilenetv3_large_100",
    "torchvision:densenet121",
    "hf:../shared/external/neusight/data/DLmodel_configs/bert.json?attn_implementation=eager",
]
GPUS = ["a100-sxm4-40gb", "h100-sxm", "rtx-3090", "v100-sxm2-16gb", "t4", "h200"]
PRECISIONS = ["fp32", "amp_fp16"]
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
SMALL = 16  # "small batch" rows: at most this


def grid(predictor: Predictor, models: list[str]) -> dict:
    """Doublings of the batch that the network predicts faster, by the smaller batch, with the worst ratio."""
    steps = list(itertools.product(models, GPUS, PRECISIONS))
    queries = [Query(m, h, b, precision=p) for m, h, p in steps for b in BATCHES]
    ms = np.array([r["iteration_time_ms"] for r in predictor.predict(queries, batch_cap=False)])
    by_step = ms.reshape(len(steps), len(BATCHES))
    capped = np.array([r["iteration_time_ms"] for r in predictor.predict(queries)]).reshape(by_step.shape)
    ratio = by_step[:, 1:] / by_step[:, :-1]
    faster = ratio < 1
    worst = np.unravel_index(np.argmin(ratio), ratio.shape)
    # how much faster the fastest larger batch is than batch 1's prediction, per step
    drop = by_step.min(axis=1) / by_step[:, 0]
    return {
        "models": models,
        "gpus": GPUS,
        "precisions": PRECISIONS,
        "batches": BATCHES,
        "doublings": int(ratio.size),
        "faster_doublings": int(faster.sum()),
        "faster_doublings_capped": int((capped[:, 1:] < capped[:, :-1]).sum()),
        "faster_by_smaller_batch": {str(b): int(faster[:, j].sum()) for j, b in enumerate(BATCHES[:-1])},
        "worst_ratio": float(ratio.min()),
        "worst": {
            "step": list(steps[worst[0]]),
            "from_batch": BATCHES[worst[1]],
            "to_batch": BATCHES[worst[1] + 1],
        },
        "steps_below_batch1": int((drop < 1).sum()),
        "steps": len(steps),
        "least_over_batch1": float(drop.min()),
        "least_over_batch1_step": {
            "step": list(steps[int(drop.argmin())]),
            "at_batch": BATCHES[int(by_step[int(drop.argmin())].argmin())],
        },
    }


LADDER = [2**k for k in range(13)]  # batches 1-4096 each test row is predicted at


def variants(own: float, batch: int, ladder_ms: dict[int, float]) -> dict[str, float]:
    """One row's prediction made monotone in the batch three ways, from the network's predictions at ``LADDER``."""
    below = [ladder_ms[b] for b in LADDER if b < batch]
    above = [ladder_ms[b] for b in LADDER if b > batch]
    batches = sorted({*LADDER, batch})
    seq = np.log([own if b == batch else ladder_ms[b] for b in batches])  # pool adjacent violators
    return {
        "network": own,
        "floor": max([own, *below]),  # at least every smaller batch's prediction
        "cap": min([own, *above]),  # at most every larger batch's prediction
        "isotonic": float(np.exp(isotonic_regression(seq, increasing=True)[batches.index(batch)])),
    }


def test_part(predictor: Predictor, job: Path, samples: pd.DataFrame) -> dict:
    """Every test row of ``job`` made monotone in the batch three ways; MAPE by source and batch range."""
    gnn = read_predictions(job).query("predictor == 'gnn'").set_index("sample_id")
    rows = samples.set_index("sample_id").loc[gnn.index].reset_index()
    queries = [Query.from_sample(r) for _, r in rows.iterrows()]
    asked = predictor.predict(queries, batch_cap=False)
    raw = np.array([r["iteration_time_ms"] for r in asked])
    # bf16 predicted as fp16 (precision_predicted_as) is the predict path's, not the job's
    same = np.array([r["precision_predicted_as"] is None for r in asked])
    if not np.allclose(raw[same], gnn["pred_ms"].to_numpy()[same], rtol=1e-3):
        raise GnnperfError(f"{job}: the checkpoint does not reproduce the job's test predictions")
    at_ms = np.array(
        [  # a query at a time: every ladder of the test part at once holds ~15 GB of network inputs
            [
                r["iteration_time_ms"]
                for r in predictor.predict([replace(q, batch_size=b) for b in LADDER], batch_cap=False)
            ]
            for q in queries
        ]
    )
    preds = pd.DataFrame(
        [
            variants(own, q.batch_size, dict(zip(LADDER, ladder, strict=True)))
            for own, q, ladder in zip(raw, queries, at_ms, strict=True)
        ]
    )
    # the cap as Predictor.predict applies it (powers of two above the batch)
    capped = np.array([predictor.predict(q)[0]["iteration_time_ms"] for q in queries])
    if not np.allclose(capped, preds["cap"], rtol=1e-3):
        raise GnnperfError("Predictor.predict's batch cap differs from the cap computed here")
    frame = pd.concat([rows, preds], axis=1).assign(small=rows["batch_size"] <= SMALL)
    out: dict = {"predicted_as_another_precision": int((~same).sum()), "ladder": LADDER}
    groups = [("all", frame)] + [(f"source={s}", g) for s, g in frame.groupby("source")]
    groups += [(f"batch<={SMALL}", frame[frame["small"]]), (f"batch>{SMALL}", frame[~frame["small"]])]
    groups += [(f"source={s}, batch<={SMALL}", g) for s, g in frame[frame["small"]].groupby("source")]
    for name, g in groups:
        truth = g["iteration_time_ms"].to_numpy()
        out[name] = {"n": len(g)}
        for v in ("network", "floor", "cap", "isotonic"):
            changed = ~np.isclose(g[v], g["network"], rtol=1e-6)
            out[name][v] = {
                "mape": regression_metrics(g[v].to_numpy(), truth)["mape"],
                "changed_rows": int(changed.sum()),
                # on the rows it changed: were they under- or over-predicted by the network?
                "changed_median_network_over_true": float((g["network"] / truth)[changed].median())
                if changed.any()
                else None,
            }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--job", type=Path, required=True, help="the gnnperf-train job folder (predictor.ckpt, predictions)"
    )
    p.add_argument(
        "--store", type=Path, nargs="+", required=True, help="the sample stores the job trained on"
    )
    p.add_argument("--models", nargs="+", default=MODELS, help="the grid's model references")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    predictor = Predictor.from_checkpoint(args.job / "predictor.ckpt")
    samples = pd.concat(
        [SampleStore(s, readonly=True).read(status="ok") for s in args.store], ignore_index=True
    )
    out = {"checkpoint": str(args.job / "predictor.ckpt"), "grid": grid(predictor, args.models)}
    out["test_part"] = test_part(predictor, args.job, samples)
    print(json.dumps(out, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
