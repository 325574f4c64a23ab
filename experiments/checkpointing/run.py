"""Activation checkpointing as the libraries apply it, measured on this CPU, beside gnnperf's estimate of it.

For each model, a training step (fwd + loss + bwd + SGD, fp32) is measured by the project's harness
(``gnnperf.measure.harness.measure``) twice, in a fresh process each: as built, and with the library's own
checkpointing switched on (transformers' ``activation_checkpointing_enable(use_reentrant=False)``, timm's
``set_grad_checkpointing()``). Each process reports the harness's median step time and how far the step raised the
process's peak resident memory above what it held once the model and inputs were built (``ru_maxrss``; the step's
gradients, SGD momentum, saved activations and temporaries). Beside them, gnnperf's estimate
(:func:`gnnperf.graph.memory.training_memory`, ``checkpointing=True``): the blocks it checkpoints, the activations
saved with and without, and the recompute, the blocks' share of the forward FLOPs. The step-time check: the
measured extra time against the blocks' forward pass (the measured forward time of the step x that share; the
harness times the forward alone in a third process).

    .venv/bin/python experiments/checkpointing/run.py --out experiments/checkpointing/results.json
    .venv/bin/python experiments/checkpointing/run.py --summarize experiments/checkpointing/results.json  # again,
        # with the current estimate's peaks
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

# (reference, per-sample input shape, batch): dropout off where the config has it, so that the CPU's dropout (a
# noise tensor of the input's type) and the estimate's (the GPU kernel's one-byte mask) do not differ
MODELS = [
    ("hf:gpt2?attn_implementation=eager&class=GPT2LMHeadModel&n_layer=6&resid_pdrop=0&embd_pdrop=0"
     "&attn_pdrop=0", (256,), 2),
    ("hf:bert?attn_implementation=eager&class=BertForMaskedLM&num_hidden_layers=6&hidden_dropout_prob=0"
     "&attention_probs_dropout_prob=0", (256,), 2),
    ("hf:llama?attn_implementation=eager&num_hidden_layers=4&hidden_size=512&intermediate_size=1408"
     "&num_attention_heads=8"
     "&num_key_value_heads=8&vocab_size=32000", (256,), 4),
    ("timm:vit_small_patch16_224", (3, 224, 224), 8),
    ("timm:resnet50", (3, 224, 224), 8),
    ("timm:convnext_tiny", (3, 224, 224), 4),
]  # fmt: skip
THREADS = 1


# glibc raises its mmap threshold after large frees, after which freed tensors stay in the heap and the resident
# size no longer follows the live tensors; a fixed threshold keeps every large tensor its own mapping
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
REPEATS = 3  # the timings alternate plain, checkpointed and forward this many times in one process
MODES = (("plain", False), ("checkpointed", True))


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def timed(spec, workload, model) -> dict:
    """One harness measurement of ``model``'s step (SGD with momentum, one thread); raises on a failed one."""
    from gnnperf.measure.harness import measure
    from gnnperf.measure.workload import MeasureSettings

    settings = MeasureSettings(
        warmup=1, min_iters=5, max_iters=20, max_time_s=6.0, target_rel_ci=0.02, threads=THREADS
    )
    out = measure(spec, workload, settings, model=model)
    if out["error"]:
        raise RuntimeError(out["error"])
    return out


def peak_rise(spec, workload, model) -> dict:
    """The step's time and how far it raised this process's peak resident size over what it held before."""
    before = _rss_mb()
    out = timed(spec, workload, model)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"ms": out["iteration_time_ms"], "peak_rise_mb": peak - before}


def child(ref: str, shape: tuple[int, ...], batch: int, mode: str) -> dict:
    """Measurements in this process. ``plain`` / ``checkpointed``: one step's peak resident memory rise (and its
    time); ``timing``: median step times, plain and checkpointed, and of the forward pass, alternated."""
    from gnnperf.graph.checkpointing import library_checkpointing
    from gnnperf.measure.harness import build_model
    from gnnperf.measure.workload import Workload
    from gnnperf.zoo.resolve import resolve

    spec = resolve(ref)
    workload = Workload(input_shape=shape, batch_size=batch, optimizer="sgd")
    model = build_model(spec, workload)
    if mode != "timing":
        library_checkpointing(model, mode == "checkpointed")
        return peak_rise(spec, workload, model)
    forward = replace(workload, timed="fwd", optimizer="none")
    times: dict[str, list[float]] = {"plain": [], "checkpointed": [], "forward": []}
    for _ in range(REPEATS):
        for name, w, on in (
            ("plain", workload, False),
            ("checkpointed", workload, True),
            ("forward", forward, False),
        ):
            library_checkpointing(model, on)
            times[name].append(timed(spec, w, model)["iteration_time_ms"])
    return {name: float(np.median(v)) for name, v in times.items()} | {"runs": times}


