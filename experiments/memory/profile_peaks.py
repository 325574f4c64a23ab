"""What the live tensors are at a CPU training step's peak, by torch's memory profiler, beside the estimate.

``update.py`` measures the resident size, which counts more than tensors (the math library's own buffers). Here
torch's memory profiler follows every tensor of one SGD step (fp32, and AMP bf16 for two MLPs; the harness's
settings and loss; :func:`gnnperf.measure.live_tensors.live_peak_mb`) and labels it parameter, optimizer state,
input, temporary, activation, gradient or autograd detail; at the moment the live tensors add up to the most, their
MB by label, beside :func:`gnnperf.graph.memory.training_memory`'s terms and its peak (less the GPU workspace) over
theirs.
Checkpointed rows switch the library's own checkpointing on (``experiments/checkpointing``'s models).

    .venv/bin/python experiments/memory/profile_peaks.py --out experiments/memory/results_profile.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from gnnperf.graph.checkpointing import library_checkpointing
from gnnperf.graph.memory import training_memory
from gnnperf.measure.live_tensors import live_peak_mb
from gnnperf.measure.workload import Workload
from gnnperf.zoo.resolve import resolve

GPT2 = "hf:gpt2?attn_implementation=eager&class=GPT2LMHeadModel&resid_pdrop=0&embd_pdrop=0&attn_pdrop=0"
BERT = (
    "hf:bert?attn_implementation=eager&class=BertForMaskedLM&hidden_dropout_prob=0"
    "&attention_probs_dropout_prob=0"
)
LLAMA = (
    "hf:llama?attn_implementation=eager&num_hidden_layers=4&hidden_size=512&intermediate_size=1408"
    "&num_attention_heads=8&num_key_value_heads=8"
    "&vocab_size=32000"
)
# (every reference names its attention: eager, the default of hf: references until 2026-12-06, or sdpa)
# (reference, per-sample input shape, batch, checkpointed): update.py's models whose SGD step the estimate is
# furthest from, transformers at batches where activations and gradients are alike, experiments/checkpointing's
# models with and without their checkpointing, ten other architectures, and transformers with sdpa attention and
# mixtures of experts, complex rotary embeddings, Switch Transformers, models that read their token ids' values
MODELS = [
    (GPT2, (128,), 1, False), (GPT2, (128,), 4, False), (GPT2, (128,), 16, False),
    (BERT, (128,), 1, False), (BERT, (128,), 8, False),
    ("zoo:mlp?activation=relu&depth=6&dropout=0.0&in_features=256&norm=layer&num_classes=100&width=4096", (256,), 8,
     False),
    ("timm:vgg16", (3, 224, 224), 1, False),
    ("timm:vit_base_patch16_224", (3, 224, 224), 1, False), ("timm:vit_base_patch16_224", (3, 224, 224), 4, False),
    ("timm:resnet50", (3, 224, 224), 4, False),
    (LLAMA, (256,), 4, False), (LLAMA, (256,), 4, True),
    ("timm:vit_small_patch16_224", (3, 224, 224), 8, False), ("timm:vit_small_patch16_224", (3, 224, 224), 8, True),
    ("timm:resnet50", (3, 224, 224), 8, False), ("timm:resnet50", (3, 224, 224), 8, True),
    ("timm:convnext_tiny", (3, 224, 224), 4, False), ("timm:convnext_tiny", (3, 224, 224), 4, True),
    # other architectures: dense connections, depthwise convolutions, squeeze-excite, windowed attention, MLP-mixing,
    # an encoder-decoder
    ("timm:densenet121", (3, 224, 224), 4, False), ("timm:efficientnet_b0", (3, 224, 224), 8, False),
    ("timm:mobilenetv3_large_100", (3, 224, 224), 8, False), ("timm:swin_tiny_patch4_window7_224", (3, 224, 224), 4, False),
    ("timm:regnety_016", (3, 224, 224), 8, False), ("timm:inception_v3", (3, 299, 299), 4, False),
    ("timm:mixer_b16_224", (3, 224, 224), 4, False), ("timm:convnext_tiny", (3, 224, 224), 8, False),
    ("timm:efficientformerv2_s0", (3, 224, 224), 8, False),
    ("hf:t5?attn_implementation=eager&class=T5ForConditionalGeneration&num_layers=2&d_model=256&d_ff=512"
     "&num_heads=4&vocab_size=8000"
     "&dropout_rate=0", (64,), 4, False),
    # transformers' default attention (PyTorch's fused kernels), grouped keys and values in the last
    (GPT2.replace("=eager", "=sdpa"), (128,), 4, False), (BERT.replace("=eager", "=sdpa"), (128,), 8, False),
    (LLAMA.replace("=eager", "=sdpa"), (256,), 4, False),
    (LLAMA.replace("num_key_value_heads=8", "num_key_value_heads=2").replace("=eager", "=sdpa"), (256,), 4, False),
    # mixtures of experts, run with their routing, traced with each expert taking an equal share (gnnperf.zoo.hf_tracing)
    ("hf:mixtral?num_hidden_layers=4&hidden_size=512&intermediate_size=1024&num_attention_heads=8&num_key_value_heads=2"
     "&vocab_size=32000&num_local_experts=8&attn_implementation=sdpa", (256,), 4, False),
    ("hf:qwen2_moe?num_hidden_layers=4&hidden_size=512&intermediate_size=1408&moe_intermediate_size=256"
     "&shared_expert_intermediate_size=1024&num_attention_heads=8&num_key_value_heads=2&vocab_size=32000&num_experts=16"
     "&num_experts_per_tok=4&attn_implementation=sdpa", (256,), 4, False),
    # rotary embeddings in complex numbers, traced in real arithmetic (gnnperf.zoo.hf_tracing): DeepSeek-V2's latent
    # attention and grouped experts (eager: its value heads are narrower than its query heads, which sends CPU sdpa
    # to its unfused path), Llama 4's experts that transformers runs on every token
    ("hf:deepseek_v2?attn_implementation=eager&num_hidden_layers=4&hidden_size=512&intermediate_size=1408"
     "&moe_intermediate_size=256"
     "&num_attention_heads=8&num_key_value_heads=8&kv_lora_rank=128&qk_rope_head_dim=32&qk_nope_head_dim=64"
     "&v_head_dim=64&n_routed_experts=8&num_experts_per_tok=2&n_shared_experts=1&first_k_dense_replace=1"
     "&vocab_size=32000", (256,), 4, False),
    ("hf:llama4_text?num_hidden_layers=4&hidden_size=512&intermediate_size=512&intermediate_size_mlp=1408"
     "&num_attention_heads=8&num_key_value_heads=2&head_dim=64&num_local_experts=8&vocab_size=32000"
     "&attn_implementation=sdpa", (256,), 4, False),
    # Switch Transformers' experts, traced with balanced routing up to each expert's capacity (run: the router's
    # picks, the tokens over capacity dropped); at capacity 64 a sequence the even split (32) is under it, at 16 over
    *[("hf:switch_transformers?attn_implementation=eager&class=SwitchTransformersForConditionalGeneration"
       "&num_layers=2&num_decoder_layers=2"
       "&d_model=512&d_ff=1024&num_heads=8&d_kv=64&num_experts=8&vocab_size=32000&dropout_rate=0"
       f"&num_sparse_encoder_layers=2&num_sparse_decoder_layers=2&expert_capacity={c}", (256,), 4, False)
      for c in (64, 16)],
    # code that reads values of its token ids, traced with them (gnnperf.graph.input_values): XLM's lengths, FSMT's
    # padding, X-MOD's language ids, Longformer's and LED's global attention; and JetMoE's router, traced without
    # reading its experts' sizes (dropout off: a CPU keeps its mask in the input's type, a GPU in one byte)
    ("hf:xlm?attn_implementation=eager&class=XLMWithLMHeadModel&n_layers=4&n_heads=8&emb_dim=512"
     "&vocab_size=32000&dropout=0"
     "&attention_dropout=0", (256,), 4, False),
    ("hf:fsmt?attn_implementation=eager&class=FSMTForConditionalGeneration&encoder_layers=2"
     "&decoder_layers=2&d_model=512"
     "&encoder_attention_heads=8&decoder_attention_heads=8&encoder_ffn_dim=1024&decoder_ffn_dim=1024"
     "&src_vocab_size=32000&tgt_vocab_size=32000&dropout=0&attention_dropout=0&activation_dropout=0", (256,), 4, False),
    ("hf:xmod?attn_implementation=eager&class=XmodForCausalLM&num_hidden_layers=4&hidden_size=512"
     "&num_attention_heads=8&intermediate_size=1408"
     "&vocab_size=32000&hidden_dropout_prob=0&attention_probs_dropout_prob=0", (256,), 4, False),
    ("hf:longformer?attn_implementation=eager&class=LongformerForMaskedLM&num_hidden_layers=4"
     "&hidden_size=512&num_attention_heads=8"
     "&intermediate_size=1408&vocab_size=32000&attention_window=128&max_position_embeddings=1026&hidden_dropout_prob=0"
     "&attention_probs_dropout_prob=0", (512,), 4, False),
    ("hf:led?attn_implementation=eager&class=LEDForConditionalGeneration&encoder_layers=2"
     "&decoder_layers=2&d_model=512"
     "&encoder_attention_heads=8&decoder_attention_heads=8&encoder_ffn_dim=1024&decoder_ffn_dim=1024"
     "&vocab_size=32000&attention_window=128&dropout=0&attention_dropout=0&activation_dropout=0", (512,), 4, False),
    ("hf:jetmoe?attn_implementation=eager&class=JetMoeForCausalLM&num_hidden_layers=4&hidden_size=512"
     "&num_attention_heads=8&num_key_value_heads=2"
     "&intermediate_size=1408&num_local_experts=8&num_experts_per_tok=2&vocab_size=32000", (256,), 4, False),
]  # fmt: skip
# AMP bf16 (CPU autocast against the trace's CUDA autocast): MLPs, whose ops (matrix products, ReLU, the loss) both
# lists treat alike (reference, per-sample input shape, batch)
AMP_MODELS = [
    ("zoo:mlp?activation=relu&depth=6&dropout=0.0&in_features=256&norm=none&num_classes=100&width=4096", (256,), 8),
    ("zoo:mlp?activation=relu&depth=4&dropout=0.0&in_features=1024&norm=none&num_classes=1000&width=2048", (1024,), 256),
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    runs = [(*m, "fp32") for m in MODELS] + [
        (ref, shape, batch, False, "amp_bf16") for ref, shape, batch in AMP_MODELS
    ]
    for ref, shape, batch, checkpointed, precision in runs:
        spec = resolve(ref)
        model = spec.build()
        if checkpointed:
            library_checkpointing(model, True)
        amp = torch.bfloat16 if precision == "amp_bf16" else None
        live = live_peak_mb(model, spec.make_inputs(batch, shape), autocast=amp)
        workload = Workload(input_shape=shape, batch_size=batch, optimizer="sgd", precision=precision)
        est = training_memory(ref, workload, checkpointing=checkpointed)
        row = {"model": ref, "input_shape": list(shape), "batch_size": batch, "checkpointed": checkpointed}
        row |= {"precision": precision, "peak_live_mb": live}
        row["estimate"] = {k: v for k, v in est.as_dict().items() if k.endswith("_mb") or k == "peak_at"}
        # the live tensors at the peak against the estimate's (its peak less the GPU workspace)
        row["estimate_over_live"] = (est.total_mb - est.workspace_mb) / sum(live.values())
        rows.append(row)
        mode = (" checkpointed" if checkpointed else "") + (f" {precision}" if amp else "")
        print(
            f"{ref[:40]} b{batch}{mode}: estimate / live {row['estimate_over_live']:.3f} ({est.peak_at});",
            {k: round(v, 1) for k, v in live.items() if v >= 0.5},
            flush=True,
        )
    args.out.write_text(json.dumps({"what": __doc__.splitlines()[0], "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
