"""An inference step's live tensors at their most, by torch's memory profiler on this CPU, beside the estimate.

Each model runs one forward pass under ``no_grad`` (after one unprofiled;
:func:`gnnperf.measure.live_tensors.inference_live_peak_mb`); the weights and the most tensors alive at once are
set beside :func:`gnnperf.graph.inference_memory.inference_memory` (less the GPU workspace).

    .venv/bin/python experiments/memory/profile_inference.py --out experiments/memory/results_inference.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from gnnperf.graph.inference_memory import inference_memory
from gnnperf.measure.live_tensors import inference_live_peak_mb
from gnnperf.measure.workload import Workload
from gnnperf.zoo.resolve import resolve

LLAMA = (
    "hf:llama?class=LlamaForCausalLM&num_hidden_layers=4&hidden_size=512&intermediate_size=1408"
    "&num_attention_heads=8&vocab_size=32000&attn_implementation=sdpa"
)
# (reference, per-sample input shape, batch, precision): CNNs, a ViT (fused attention), an eager GPT-2, an sdpa
# LLaMA, and an MLP under bf16 autocast (its cast cache keeps a copy of every weight)
MODELS = [
    ("timm:resnet50", (3, 224, 224), 8, "fp32"), ("timm:densenet121", (3, 224, 224), 8, "fp32"),
    ("timm:convnext_tiny", (3, 224, 224), 8, "fp32"), ("timm:vit_small_patch16_224", (3, 224, 224), 8, "fp32"),
    ("hf:gpt2?attn_implementation=eager&class=GPT2LMHeadModel&n_layer=4&n_embd=512&n_head=8"
     "&vocab_size=32000", (256,), 4, "fp32"),
    (LLAMA, (256,), 4, "fp32"),
    ("zoo:mlp?activation=relu&depth=6&dropout=0.0&in_features=256&norm=none&num_classes=100&width=4096", (256,), 64,
     "amp_bf16"),
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for ref, shape, batch, precision in MODELS:
        spec = resolve(ref)
        amp = torch.bfloat16 if precision == "amp_bf16" else None
        live = inference_live_peak_mb(spec.build(), spec.make_inputs(batch, shape), autocast=amp)
        est = inference_memory(
            ref, Workload(batch_size=batch, input_shape=shape, mode="infer", precision=precision)
        )
        row = {"model": ref, "input_shape": list(shape), "batch_size": batch, "precision": precision}
        row |= {"peak_live_mb": live, "weights_mb": est.weights_mb, "activations_mb": est.activations_mb}
        row["estimate_over_live"] = (est.weights_mb + est.activations_mb) / live
        rows.append(row)
        print(f"{ref[:40]} b{batch} {precision}: estimate / live {row['estimate_over_live']:.3f}", flush=True)
    args.out.write_text(json.dumps({"what": __doc__.splitlines()[0], "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
