"""The composed FSDP step against torchtitan's published Llama 3.1 8B runs (time and memory, 8 and 128 H100s).

torchtitan's ``docs/performance.md`` (commit eaea6f6a of github.com/pytorch/torchtitan; runs of 2024-12, torch
1963fc8, torchtitan 9dec370), Tables 1 and 3: Llama 3.1 8B trained with FSDP2 alone on 8 and on 128 GPUs, local
batch 2, selective activation checkpointing, without torch.compile or Float8: 5,762 and 5,605 tokens per second per
GPU, 82.4 and 67.0 GiB of memory. The machines: 8 H100s a host (NVLink), "96GB HBM2e with 2.4 TB/sec", run at
500 W ("the actual peak TFLOPs number is between SXM and NVL"), 400 Gb/s of RDMA per GPU between hosts. The job
(torchtitan's ``llama3_8b.toml`` of the time): sequence length 8,192, AdamW, FSDP2's mixed precision (bf16 passes,
fp32 shards and reduce-scatter), selective activation checkpointing by op (``selective_ac_option = 'op'``: the
outputs of most matrix products and of attention kept, the rest recomputed), its own Llama with sdpa attention.
Throughput is read at the 90th step; memory is the largest of the run (torchtitan logs the caching allocator's
peak reserved bytes).

Selective checkpointing by op is queried as such (``--activation-checkpointing selective``: the same policy), with
none and full beside it. What gnnperf cannot query is bracketed: the 500 W HBM2e H100 between the data sheets of the
H100 PCIe (756 dense fp16 TFLOP/s, 2.0 TB/s) and SXM (989, 3.35 TB/s); transformers' LLaMA stands for torchtitan's
(the same shapes). The attention's time is the fused kernel's composed price in place of the eager attention graph's ops
(``gnnperf/predictor/fused_attention.py``; ``results_torchtitan_eager.json``: the eager graph's time, before it).
The step's iteration time is 2 x 8,192 / (tokens/s/GPU).

    .venv/bin/python experiments/fsdp/torchtitan.py --out experiments/fsdp/results_torchtitan.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gnnperf.predict import Predictor, Query

SOURCE = "github.com/pytorch/torchtitan docs/performance.md at eaea6f6a (Tables 1 and 3), train_configs/llama3_8b.toml"
LLAMA31_8B = (
    "hf:llama?class=LlamaForCausalLM&attn_implementation=sdpa&num_hidden_layers=32&hidden_size=4096"
    "&intermediate_size=14336&num_attention_heads=32&num_key_value_heads=8&vocab_size=128256&rope_theta=500000"
    "&max_position_embeddings=131072"
)
SEQ, BATCH = 8192, 2
MEASURED = [  # (GPUs, tokens/s per GPU, GiB)
    (8, 5762, 82.4),
    (128, 5605, 67.0),
]
DEVICES = ["h100-pcie", "h100-sxm"]  # below and above the 500 W HBM2e H100 in compute and bandwidth
NETWORK = "8x400gbit"  # 400 Gb/s per GPU, 8 GPUs a host


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    predictor = Predictor.from_checkpoint()
    rows = []
    for gpus, tokens_per_s, gib in MEASURED:
        measured_ms = BATCH * SEQ / tokens_per_s * 1000
        for hardware in DEVICES:
            for checkpointing in (False, True, "selective"):
                q = Query(
                    LLAMA31_8B, hardware, BATCH, (SEQ,), "fp32", optimizer="adamw", num_devices=gpus,
                    parallel="fsdp", fsdp_param_dtype="bf16", activation_checkpointing=checkpointing,
                    network=NETWORK if gpus > 8 else None,
                )  # fmt: skip
                (row,) = predictor.predict(q)
                memory = predictor.memory(q)
                row = {
                    "gpus": gpus,
                    "hardware": hardware,
                    "activation_checkpointing": {False: "none", True: "full"}.get(
                        checkpointing, checkpointing
                    ),
                    "measured_ms": round(measured_ms, 1),
                    "predicted_ms": round(row["iteration_time_ms"], 1),
                    "predicted_over_measured": round(row["iteration_time_ms"] / measured_ms, 3),
                    "one_device_step_ms": round(row["fsdp"]["step_ms"], 1),
                    # the attention as sdpa's fused kernel, in place of the eager attention graph's ops
                    "fused_attention_ms": round(row["fused_attention"]["fused_ms"], 1),
                    "eager_attention_ms": round(row["fused_attention"]["eager_ms"], 1),
                    "measured_gib": gib,
                    "estimated_gib": round(memory["total_mb"] / 1024, 1),
                    "estimated_over_measured": round(memory["total_mb"] / 1024 / gib, 3),
                    "peak_at": memory["peak_at"],
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    results = {
        "source": SOURCE,
        "model": LLAMA31_8B,
        "seq_len": SEQ,
        "batch_per_gpu": BATCH,
        "measured": [{"gpus": g, "tokens_per_s_per_gpu": t, "memory_gib": m} for g, t, m in MEASURED],
        "rows": rows,
    }
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
