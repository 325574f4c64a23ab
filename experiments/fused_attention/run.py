"""sdpa's fused attention against eager attention, measured on this CPU, beside the composed prediction of each.

An ``&attn_implementation=sdpa`` model's time is the eager graph's prediction with the eager attention ops' share
replaced by the fused kernel's composed price (``gnnperf/predictor/fused_attention.py``). On a GPU one published run
checks it (``experiments/fsdp``); on this machine's CPU both can be measured: PyTorch runs sdpa there as its own
fused flash kernel (``_scaled_dot_product_flash_attention_for_cpu``, forward and backward), eager attention as its
MatMuls and Softmax. For LLaMA shapes at growing sequence lengths, the project's harness times the training step
(zero_grad, forward, cross-entropy, backward, SGD with momentum; fp32, one thread) with each attention, alternately,
and the shipped predictor predicts both on the CPU entry it learned this machine's rows from (``cpu-intel-xeon-1t``).

    .venv/bin/python experiments/fused_attention/run.py --out experiments/fused_attention/results.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

LLAMA = (
    "hf:llama?num_hidden_layers=4&hidden_size=512&intermediate_size=1408&num_attention_heads=8"
    "&num_key_value_heads=8&vocab_size=2000"
)
CASES = [(256, 4), (512, 2), (1024, 1), (2048, 1)]  # (tokens, batch)
HARDWARE = "cpu-intel-xeon-1t"
REPEATS = 2  # eager and sdpa alternated this many times; the median of each


def measure(ref: str, tokens: int, batch: int) -> dict[str, float]:
    """Median harness step times (ms) of the model with eager and with sdpa attention, alternated."""
    from gnnperf.measure.harness import build_model, measure
    from gnnperf.measure.workload import MeasureSettings, Workload
    from gnnperf.zoo.resolve import resolve

    settings = MeasureSettings(
        warmup=1, min_iters=3, max_iters=15, max_time_s=8.0, target_rel_ci=0.02, threads=1
    )
    workload = Workload(input_shape=(tokens,), batch_size=batch, optimizer="sgd")
    runs: dict[str, list[float]] = {"eager": [], "sdpa": []}
    built = {}
    for attention in runs:
        spec = resolve(f"{ref}&attn_implementation={attention}")
        built[attention] = (spec, build_model(spec, workload))
    for _ in range(REPEATS):
        for attention, (spec, model) in built.items():
            out = measure(spec, workload, settings, model=model)
            if out["error"]:
                raise RuntimeError(out["error"])
            runs[attention].append(out["iteration_time_ms"])
    return {k: float(np.median(v)) for k, v in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    from gnnperf.predict import Predictor, Query

    predictor = Predictor.from_checkpoint()
    rows = []
    for tokens, batch in CASES:
        measured = measure(LLAMA, tokens, batch)
        predicted = {}
        for attention in ("eager", "sdpa"):
            q = Query(f"{LLAMA}&attn_implementation={attention}", HARDWARE, batch, (tokens,), optimizer="sgd")
            (predicted[attention],) = predictor.predict(q)
        fused = predicted["sdpa"]["fused_attention"]
        row = {
            "tokens": tokens,
            "batch_size": batch,
            "measured_ms": {k: round(v, 2) for k, v in measured.items()},
            "predicted_ms": {k: round(r["iteration_time_ms"], 2) for k, r in predicted.items()},
            "predicted_over_measured": {
                k: round(predicted[k]["iteration_time_ms"] / measured[k], 3) for k in measured
            },
            "eager_over_sdpa": {
                "measured": round(measured["eager"] / measured["sdpa"], 3),
                "predicted": round(
                    predicted["eager"]["iteration_time_ms"] / predicted["sdpa"]["iteration_time_ms"], 3
                ),
            },
            "attention_ms": {"eager_ops": round(fused["eager_ms"], 2), "fused": round(fused["fused_ms"], 2)},
            "rate_tflops": round(fused["rate_tflops"], 4),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    result = {"model": LLAMA, "hardware": HARDWARE, "precision": "fp32", "optimizer": "sgd", "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
