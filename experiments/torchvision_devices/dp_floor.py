"""Is a DataParallel step on several GPUs ever faster than on one, measured or predicted? (the device floor)

Measured: every (model, GPU, precision, batch per GPU, software) of the torchvision GPU benchmark timed on one GPU
and on more, the several-GPU step over the one-GPU step. Predicted by a checkpoint without the floor
(``Predictor.predict(..., device_floor=False)``): a grid of CNNs and transformers on five GPUs, two precisions,
three batches and 2/4/8 GPUs, each against the same query on one GPU; and the benchmark's multi-GPU training rows
with and without the floor.

    .venv/bin/python experiments/torchvision_devices/dp_floor.py --store .cache/stores/torchvision \
        --out experiments/torchvision_devices/results_dp_floor.json
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from gnnperf.data.store import SampleStore
from gnnperf.predict import Predictor, Query

STEP = ["model_ref", "hardware", "precision", "mode", "timed", "batch_size", "input_shape", "software"]
GRID_MODELS = [
    ("timm:resnet50", None),
    ("timm:vit_base_patch16_224", None),
    ("torchvision:vgg16", None),
    ("torchvision:mobilenet_v2", None),
    ("hf:gpt2?attn_implementation=eager&class=GPT2LMHeadModel", (512,)),
    ("hf:bert?attn_implementation=eager&class=BertForMaskedLM", (128,)),
]
GRID_GPUS = ("a100-sxm4-40gb", "rtx-3090", "titan-rtx", "v100-pcie-32gb", "h100-sxm")


def measured_ratios(rows: pd.DataFrame) -> dict:
    one = rows[rows.num_devices == 1].set_index(STEP).iteration_time_ms.rename("one_ms")
    multi = rows[rows.num_devices > 1].join(one, on=STEP).dropna(subset=["one_ms"])
    ratio = multi.iteration_time_ms / multi.one_ms
    return {
        "pairs": len(multi),
        "faster_than_one_gpu": int((ratio < 1).sum()),
        "ratio_min": round(float(ratio.min()), 3),
        "ratio_median": round(float(ratio.median()), 3),
        "ratio_max": round(float(ratio.max()), 3),
    }


def grid(predictor: Predictor) -> dict:
    queries = [
        Query(model, gpu, batch, input_shape=shape, precision=precision, num_devices=n)
        for model, shape in GRID_MODELS
        for gpu in GRID_GPUS
        for precision in ("fp32", "amp_fp16")
        for batch in (1, 12, 64)
        for n in (1, 2, 4, 8)
    ]
    ms = [r["iteration_time_ms"] for r in predictor.predict(queries, device_floor=False)]
    one = {replace(q, num_devices=1): t for q, t in zip(queries, ms, strict=True) if q.num_devices == 1}
    faster = [
        {"model": q.model, "hardware": q.hardware, "precision": q.precision, "batch_size": q.batch_size,
         "num_devices": q.num_devices, "over_one_gpu": round(t / one[replace(q, num_devices=1)], 3)}
        for q, t in zip(queries, ms, strict=True)
        if q.num_devices > 1 and t < one[replace(q, num_devices=1)]
    ]  # fmt: skip
    return {
        "multi_gpu_queries": sum(q.num_devices > 1 for q in queries),
        "faster_than_one_gpu": len(faster),
        "models_faster": sorted({f["model"] for f in faster}),
        "rows": faster,
    }


def on_rows(predictor: Predictor, rows: pd.DataFrame) -> dict:
    multi = rows[(rows.num_devices > 1) & (rows["mode"] == "train") & (rows.precision != "fp64")]
    queries = [Query.from_sample(r) for _, r in multi.iterrows()]
    true = multi.iteration_time_ms.to_numpy()
    without, with_ = (
        np.array([r["iteration_time_ms"] for r in predictor.predict(queries, device_floor=floor)])
        for floor in (False, True)
    )
    mape = lambda pred: round(float(np.mean(np.abs(pred / true - 1)) * 100), 2)  # noqa: E731
    return {
        "rows": len(multi),
        "without_floor": mape(without),
        "with_floor": mape(with_),
        "rows_changed": int((without != with_).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="the torchvision benchmark's sample store")
    parser.add_argument("--checkpoint", default=None, help="default: the shipped predictor")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rows = SampleStore(args.store, readonly=True).read(status="ok")
    predictor = Predictor.from_checkpoint(args.checkpoint)
    result = {
        "checkpoint": os.path.relpath(predictor.path),
        "measured": measured_ratios(rows),
        "grid_without_floor": grid(predictor),
        "benchmark_multi_gpu_training_rows_mape": on_rows(predictor, rows),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "grid_without_floor"}, indent=1))
    print("grid:", {k: v for k, v in result["grid_without_floor"].items() if k != "rows"})
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
