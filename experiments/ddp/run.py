"""Check the composed DistributedDataParallel estimate on the one data-parallel measurement of any source here.

NeuSight's ``label/NVIDIA_A100-SXM4-40GB/gpt2_large-train-1024-4-dp4.json``: GPT-2 large (774 M parameters), sequence
1024, batch 4, forward + backward without an optimizer step, fp32 with TF32 off, four A100-SXM4-40GB GPUs run
data-parallel by Megatron-LM (its own GPT, not the HuggingFace model the single-GPU labels timed), 452.3 ms. NeuSight
does not record how the batch of 4 splits over the GPUs; 1 per GPU is the only reading its time allows (the
HuggingFace model at batch 4 on one A100 80GB PCIe took 1,636 ms, at batch 1 524 ms), and both are scored.

For each reading, the shipped predictor's DDP composition (``--parallel ddp``), its learned DataParallel
prediction (``--parallel dp``: floored at the one-device step, and the network's own) and the one-device step
alone; for context, the same predictor on the single-GPU training labels of the same model (A100 80GB PCIe and the
other GPUs), which it learned from.

Second, the weak scaling NVIDIA published for its ResNet-50 v1.5 PyTorch recipe (:data:`DLE_RESNET50`; DDP, 112 or
256 images per GPU, DALI decoding on the CPU): the measured 8-GPU over 1-GPU iteration time (8 x the one-GPU throughput
over the eight-GPU one) beside the composed DDP's, and the predicted one-GPU throughput beside the measured.

    .venv/bin/python experiments/ddp/run.py --neusight ../shared/external/neusight --out experiments/ddp/results.json
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path

import pandas as pd

from gnnperf.hardware.table import canonical_name
from gnnperf.predict import Predictor, Query

# NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "Training performance
# results" (pytorch-21.03 NGC container; DGX A100 80GB and DGX-1 16GB/32GB): images/s on 1 and on 8 GPUs; the batch
# per GPU and the layout from the recipe's PyTorch/Classification/ConvNets/configs.yml (AMP: 256, NHWC; A100 TF32:
# 256; V100 FP32: 112), which the repository may have changed after those runs.
DLE_SOURCE = (
    "github.com/NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets/resnet50v1.5/README.md and "
    "PyTorch/Classification/ConvNets/configs.yml"
)
DLE_RESNET50 = [  # (hardware, precision, batch per GPU, memory format, images/s on 1 GPU, on 8)
    ("a100-sxm4-80gb", "tf32", 256, "contiguous", 938, 7248),
    ("a100-sxm4-80gb", "amp_fp16", 256, "channels_last", 2470, 16621),
    ("v100-sxm2-16gb", "fp32", 112, "contiguous", 367, 2855),
    ("v100-sxm2-16gb", "amp_fp16", 256, "channels_last", 1200, 8322),
    ("v100-sxm2-32gb", "fp32", 112, "contiguous", 356, 2766),
    ("v100-sxm2-32gb", "amp_fp16", 256, "channels_last", 1156, 8056),
]


def dle_scaling(predictor: Predictor) -> list[dict]:
    """The published 8-GPU/1-GPU iteration-time ratios beside the composed DDP's (see the module docstring)."""
    queries = [
        Query("torchvision:resnet50", hw, batch, precision=precision, memory_format=layout)
        for hw, precision, batch, layout, _, _ in DLE_RESNET50
    ]
    ones = predictor.predict(queries)
    eights = predictor.predict([replace(q, num_devices=8, parallel="ddp") for q in queries])
    out = []
    for row, q, one, eight in zip(DLE_RESNET50, queries, ones, eights, strict=True):
        one_img_s, eight_img_s = row[4], row[5]
        measured = 8 * one_img_s / eight_img_s
        composed = eight["iteration_time_ms"] / one["iteration_time_ms"]
        predicted_img_s = q.batch_size / one["iteration_time_ms"] * 1000
        out.append(
            {
                "hardware": q.hardware,
                "precision": q.precision,
                "batch_per_gpu": q.batch_size,
                "memory_format": q.memory_format,
                "measured_img_s": [one_img_s, eight_img_s],
                "measured_8_over_1_iteration": round(measured, 3),
                "ddp_8_over_1_iteration": round(composed, 4),
                "ddp_allreduce_ms": round(eight["ddp"]["allreduce_ms"], 3),
                "ddp_exposed_ms": round(eight["ddp"]["exposed_allreduce_ms"], 3),
                "predicted_one_gpu_img_s": round(predicted_img_s),
                # predicted / measured one-GPU iteration time, less 1
                "one_gpu_error": round(one_img_s / predicted_img_s - 1, 4),
            }
        )
        print(
            f"DLE {q.hardware} {q.precision}: 8/1 iteration measured {measured:.3f}, composed {composed:.4f}; "
            f"one GPU {predicted_img_s:.0f} img/s predicted, {one_img_s} measured"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--neusight", type=Path, default=Path("../shared/external/neusight"))
    parser.add_argument("--checkpoint", default=None, help="default: the shipped predictor")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    labels = pd.read_csv(args.neusight / "e2e_labels_index.csv")
    predictor = Predictor.from_checkpoint(args.checkpoint)
    config = (args.neusight / "data" / "DLmodel_configs" / "gpt2_large.json").resolve()
    model = f"hf:{config}?attn_implementation=eager"
    dp = labels[(labels.model == "gpt2_large") & (labels.option == "dp4")].iloc[0]
    measured, n = float(dp.e2e_latency_ms), 4
    base = Query(model, "a100-sxm4-40gb", 1, input_shape=(int(dp.seqlen),), timed="fwd+bwd", optimizer="none")

    readings = {}
    for per_gpu in (int(dp.batch_size) // n, int(dp.batch_size)):
        one = replace(base, batch_size=per_gpu)
        rows = predictor.predict(
            [one, replace(one, num_devices=n, parallel="ddp"), replace(one, num_devices=n)]
        )
        step, ddp, learned_dp = (r["iteration_time_ms"] for r in rows)
        readings[f"{per_gpu}_per_gpu"] = {
            "one_device_step_ms": round(step, 2),
            "ddp_ms": round(ddp, 2),
            "ddp_error": round(ddp / measured - 1, 4),
            "ddp_all_reduce": {
                k: round(v, 3) if isinstance(v, float) else v for k, v in rows[1]["ddp"].items()
            },
            "dataparallel_ms": round(learned_dp, 2),
            "dataparallel_error": round(learned_dp / measured - 1, 4),
            "dataparallel_outside_training_range": rows[2]["outside_training_range"],
            # the network's own DataParallel time where the device floor raised it to the one-device step's
            "dataparallel_network_ms": round(rows[2].get("unfloored_ms", learned_dp), 2),
        }
        print(
            f"{per_gpu} per GPU: step {step:.1f} ms, DDP {ddp:.1f}, DataParallel {learned_dp:.1f}; measured {measured:.1f}"
        )

    single = labels[(labels.model == "gpt2_large") & (labels["mode"] == "train") & labels.option.isna()]
    queries = [
        replace(base, hardware=canonical_name(r.device), batch_size=int(r.batch_size))
        for _, r in single.iterrows()
    ]
    context = []
    for (_, r), q, row in zip(single.iterrows(), queries, predictor.predict(queries), strict=True):
        hardware = q.hardware
        context.append(
            {
                "hardware": hardware,
                "batch_size": int(r.batch_size),
                "measured_ms": round(float(r.e2e_latency_ms), 2),
                "predicted_ms": round(row["iteration_time_ms"], 2),
                "error": round(row["iteration_time_ms"] / float(r.e2e_latency_ms) - 1, 4),
            }
        )
        print(
            f"  one GPU {hardware} batch {r.batch_size}: {row['iteration_time_ms']:.1f} ms, measured {r.e2e_latency_ms:.1f}"
        )
    result = {
        "measurement": {
            "source": "neusight",
            "file": str(dp.source_json),
            "model": "gpt2_large",
            "seq_len": int(dp.seqlen),
            "batch_size": int(dp.batch_size),
            "num_devices": n,
            "hardware": "a100-sxm4-40gb",
            "timed": "fwd+bwd (no optimizer), fp32, TF32 off; Megatron-LM data parallel",
            "ms": round(measured, 2),
        },
        "checkpoint": os.path.relpath(predictor.path),
        "readings": readings,
        "single_gpu_labels_of_the_model": context,
        "deeplearningexamples_resnet50": {
            "source": DLE_SOURCE,
            "rows": dle_scaling(predictor),
        },
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