def run_child(ref: str, shape: tuple[int, ...], batch: int, mode: str, script: str = __file__) -> dict:
    """``script``'s ``child`` in a fresh process with glibc's mmap threshold fixed."""
    args = [sys.executable, script, "--child", json.dumps([ref, list(shape), batch, mode])]
    env = {**os.environ, **MALLOC_ENV}
    done = subprocess.run(args, capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def add_peaks(rows: list[dict]) -> None:
    """Each row's estimated peak rise, plain and checkpointed: ``training_memory``'s peak (the largest of the backward
    pass, a tied weight's gradients summed at its end, and the update) less the weights and the GPU workspace."""
    from gnnperf.graph.memory import training_memory
    from gnnperf.measure.workload import Workload

    for r in rows:
        workload = Workload(input_shape=tuple(r["input_shape"]), batch_size=r["batch_size"], optimizer="sgd")
        peaks = {mode: training_memory(r["model"], workload, checkpointing=on) for mode, on in MODES}
        r["estimate_mb"]["peak_rise"] = {
            mode: round(e.total_mb - e.weights_mb - e.workspace_mb, 1) for mode, e in peaks.items()
        }
        r["estimate_mb"]["peak_at"] = {mode: e.peak_at for mode, e in peaks.items()}


def summary(rows: list[dict]) -> dict:
    """Per model: estimated / measured peak rise and saving; the checkpointed step composed from the measured plain
    one (x (1 + the composition's share)) over the measured checkpointed one, less 1."""
    out = {}
    for r in rows:
        est, meas = r["estimate_mb"], r["measured_peak_rise_mb"]
        rise = {
            "plain": est["activations_plain"] + est["gradients_and_momentum"],
            "checkpointed": est["activations_checkpointed"] + est["gradients_and_momentum"],
        }
        composed_step = r["step_ms"]["plain"] + r["extra_ms"]["composed"]
        out[r["model"]] = {
            "estimated_over_measured_rise": {k: round(rise[k] / meas[k], 3) for k in rise},
            "measured_over_estimated_saving": round(
                r["saving_mb"]["measured"] / r["saving_mb"]["estimated"], 3
            ),
            "extra_over_blocks_forward": round(
                r["extra_ms"]["measured"] / r["extra_ms"]["blocks_forward"], 3
            ),
            "composed_checkpointed_step_error": round(composed_step / r["step_ms"]["checkpointed"] - 1, 4),
        }
        if "peak_rise" in est:
            peak = est["peak_rise"]
            out[r["model"]]["estimated_over_measured_peak_rise"] = {
                k: round(peak[k] / meas[k], 3) for k in peak
            }
            out[r["model"]]["peak_saving_mb"] = {
                "estimated": round(peak["plain"] - peak["checkpointed"], 1),
                "measured": r["saving_mb"]["measured"],
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--summarize", type=Path, help="recompute the summary of a results.json in place")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        ref, shape, batch, mode = json.loads(args.child)
        print(json.dumps(child(ref, tuple(shape), batch, mode)))
        return
    if args.summarize:
        result = json.loads(args.summarize.read_text())
        add_peaks(result["rows"])
        result["summary"] = summary(result["rows"])
        args.summarize.write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps(result["summary"], indent=1))
        return

    from gnnperf.graph.memory import training_memory
    from gnnperf.measure.workload import Workload
    from gnnperf.predictor.recompute import FORWARD_SHARE

    rows = []
    for ref, shape, batch in MODELS:
        est = training_memory(
            ref, Workload(input_shape=shape, batch_size=batch, optimizer="sgd"), checkpointing=True
        )
        ck = est.checkpointing
        memory = {mode: run_child(ref, shape, batch, mode) for mode in ("plain", "checkpointed")}
        timing = run_child(ref, shape, batch, "timing")
        held = est.gradients_mb + est.optimizer_mb  # what the step adds besides activations
        plain_mb, checked_mb = memory["plain"]["peak_rise_mb"], memory["checkpointed"]["peak_rise_mb"]
        row = {
            "model": ref,
            "input_shape": list(shape),
            "batch_size": batch,
            "blocks": ck.blocks,
            "recompute_share": round(ck.recompute_share, 4),
            "estimate_mb": {
                "activations_plain": round(ck.activations_plain_mb, 1),
                "activations_checkpointed": round(est.activations_mb, 1),
                "gradients_and_momentum": round(held, 1),
            },
            "measured_peak_rise_mb": {"plain": round(plain_mb, 1), "checkpointed": round(checked_mb, 1)},
            "saving_mb": {
                "estimated": round(ck.activations_plain_mb - est.activations_mb, 1),
                "measured": round(plain_mb - checked_mb, 1),
            },
            "step_ms": {"plain": round(timing["plain"], 2), "checkpointed": round(timing["checkpointed"], 2)},
            "forward_ms": round(timing["forward"], 2),
            "timing_runs_ms": {k: [round(v, 2) for v in runs] for k, runs in timing["runs"].items()},
            "extra_ms": {
                "measured": round(timing["checkpointed"] - timing["plain"], 2),
                # the blocks' forward pass, from the measured forward and the traced FLOP share
                "blocks_forward": round(timing["forward"] * ck.recompute_share, 2),
                # gnnperf's composition on a GPU: the forward's share of a step (NeuSight) x the FLOP share
                "composed": round(FORWARD_SHARE * ck.recompute_share * timing["plain"], 2),
            },
        }
        rows.append(row)
        print(json.dumps(row))
    add_peaks(rows)
    result = {
        "machine": "this project's 2-core x86-64 VM, CPU, fp32, " + f"{THREADS} thread",
        "what": "one training step (fwd + CE loss + bwd + SGD with momentum), the project's harness; peak RSS rise "
        "above the built model and inputs; estimate: gnnperf.graph.memory.training_memory(checkpointing=True)",
        "summary": summary(rows),
        "rows": rows,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
