"""Gradient accumulation on this CPU: accumulated steps timed beside their parts, and their live tensors profiled
beside the memory estimate.

Time. For each model, in one process at one thread, alternated ``REPEATS`` times: the step with its update
(zero_grad, forward, the harness's loss, backward, AdamW), the step without it (zero_grad, forward, loss, backward),
the accumulated step (zero_grad, ``K`` x (forward, loss, backward), AdamW) and the gradients' sum alone (each
gradient added in place into another, as autograd's AccumulateGrad does from the second pass on). Medians of each.
The composition of :mod:`gnnperf.predictor.accumulation` fed with the measured parts:
``with update + (K - 1) x (without update + sum)``, against the measured accumulated step.

Memory. :func:`gnnperf.measure.live_tensors.live_peak_mb` with ``accumulate=K`` (SGD): torch's memory profiler's live
tensors at their most in an accumulated step, against :func:`gnnperf.graph.memory.training_memory` with
``grad_accum=K`` less the GPU workspace, and the same for one pass.

Fully sharded. :func:`gnnperf.measure.live_tensors.fsdp_live_peak_mb` with ``accumulate``: FSDP2 over two gloo
processes, each repeated block a unit, the gradients reduce-scattered after every pass; rank 0's live tensors at their
most against ``training_memory(parallel="fsdp", grad_accum=K)``, one pass and K, each run ``FSDP_REPEATS`` times (the
profiled peak moves between runs where it is the end of the backward pass).

Without syncing every pass (``--parts fsdp_no_sync``): the same runs with FSDP2's ``set_requires_gradient_sync(False)``
for every pass but the last, in the model's fp32 and under ``MixedPrecisionPolicy(param_dtype=bf16)``, against
``training_memory(..., fsdp_policy=FsdpPolicy(param_dtype, sync_every_pass=False))`` and beside the estimate of the
same step syncing every pass. A tied weight (``--parts tied``): GPT-2 and BERT at batch 1, where the end of the
backward pass is the peak, one pass and K, unsharded, as ``memory``.

    .venv/bin/python experiments/grad_accum/run.py --out experiments/grad_accum/results.json \
        [--parts time,fsdp,fsdp_k,fsdp_no_sync,tied]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from gnnperf.graph.fsdp import FsdpPolicy
from gnnperf.graph.memory import training_memory
from gnnperf.measure.harness import TrainingLoss
from gnnperf.measure.live_tensors import fsdp_live_peak_mb, live_peak_mb
from gnnperf.measure.workload import Workload
from gnnperf.zoo.resolve import resolve

# (reference, per-sample input shape, batch); dropout off, so that the CPU's dropout (a noise tensor of the input's
# type) and the estimate's (the GPU kernel's one-byte mask) do not differ
MODELS = [
    ("hf:gpt2?attn_implementation=eager&class=GPT2LMHeadModel&n_layer=4&resid_pdrop=0&embd_pdrop=0"
     "&attn_pdrop=0", (256,), 2),
    ("hf:llama?attn_implementation=eager&class=LlamaForCausalLM&num_hidden_layers=4&hidden_size=512"
     "&intermediate_size=1408"
     "&num_attention_heads=8&vocab_size=32000", (256,), 2),
    ("timm:vit_small_patch16_224", (3, 224, 224), 4),
    ("timm:resnet50", (3, 160, 160), 4),
]  # fmt: skip
K = 4
REPEATS = 5
LLAMA = (
    "hf:llama?attn_implementation=eager&class=LlamaForCausalLM&num_hidden_layers=4&hidden_size=512"
    "&intermediate_size=1408"
    "&num_attention_heads=8&vocab_size=32000"
)
# (reference, per-sample input shape, batch): the peak at a later pass's start (LLaMA, GPT-2), at the end of the
# backward pass (LLaMA at batch 1: the root's gradients), inside the blocks' backward pass (ViT-S)
FSDP_RUNS = [
    (LLAMA, (256,), 4), (LLAMA, (64,), 1), (MODELS[0][0], (256,), 4), ("timm:vit_small_patch16_224", (3, 224, 224), 8),
]  # fmt: skip
FSDP_REPEATS = 2
# without syncing every pass: the peak in the backward pass (batch 4), at a later pass's start or the last pass's end
# (batch 1: the root's weights and gradients)
NO_SYNC_RUNS = [(LLAMA, (256,), 4), (LLAMA, (64,), 1), (MODELS[0][0], (256,), 4), (MODELS[0][0], (64,), 1)]
# a tied embedding at batch 1, where the peak is the end of the backward pass (its two gradients summed)
TIED_RUNS = [
    (MODELS[0][0], (64,), 1),
    ("hf:bert?attn_implementation=eager&class=BertForMaskedLM&num_hidden_layers=2&hidden_size=256"
     "&intermediate_size=512"
     "&num_attention_heads=4&hidden_dropout_prob=0&attention_probs_dropout_prob=0", (64,), 1),
]  # fmt: skip


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def time_parts(ref: str, shape: tuple[int, ...], batch: int) -> dict:
    spec = resolve(ref)
    model = spec.build().train()
    inputs = spec.make_inputs(batch, shape, generator=torch.Generator().manual_seed(0))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    loss = TrainingLoss(upcast=False)

    def passes(n: int, update: bool) -> None:
        opt.zero_grad(set_to_none=True)
        for _ in range(n):
            loss(model(*inputs)).backward()
        if update:
            opt.step()

    others = [torch.zeros_like(p) for p in params]

    def gradient_sum() -> None:
        for p, o in zip(params, others, strict=True):
            o.add_(p.grad)

    parts = {
        "with_update": lambda: passes(1, True),
        "without_update": lambda: passes(1, False),
        "accumulated": lambda: passes(K, True),
    }
    passes(1, True)  # the optimizer's state, and a warm-up
    times: dict[str, list[float]] = {name: [] for name in [*parts, "gradient_sum"]}
    for _ in range(REPEATS):
        for name, fn in parts.items():
            times[name].append(_timed(fn))
        times["gradient_sum"].append(_timed(gradient_sum))  # the gradients of the last step are still there
    ms = {name: statistics.median(v) for name, v in times.items()}
    composed = ms["with_update"] + (K - 1) * (ms["without_update"] + ms["gradient_sum"])
    return {
        **{f"{name}_ms": round(v, 2) for name, v in ms.items()},
        "composed_ms": round(composed, 2),
        "composed_over_measured": round(composed / ms["accumulated"], 3),
        "spread_ms": {name: [round(min(v), 2), round(max(v), 2)] for name, v in times.items()},
    }


def memory(ref: str, shape: tuple[int, ...], batch: int) -> dict:
    spec = resolve(ref)
    out = {}
    for k in (1, K):
        live = sum(live_peak_mb(spec.build(), spec.make_inputs(batch, shape), accumulate=k).values())
        est = training_memory(
            ref, Workload(batch_size=batch, input_shape=shape, optimizer="sgd"), grad_accum=k
        )
        out[f"k{k}"] = {
            "live_mb": round(live, 1),
            "estimate_mb": round(est.total_mb - est.workspace_mb, 1),
            "estimate_over_live": round((est.total_mb - est.workspace_mb) / live, 3),
            "peak_at": est.peak_at,
        }
    return out


def fsdp_memory(ref: str, shape: tuple[int, ...], batch: int) -> dict:
    workload = Workload(batch_size=batch, input_shape=shape, optimizer="sgd", num_devices=2)
    out = {}
    for k in (1, K):
        est = training_memory(ref, workload, parallel="fsdp", grad_accum=k)
        out[f"k{k}"] = _sharded_runs(ref, shape, batch, est, f"x{k}", accumulate=k)
    return out


def fsdp_no_sync_memory(ref: str, shape: tuple[int, ...], batch: int, param_dtype: str | None) -> dict:
    workload = Workload(batch_size=batch, input_shape=shape, optimizer="sgd", num_devices=2)
    how = {"parallel": "fsdp", "grad_accum": K}
    est = training_memory(ref, workload, **how, fsdp_policy=FsdpPolicy(param_dtype, sync_every_pass=False))
    synced = training_memory(ref, workload, **how, fsdp_policy=FsdpPolicy(param_dtype))
    options = {"accumulate": K, "param_dtype": param_dtype, "sync_every_pass": False}
    return {
        "param_dtype": param_dtype,
        **_sharded_runs(ref, shape, batch, est, "no sync", **options),
        "syncing_every_pass_estimate_mb": round(synced.total_mb - synced.workspace_mb, 1),
    }


def _sharded_runs(ref: str, shape: tuple[int, ...], batch: int, est, label: str, **options) -> dict:
    """``FSDP_REPEATS`` profiled runs on two processes (``fsdp_live_peak_mb(**options)``) beside the estimate."""
    live = []
    for _ in range(FSDP_REPEATS):
        try:
            peak = fsdp_live_peak_mb(ref, shape, batch, 2, attempts=10, **options)
            live.append(round(sum(peak.values()), 1))
        except RuntimeError as e:  # the profiler's own check failed on every run
            print(f"{ref} {label}: {str(e).splitlines()[0]}", flush=True)
    estimate = est.total_mb - est.workspace_mb
    return {
        "live_mb": live,
        "estimate_mb": round(estimate, 1),
        "estimate_over_live": [round(estimate / v, 3) for v in live],
        "peak_at": est.peak_at,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--parts",
        default="time,fsdp,fsdp_k",
        help="time (time and memory on one process), fsdp, fsdp_k, fsdp_no_sync, tied",
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    torch.set_num_threads(1)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}  # the parts not run are kept
    if "time" in parts:
        rows = []
        for ref, shape, batch in MODELS:
            row = {"model": ref, "input_shape": list(shape), "batch_size": batch, "micro_batches": K}
            row["time"] = time_parts(ref, shape, batch)
            row["memory"] = memory(ref, shape, batch)
            print(json.dumps(row), flush=True)
            rows.append(row)
        results["rows"] = rows
    if "fsdp" in parts:
        results["fsdp"] = []
        for ref, shape, batch in FSDP_RUNS:
            row = {
                "model": ref,
                "input_shape": list(shape),
                "batch_size": batch,
                "processes": 2,
                "micro_batches": K,
            }
            row["memory"] = fsdp_memory(ref, shape, batch)
            print(json.dumps(row), flush=True)
            results["fsdp"].append(row)
    if (
        "fsdp_k" in parts
    ):  # how the sharded peak moves with the number of passes: LLaMA at batch 4, one run each
        ref, shape, batch = FSDP_RUNS[0]
        results["fsdp_by_passes"] = {
            "model": ref,
            "input_shape": list(shape),
            "batch_size": batch,
            "live_mb": {
                k: round(sum(fsdp_live_peak_mb(ref, shape, batch, 2, attempts=10, accumulate=k).values()), 1)
                for k in (2, 3, 4, 5)
            },
        }
        print(json.dumps(results["fsdp_by_passes"]), flush=True)
    if "fsdp_no_sync" in parts:
        results["fsdp_no_sync"] = []
        for ref, shape, batch in NO_SYNC_RUNS:
            for param_dtype in (None, "bf16"):
                row = {"model": ref, "input_shape": list(shape), "batch_size": batch, "processes": 2}
                row["micro_batches"] = K
                row["memory"] = fsdp_no_sync_memory(ref, shape, batch, param_dtype)
                print(json.dumps(row), flush=True)
                results["fsdp_no_sync"].append(row)
    if "tied" in parts:
        results["tied"] = []
        for ref, shape, batch in TIED_RUNS:
            row = {"model": ref, "input_shape": list(shape), "batch_size": batch, "micro_batches": K}
            row["memory"] = memory(ref, shape, batch)
            print(json.dumps(row), flush=True)
            results["tied"].append(row)
    results["meta"] = {
        "threads": 1,
        "optimizer_timed": "adamw",
        "optimizer_profiled": "sgd",
        "torch": torch.__version__,
    }
    args.out.write_text(json.dumps(dict(sorted(results.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()
