"""FSDP's memory on each device, by torch's memory profiler in a real sharded run on this CPU, beside the estimate.

Each model runs one SGD training step (after a first that makes the optimizer's state) in ``N`` processes on this
CPU (``torchrun``, the gloo backend), sharded with PyTorch's FSDP2 ``fully_shard`` the way
:class:`gnnperf.graph.fsdp.FsdpShards` assumes: each repeated block its own unit, then the root. Rank 0's live
tensors at their most (:func:`gnnperf.measure.live_tensors.fsdp_live_peak_mb`) are set beside
``training_memory(..., parallel="fsdp")`` (less the GPU workspace) and beside the unsharded estimate.

    .venv/bin/python experiments/fsdp/profile_fsdp.py --out experiments/fsdp/results.json
    .venv/bin/python experiments/fsdp/profile_fsdp.py --param-dtype bf16 --out experiments/fsdp/results_bf16.json

``--param-dtype``: FSDP2's ``MixedPrecisionPolicy(param_dtype=..., reduce_dtype=torch.float32)`` over the fp32
model (``training_memory(..., fsdp_policy=FsdpPolicy(param_dtype=...))``), the runs of ``POLICY_RUNS`` (two processes
each), against the estimate and beside the same sharding with the default policy. ``--no-reshard``: the blocks with
``fully_shard(reshard_after_forward=False)``, the same way.

    .venv/bin/python experiments/fsdp/profile_fsdp.py --no-reshard --out experiments/fsdp/results_no_reshard.json

``--shard-devices 2``: hybrid sharding (HSDP, ``fully_shard`` over a 2-D mesh), the runs of ``HYBRID_RUNS`` on four
processes as two replicas of two shards (``training_memory(..., fsdp_policy=FsdpPolicy(shard_devices=2))``), beside
the estimate of the same four processes fully sharded.

    .venv/bin/python experiments/fsdp/profile_fsdp.py --shard-devices 2 --out experiments/fsdp/results_hybrid.json

``--checkpointing``: the blocks checkpointed by the model library before they are sharded (the usual LLM recipe), the
runs of ``POLICY_RUNS``, against ``training_memory(..., checkpointing=True)`` and beside the estimate without it.

    .venv/bin/python experiments/fsdp/profile_fsdp.py --checkpointing --out experiments/fsdp/results_checkpointing.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gnnperf.graph.fsdp import DEFAULT_POLICY, FsdpPolicy
from gnnperf.graph.memory import training_memory
from gnnperf.measure.live_tensors import fsdp_live_peak_mb
from gnnperf.measure.workload import Workload

GPT2 = (
    "hf:gpt2?attn_implementation=eager&class=GPT2LMHeadModel&n_layer=4&n_embd=512&n_head=8"
    "&vocab_size=32000&resid_pdrop=0&embd_pdrop=0"
    "&attn_pdrop=0"
)
LLAMA = (
    "hf:llama?attn_implementation=eager&class=LlamaForCausalLM&num_hidden_layers=4&hidden_size=512"
    "&intermediate_size=1408"
    "&num_attention_heads=8&num_key_value_heads=8&vocab_size=32000"
)
# an encoder-decoder (its encoder's and decoder's layers all units) and a mixture of experts (traced with balanced
# routing, run with its router's)
T5 = (
    "hf:t5?attn_implementation=eager&class=T5ForConditionalGeneration&num_layers=2&d_model=256&d_ff=512"
    "&num_heads=4&vocab_size=8000"
    "&dropout_rate=0"
)
MIXTRAL = (
    "hf:mixtral?class=MixtralForCausalLM&num_hidden_layers=2&hidden_size=256&intermediate_size=512"
    "&num_attention_heads=4&num_key_value_heads=2&vocab_size=8000&num_local_experts=4&attn_implementation=sdpa"
)
# (reference, per-sample input shape, batch, processes): an LLM whose peak is the backward pass's start (the
# loss's gradients), one with weights tied across the root (GPT-2), the same at batch 1 (gradients above the
# activations), a ViT, whose peak is later in the backward pass, T5 and Mixtral
RUNS = [
    (LLAMA, (256,), 4, 1), (LLAMA, (256,), 4, 2), (LLAMA, (256,), 4, 4), (LLAMA, (64,), 1, 2),
    (GPT2, (256,), 4, 2), (GPT2, (64,), 1, 2),
    ("timm:vit_small_patch16_224", (3, 224, 224), 2, 2), ("timm:vit_small_patch16_224", (3, 224, 224), 8, 2),
    (T5, (64,), 4, 2), (MIXTRAL, (128,), 4, 2),
]  # fmt: skip
POLICY_RUNS = [
    (LLAMA, (256,), 4, 2), (LLAMA, (64,), 1, 2), (GPT2, (256,), 4, 2), (GPT2, (64,), 1, 2),
    ("timm:vit_small_patch16_224", (3, 224, 224), 8, 2), (T5, (64,), 4, 2),
]  # fmt: skip
HYBRID_RUNS = [(LLAMA, (256,), 4, 4), (LLAMA, (64,), 1, 4), (GPT2, (256,), 4, 4), (GPT2, (64,), 1, 4)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--param-dtype", choices=["bf16", "fp16"], help="FSDP2's mixed precision (POLICY_RUNS)"
    )
    parser.add_argument("--no-reshard", action="store_true", help="reshard_after_forward=False (POLICY_RUNS)")
    parser.add_argument(
        "--shard-devices", type=int, help="hybrid sharding over groups of this many (HYBRID_RUNS)"
    )
    parser.add_argument(
        "--checkpointing",
        nargs="?",
        const=True,
        default=False,
        choices=[True, "selective"],
        help="activation checkpointing (POLICY_RUNS); selective: by op",
    )
    args = parser.parse_args()
    mixed = args.param_dtype
    policy = FsdpPolicy(mixed, reshard_after_forward=not args.no_reshard, shard_devices=args.shard_devices)
    # what the estimate is set beside: unsharded, or the same sharding without the policy's one change (both: neither)
    other = {(None, True): "unsharded", (mixed, True): "fp32_passes", (None, False): "resharded"}.get(
        (mixed, policy.reshard_after_forward), "default_policy"
    )
    other = "fully_sharded" if args.shard_devices else "not_checkpointed" if args.checkpointing else other
    changed = policy != DEFAULT_POLICY or args.checkpointing
    runs = HYBRID_RUNS if args.shard_devices else POLICY_RUNS if changed else RUNS

    rows = []
    for ref, shape, batch, n in runs:
        try:
            live = fsdp_live_peak_mb(
                ref,
                shape,
                batch,
                n,
                attempts=10,
                param_dtype=mixed,
                reshard_after_forward=policy.reshard_after_forward,
                shard_devices=args.shard_devices,
                checkpointing=args.checkpointing,
            )
        except RuntimeError as e:  # the profiler's own check failed on every run
            rows.append({"model": ref, "input_shape": list(shape), "batch_size": batch, "processes": n})
            rows[-1]["failed"] = str(e).splitlines()[0]
            print(rows[-1]["failed"], flush=True)
            continue
        workload = Workload(input_shape=shape, batch_size=batch, optimizer="sgd", num_devices=n)
        sharded = training_memory(
            ref, workload, parallel="fsdp", checkpointing=args.checkpointing, fsdp_policy=policy
        )
        # beside it: unsharded, or with another policy the same sharding with the default one
        whole = training_memory(ref, workload, parallel="dp" if other == "unsharded" else "fsdp")
        live_mb = sum(live.values())
        row = {
            "model": ref,
            "input_shape": list(shape),
            "batch_size": batch,
            "processes": n,
            "peak_live_mb": live,
        }
        row["estimate"] = {
            k: v for k, v in sharded.as_dict().items() if k.endswith("_mb") or k in ("peak_at", "fsdp")
        }
        row["estimate_over_live"] = (sharded.total_mb - sharded.workspace_mb) / live_mb
        row[f"{other}_estimate_over_live"] = (whole.total_mb - whole.workspace_mb) / live_mb
        rows.append(row)
        print(
            f"{ref[:40]} b{batch} x{n}: live {live_mb:.1f} MB; estimate / live {row['estimate_over_live']:.3f} "
            f"({sharded.peak_at}), {other} {row[f'{other}_estimate_over_live']:.3f}",
            flush=True,
        )
    what = __doc__.splitlines()[0] + (
        f" (MixedPrecisionPolicy(param_dtype={mixed}, reduce_dtype=fp32))" if mixed else ""
    )
    what += " (reshard_after_forward=False)" * (not policy.reshard_after_forward)
    what += f" (hybrid: shards of {args.shard_devices} devices)" * bool(args.shard_devices)
    what += f" ({'selective ' if args.checkpointing == 'selective' else ''}activation checkpointing)" * bool(
        args.checkpointing
    )
    args.out.write_text(json.dumps({"what": what, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
