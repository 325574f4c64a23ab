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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--neusight", type=Path, default=Path("../shared/external/neusight"))
    parser.add_argument("--checkpoint", default=None, help="default: the shipped predictor")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    labels = pd.read_csv(args.neusight / "e2e_labels_index.csv")
    predictor = Predictor.from_checkpoint(args.checkpoint)
    config = (args.neusight / "data" / "DLmodel_configs" / "gpt2_large.json").resolve()
    model = f"hf:{config}"
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
    context = []
    for _, r in single.iterrows():
        hardware = canonical_name(r.device)
        (row,) = predictor.predict(replace(base, hardware=hardware, batch_size=int(r.batch_size)))
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
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
