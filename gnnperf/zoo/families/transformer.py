"""Token transformers: a BERT-like encoder classifier and a GPT-like causal language model.

Both embed token ids, add a learned position embedding (sliced to the input length, so a shorter
``--seq-len`` than ``seq_len`` works) and stack :class:`TransformerBlock` layers with explicit attention.
The encoder is post-norm (``norm_first=false``, as BERT) and classifies the first token through a tanh pooler;
the GPT is pre-norm with a causal mask and returns (B, L, vocab) logits. Defaults are small (4 layers,
``d_model=256``, 128 tokens): BERT-mini-like with BERT's vocabulary, and a GPT with an 8k vocabulary.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from gnnperf.zoo.families._common import (
    TransformerBlock,
    check_choice,
    dropout,
    pick,
    randint,
    require,
    sample_within,
    transformer_macs,
)
from gnnperf.zoo.registry import Family, register_family

ENCODER_DEFAULTS: dict[str, Any] = {
    "vocab_size": 30522,
    "seq_len": 128,
    "d_model": 256,
    "layers": 4,
    "heads": 4,
    "ffn_ratio": 4,
    "dropout": 0.1,
    "norm_first": False,
    "activation": "gelu",
    "num_classes": 2,
}
GPT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 8192,
    "seq_len": 128,
    "d_model": 256,
    "layers": 4,
    "heads": 4,
    "ffn_ratio": 4,
    "dropout": 0.1,
    "tie_embeddings": True,
}


class Embedding(nn.Module):
    def __init__(self, vocab: int, max_len: int, dim: int, drop: float, norm: bool) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(1, max_len, dim) * 0.02)
        self.norm = nn.LayerNorm(dim) if norm else nn.Identity()
        self.drop = dropout(drop)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.drop(self.norm(self.tokens(ids) + self.pos[:, : ids.shape[1]]))


class EncoderClassifier(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        d, drop = p["d_model"], p["dropout"]
        self.embed = Embedding(p["vocab_size"], p["seq_len"], d, drop, norm=not p["norm_first"])
        hidden = p["ffn_ratio"] * d
        self.layers = nn.Sequential(
            *(
                TransformerBlock(d, p["heads"], hidden, drop, p["activation"], p["norm_first"])
                for _ in range(p["layers"])
            )
        )
        self.norm = nn.LayerNorm(d) if p["norm_first"] else nn.Identity()
        self.pooler = nn.Sequential(nn.Linear(d, d), nn.Tanh())
        self.classifier = nn.Sequential(dropout(drop), nn.Linear(d, p["num_classes"]))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.layers(self.embed(ids)))
        return self.classifier(self.pooler(x[:, 0]))


class GPT(nn.Module):
    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        d, drop = p["d_model"], p["dropout"]
        self.embed = Embedding(p["vocab_size"], p["seq_len"], d, drop, norm=False)
        hidden = p["ffn_ratio"] * d
        self.layers = nn.Sequential(
            *(TransformerBlock(d, p["heads"], hidden, drop, causal=True) for _ in range(p["layers"]))
        )
        self.norm = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, p["vocab_size"], bias=False)
        if p["tie_embeddings"]:
            self.lm_head.weight = self.embed.tokens.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm(self.layers(self.embed(ids))))


def _validate(p: dict[str, Any]) -> None:
    require(
        p["layers"] >= 1 and p["seq_len"] >= 1 and p["vocab_size"] >= 2, "layers, seq_len, vocab_size >= 1"
    )
    require(p["d_model"] % p["heads"] == 0, f"d_model {p['d_model']} is not divisible by heads={p['heads']}")


def build_encoder(**params: Any) -> nn.Module:
    p = {**ENCODER_DEFAULTS, **params}
    _validate(p)
    check_choice("activation", p["activation"], ["gelu", "relu", "silu"])
    return EncoderClassifier(p)


def build_gpt(**params: Any) -> nn.Module:
    p = {**GPT_DEFAULTS, **params}
    _validate(p)
    return GPT(p)


def encoder_macs(p: dict[str, Any]) -> float:
    d = p["d_model"]
    body = transformer_macs(p["seq_len"], d, p["ffn_ratio"] * d, p["layers"])
    return body + d * d + d * p["num_classes"]


def gpt_macs(p: dict[str, Any]) -> float:
    d = p["d_model"]
    return (
        transformer_macs(p["seq_len"], d, p["ffn_ratio"] * d, p["layers"])
        + p["seq_len"] * d * p["vocab_size"]
    )


def _draw_common(rng: np.random.Generator) -> dict[str, Any]:
    d_model = pick(rng, [64, 128, 192, 256, 384, 512])
    return {
        "seq_len": pick(rng, [32, 64, 128, 256]),
        "d_model": d_model,
        "layers": randint(rng, 1, 8),
        "heads": d_model // pick(rng, [32, 64]),
        "ffn_ratio": pick(rng, [2, 4]),
        "dropout": pick(rng, [0.0, 0.1]),
    }


def _draw_encoder(rng: np.random.Generator) -> dict[str, Any]:
    p = _draw_common(rng)
    p["vocab_size"] = pick(rng, [1000, 8000, 30522])
    p["norm_first"] = bool(rng.random() < 0.5)
    p["activation"] = pick(rng, ["gelu", "gelu", "relu"])
    p["num_classes"] = pick(rng, [2, 10, 100])
    return p


def _draw_gpt(rng: np.random.Generator) -> dict[str, Any]:
    p = _draw_common(rng)
    p["vocab_size"] = pick(rng, [1024, 4096, 8192, 16384, 32000])
    p["tie_embeddings"] = bool(rng.random() < 0.7)
    return p


def sample_encoder(rng: np.random.Generator) -> dict[str, Any]:
    return sample_within(rng, _draw_encoder, ENCODER_DEFAULTS, encoder_macs, 2e6, 3e8)


def sample_gpt(rng: np.random.Generator) -> dict[str, Any]:
    return sample_within(rng, _draw_gpt, GPT_DEFAULTS, gpt_macs, 2e6, 2e8)


def _seq_shape(p: dict[str, Any]) -> tuple[int]:
    return (int(p["seq_len"]),)


def _vocab(p: dict[str, Any]) -> int:
    return int(p["vocab_size"])


register_family(
    Family(
        name="transformer_encoder",
        build=build_encoder,
        sample=sample_encoder,
        defaults=ENCODER_DEFAULTS,
        input_kind="tokens",
        input_shape=_seq_shape,
        vocab_size=_vocab,
        description="BERT-like encoder: token + position embedding, post/pre-norm layers, pooled classifier",
        macs=encoder_macs,
        tags=("transformer", "nlp"),
    )
)
register_family(
    Family(
        name="gpt",
        build=build_gpt,
        sample=sample_gpt,
        defaults=GPT_DEFAULTS,
        input_kind="tokens",
        input_shape=_seq_shape,
        vocab_size=_vocab,
        description="GPT-like decoder: causal self-attention, pre-norm layers, (tied) LM head over the vocab",
        macs=gpt_macs,
        tags=("transformer", "nlp", "causal"),
    )
)
