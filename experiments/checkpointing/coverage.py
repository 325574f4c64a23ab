"""Which blocks `--activation-checkpointing` finds across real architectures, and what it estimates they save.

45 timm models drawn with seed 0 from ``timm.list_models()``, 10 torchvision classifiers and 5 transformers model
types; for each, the shape-only trace at batch 2, AMP fp16 (sequence 128 for the transformers): how many blocks,
their share of the forward FLOPs, the activations with and without checkpointing, or the error.

    .venv/bin/python experiments/checkpointing/coverage.py --out experiments/checkpointing/results_coverage.json
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import timm

from gnnperf.errors import GnnperfError
from gnnperf.graph.memory import training_memory
from gnnperf.measure.workload import Workload

TORCHVISION = (
    "resnet50", "densenet121", "swin_t", "vit_b_16", "efficientnet_b0", "convnext_tiny", "mobilenet_v3_large",
    "regnet_y_400mf", "maxvit_t", "inception_v3",
)  # fmt: skip
HF = (  # eager attention, the default of hf: references when this ran (2026-12-06 it became sdpa)
    "hf:gpt2?class=GPT2LMHeadModel&n_layer=2&attn_implementation=eager",
    "hf:bert?num_hidden_layers=2&attn_implementation=eager",
    "hf:t5?num_layers=2&num_decoder_layers=2&attn_implementation=eager",
    "hf:opt?num_hidden_layers=2&attn_implementation=eager",
    "hf:mistral?num_hidden_layers=2&hidden_size=256&intermediate_size=512&num_attention_heads=4"
    "&num_key_value_heads=2&vocab_size=1000&attn_implementation=eager",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    random.seed(0)
    refs = [f"timm:{n}" for n in random.sample(timm.list_models(), 45)]
    refs += [f"torchvision:{n}" for n in TORCHVISION] + list(HF)
    rows = []
    for ref in refs:
        shape = (128,) if ref.startswith("hf:") else ()
        workload = Workload(input_shape=shape, batch_size=2, precision="amp_fp16")
        try:
            plain = training_memory(ref, workload)
            ck = training_memory(ref, workload, checkpointing=True)
        except GnnperfError as e:
            rows.append({"model": ref, "error": str(e)})
            print(f"{ref}: {e}")
            continue
        row = {
            "model": ref,
            "blocks": ck.checkpointing.blocks,
            "recompute_share": round(ck.checkpointing.recompute_share, 3),
            "activations_mb": [round(plain.activations_mb, 1), round(ck.activations_mb, 1)],
        }
        rows.append(row)
        print(json.dumps(row))
    traced = [r for r in rows if "error" not in r]
    summary = {
        "models": len(rows),
        "traced": len(traced),
        "without_blocks": [r["model"] for r in traced if not r["blocks"]],
        "errors": [r["model"] for r in rows if "error" in r],
        "timm_version": timm.__version__,
    }
    args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
