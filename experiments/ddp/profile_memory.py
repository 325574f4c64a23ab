"""DistributedDataParallel's memory on each device, by torch's memory profiler in a real DDP run on this CPU, beside
the estimate.

Each model runs SGD training steps in two processes on this CPU (``torchrun``, the gloo backend) wrapped in
``torch.nn.parallel.DistributedDataParallel`` with its defaults (25 MB buckets, ``gradient_as_bucket_view=False``:
the buckets a second copy of the gradients, held from the start); rank 0's live tensors at their most in the third
step (:func:`gnnperf.measure.live_tensors.ddp_live_peak_mb`; DDP rebuilds its buckets in the second) are set beside
``training_memory(..., parallel="ddp")`` less the GPU workspace, and beside the estimate without the buckets. The
accumulated runs sum 4 passes' gradients with every pass but the last under ``no_sync``.

    .venv/bin/python experiments/ddp/profile_memory.py --out experiments/ddp/results_memory.json

``--bucket-view``: ``gradient_as_bucket_view=True`` (``--ddp-bucket-view``), the gradients views into the buckets.

    .venv/bin/python experiments/ddp/profile_memory.py --bucket-view --out experiments/ddp/results_memory_bucket_view.json

``--checkpointing``: the model library's activation checkpointing of the blocks (``--activation-checkpointing``).

    .venv/bin/python experiments/ddp/profile_memory.py --checkpointing --out experiments/ddp/results_memory_checkpointing.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gnnperf.graph.memory import training_memory
from gnnperf.measure.live_tensors import ddp_live_peak_mb
from gnnperf.measure.workload import Workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fsdp"))
from profile_fsdp import GPT2, LLAMA  # noqa: E402 - the sharded runs' models, so the two studies compare

# (reference, per-sample input shape, batch, passes): the peak at the backward pass's start (LLaMA at batch 4), the
# gradients above the activations (batch 1), a tied embedding's sum (GPT-2 at batch 1), a ViT and a CNN; accumulated
RUNS = [
    (LLAMA, (256,), 4, 1), (LLAMA, (64,), 1, 1), (GPT2, (64,), 1, 1),
    ("timm:vit_small_patch16_224", (3, 224, 224), 8, 1), ("timm:resnet50", (3, 160, 160), 4, 1),
    (LLAMA, (256,), 4, 4), (GPT2, (64,), 1, 4),
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--bucket-view", action="store_true", help="gradient_as_bucket_view=True")
    parser.add_argument("--checkpointing", action="store_true", help="activation checkpointing")
    args = parser.parse_args()
    view, ck = args.bucket_view, args.checkpointing
    rows = []
    for ref, shape, batch, k in RUNS:
        row = {"model": ref, "input_shape": list(shape), "batch_size": batch, "processes": 2, "passes": k}
        try:
            live = ddp_live_peak_mb(
                ref,
                shape,
                batch,
                2,
                attempts=10,
                accumulate=k,
                sync_every_pass=k == 1,
                bucket_view=view,
                checkpointing=ck,
            )
        except RuntimeError as e:  # the profiler's own check failed on every run
            row["failed"] = str(e).splitlines()[0]
            print(row["failed"], flush=True)
            rows.append(row)
            continue
        workload = Workload(input_shape=shape, batch_size=batch, optimizer="sgd", num_devices=2)
        estimate = training_memory(
            ref, workload, parallel="ddp", checkpointing=ck, grad_accum=k, ddp_bucket_view=view
        )
        live_mb = sum(live.values())
        est_mb = estimate.total_mb - estimate.workspace_mb
        row |= {
            "peak_live_mb": live,
            "live_mb": round(live_mb, 1),
            "estimate_mb": round(est_mb, 1),
            "ddp_buckets_mb": round(estimate.ddp_buckets_mb, 1),
            "peak_at": estimate.peak_at,
            "estimate_over_live": round(est_mb / live_mb, 3),
            "without_buckets_over_live": round((est_mb - estimate.ddp_buckets_mb) / live_mb, 3),
        }
        print(json.dumps({k: v for k, v in row.items() if k != "peak_live_mb"}), flush=True)
        rows.append(row)
    what = (
        __doc__.splitlines()[0]
        + " (gradient_as_bucket_view=True)" * view
        + " (activation checkpointing)" * ck
    )
    args.out.write_text(json.dumps({"what": what, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
