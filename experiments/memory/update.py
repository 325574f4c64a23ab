"""The peaks after the activations are freed, measured on this CPU, beside the memory estimate with and without them.

Beyond the backward pass's peak (saved activations beside the gradients), two moments after the activations are
freed can set a training step's peak: the end of the backward pass, where a tied weight's two gradients are summed
(two more of its size for a moment), and the optimizer update, where Adam and AdamW as a GPU runs them (torch's
default ``foreach`` implementation there) take the square roots of all second moments at once, a temporary of the
weights' size; a CPU's default loops over the weights and holds two of one tensor's size. For models with more
weights than activations one of them is the step's peak.

For each model and optimizer a fresh process builds the model, then the project's harness
(``gnnperf.measure.harness.measure``, fp32, one thread) runs warm-up and timed steps; the process reports how far
they raised its peak resident memory (``ru_maxrss``) above what it held once the model was built: the step's
gradients, optimizer state, activations and temporaries. ``adamw_foreach`` runs AdamW with ``foreach=True`` (the
GPU's default implementation, on the CPU), ``adamw`` and ``sgd`` the harness's own settings (the CPU's loop).
Beside each: the estimate of that rise (:func:`gnnperf.graph.memory.training_memory` minus the weights and the
GPU workspace, which are not part of it here), and as it was before 2026-12-05 (``summed``: optimizer state,
activations and gradients, summed).

    .venv/bin/python experiments/memory/update.py --out experiments/memory/results_update.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

# (reference, per-sample input shape, batch): dropout off where the config has it, so that the CPU's dropout (a
# noise tensor of the input's type) and the estimate's (the GPU kernel's one-byte mask) do not differ
MODELS = [
    ("hf:gpt2?attn_implementation=eager&class=GPT2LMHeadModel&resid_pdrop=0&embd_pdrop=0"
     "&attn_pdrop=0", (128,), 1),
    ("hf:bert?attn_implementation=eager&class=BertForMaskedLM&hidden_dropout_prob=0"
     "&attention_probs_dropout_prob=0", (128,), 1),
    ("hf:llama?attn_implementation=eager&num_hidden_layers=4&hidden_size=1024&intermediate_size=2816"
     "&num_attention_heads=8"
     "&num_key_value_heads=8&vocab_size=32000", (128,), 1),
    ("zoo:mlp?activation=relu&depth=6&dropout=0.0&in_features=256&norm=layer&num_classes=100&width=4096", (256,), 8),
    ("timm:vgg16", (3, 224, 224), 1),
    ("timm:vit_base_patch16_224", (3, 224, 224), 1),
    ("timm:resnet50", (3, 224, 224), 1),
    ("timm:resnet50", (3, 224, 224), 16),  # activations well above the weights: the backward pass's peak
]  # fmt: skip
OPTIMIZERS = ["sgd", "adamw", "adamw_foreach"]
# glibc raises its mmap threshold after large frees, after which freed tensors stay in the heap and the resident
# size no longer follows the live tensors; a fixed threshold keeps every large tensor its own mapping
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
_MB = 2**20


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / _MB


def child(ref: str, shape: tuple[int, ...], batch: int, optimizer: str) -> dict:
    """One model's training steps in this process: the rise of the peak resident memory, in MB."""
    import torch

    from gnnperf.measure import harness
    from gnnperf.measure.workload import MeasureSettings, Workload
    from gnnperf.zoo.resolve import resolve

    if optimizer == "adamw_foreach":  # the harness's AdamW, in the implementation a GPU runs by default
        harness._OPTIMIZERS["adamw"] = lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True)
    spec = resolve(ref)
    workload = Workload(input_shape=shape, batch_size=batch, optimizer=optimizer.removesuffix("_foreach"))
    model = harness.build_model(spec, workload)
    settings = MeasureSettings(warmup=1, min_iters=3, max_iters=3, max_time_s=60.0, threads=1)
    before = _rss_mb()
    out = harness.measure(spec, workload, settings, model=model)
    if out["error"]:
        raise RuntimeError(out["error"])
    return {"peak_rise_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before}


def run_child(ref: str, shape: tuple[int, ...], batch: int, optimizer: str) -> dict:
    args = [sys.executable, __file__, "--child", json.dumps([ref, list(shape), batch, optimizer])]
    done = subprocess.run(args, capture_output=True, text=True, check=True, env={**os.environ, **MALLOC_ENV})
    return json.loads(done.stdout.strip().splitlines()[-1])


def estimate(ref: str, shape: tuple[int, ...], batch: int, optimizer: str) -> dict:
    """The estimated rise: the step's peak without the weights and the GPU workspace, with the update and without."""
    from gnnperf.graph.memory import training_memory
    from gnnperf.measure.workload import Workload

    m = training_memory(ref, Workload(input_shape=shape, batch_size=batch, optimizer=optimizer.split("_")[0]))
    resident = m.weights_mb + m.workspace_mb
    return {
        "weights_mb": m.weights_mb,
        "activations_mb": m.activations_mb,
        "update_mb": m.update_mb,
        "tied_gradients_mb": m.tied_gradients_mb,
        "estimate_mb": m.total_mb - resident,
        # as the estimate was before 2026-12-05: the backward pass's activations and gradients summed, nothing else
        "summed_mb": m.optimizer_mb + m.activations_mb + m.gradients_mb,
        "peak_at": m.peak_at,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        ref, shape, batch, optimizer = json.loads(args.child)
        print(json.dumps(child(ref, tuple(shape), batch, optimizer)))
        return
    rows = []
    for ref, shape, batch in MODELS:
        for optimizer in OPTIMIZERS:
            row = {"model": ref, "input_shape": list(shape), "batch_size": batch, "optimizer": optimizer}
            row |= run_child(ref, shape, batch, optimizer) | estimate(ref, shape, batch, optimizer)
            for key in ("estimate_mb", "summed_mb"):
                row[key.replace("_mb", "_ratio")] = row[key] / row["peak_rise_mb"]
            rows.append(row)
            print(
                f"{ref[:40]:40s} b{batch:<3d} {optimizer:14s} measured {row['peak_rise_mb']:7.0f} MB  "
                f"estimate {row['estimate_mb']:7.0f} ({row['estimate_ratio']:.2f})  "
                f"summed {row['summed_mb']:7.0f} ({row['summed_ratio']:.2f})  "
                f"peak at {row['peak_at']}",
                flush=True,
            )
    result = {
        "what": "peak resident memory rise of fp32 training steps on this CPU (harness, one thread, glibc mmap "
        "threshold fixed) against training_memory's estimate minus weights and workspace; adamw_foreach: AdamW "
        "with foreach=True, the GPU's default implementation",
        "rows": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
