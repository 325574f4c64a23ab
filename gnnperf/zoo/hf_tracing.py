"""How a transformers model is traced (exported, or run shape-only for its memory) where tracing it as it runs fails
or would mislead: :func:`traced`, the context :class:`~gnnperf.zoo.resolve.ModelSpec` ``tracing`` holds for ``hf:``
references (:mod:`gnnperf.zoo.hf`). Each patch keeps the costs of what it replaces (FLOPs, tensors saved) and says
where values differ.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from typing import Any
from unittest.mock import patch

import torch
import torch.nn.functional as F
from torch import nn


@contextmanager
def traced() -> Iterator[None]:
    """transformers models as traced (exported, or run shape-only for their memory), not run, where the two differ.

    - Token positions: without values to read (meta and fake tensors) transformers takes the positions for packed
      sequences and builds a mask, so that sdpa attention would run with it and with grouped keys and values
      repeated to every head; with the harness's token ids, one sequence per row, it runs causal, unmasked and
      grouped, as here.
    - Mixture-of-experts layers (transformers' grouped experts: Mixtral, Qwen-MoE, DeepSeek, OLMoE, GPT-OSS, ...):
      how many token-expert pairs each expert gets depends on the router's values, which neither exporter can
      trace nor the meta device compute (and its grouped matrix product takes half precision only); each expert
      gets an equal share here (:func:`_balanced_grouped_mm`), the balance routers are trained towards. The
      FLOPs, weights read and tensors saved are those of any routing; a skewed one runs longer.
      Models whose own code picks each expert's tokens (JetMoE, Switch Transformers: :data:`BALANCED_EXPERTS`)
      alike, Switch up to each expert's capacity.
    - Rotary embeddings in complex numbers (DeepSeek-V2, Llama 4: ``torch.polar``, ``view_as_complex``), which
      neither exporter writes in ONNX: in real arithmetic (:func:`_rotate`), the same values and FLOPs as the
      complex product, in the few elementwise ops LLaMA's real rotary runs.
    - ``Tensor.exponential_`` (PhiMoE's Gumbel routing noise), which neither exporter writes: drawn as
      ``-log(1 - U)`` of a uniform draw, the same distribution (:func:`_exponential_`).
    """
    masking = sys.modules.get("transformers.masking_utils")  # imported with any transformers model
    moe = sys.modules.get("transformers.integrations.moe")
    with ExitStack() as stack:
        stack.enter_context(patch.object(torch.Tensor, "exponential_", _exponential_))
        for module_name, classes in BALANCED_EXPERTS.items():
            if (module := sys.modules.get(module_name)) is not None:
                for name, forward in classes:
                    stack.enter_context(patch.object(getattr(module, name), "forward", forward))
        for module_name, (rotary, broadcast) in COMPLEX_ROTARY.items():
            module = sys.modules.get(module_name)  # imported when such a model was built
            if module is not None:
                stack.enter_context(patch.object(getattr(module, rotary), "forward", _real_rotary_forward))
                stack.enter_context(
                    patch.object(module, "apply_rotary_emb", partial(_real_rotary, broadcast))
                )
        if masking is not None and hasattr(masking, "find_packed_sequence_indices"):
            stack.enter_context(
                patch.object(masking, "find_packed_sequence_indices", lambda position_ids: None)
            )
        if moe is not None and hasattr(moe, "_grouped_mm"):
            stack.enter_context(patch.object(moe, "_grouped_mm", _balanced_grouped_mm))
        yield


# The transformers modules whose rotary embedding is a complex tensor: the embedding's class, and where its
# apply_rotary_emb broadcasts the rotation over the heads (the axis it inserts, as in (batch, seq, dim/2) ->
# DeepSeek-V2's (batch, 1, seq, dim/2) for (batch, heads, seq, dim) or Llama 4's (batch, seq, 1, dim/2)).
COMPLEX_ROTARY = {
    "transformers.models.deepseek_v2.modeling_deepseek_v2": ("DeepseekV2RotaryEmbedding", 1),
    "transformers.models.llama4.modeling_llama4": ("Llama4TextRotaryEmbedding", 2),
}


def _real_rotary_forward(self: nn.Module, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
    """A complex rotary embedding's ``forward`` as ``(..., dim/2, 2)`` real pairs ``(cos, sin)`` instead of the
    unit complex numbers ``polar(1, angle)``, each times the embedding's ``attention_scaling``. (Only the default
    rope's frequencies: a dynamic rope's change at long sequences moves values, not costs.)"""
    angles = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
    return torch.stack((angles.cos(), angles.sin()), dim=-1) * self.attention_scaling


def _real_rotary(
    broadcast: int, xq: torch.Tensor, xk: torch.Tensor, freqs: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``apply_rotary_emb`` of a complex rotary on :func:`_real_rotary_forward`'s pairs."""
    freqs = freqs.unsqueeze(broadcast)
    return _rotate(xq, freqs), _rotate(xk, freqs)


def _rotate(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """``x``'s consecutive pairs ``(a, b)`` as complex numbers times ``freqs``' ``(cos, sin)``, in real arithmetic,
    in float32 as transformers computes it and returned in ``x``'s type."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    a, b = pairs.unbind(-1)
    cos, sin = freqs.unbind(-1)
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2).type_as(x)


def _balanced_parallel_experts(self: nn.Module, inputs: torch.Tensor, expert_size: Any) -> torch.Tensor:
    """JetMoE's ``ParallelExperts.forward`` (each expert's rows of ``inputs``, sorted by expert, times its weight)
    with each expert taking an equal share of the rows (``expert_size``, the routed split, is not read)."""
    return _balanced_grouped_mm(inputs, self.weight.transpose(1, 2), None)


def _balanced_topk_gating(self: nn.Module, hidden_states: torch.Tensor) -> tuple[Any, ...]:
    """JetMoE's ``TopKGating.forward`` (the router's top-k experts per token, their gates, the token-expert pairs
    sorted by expert) without the experts' sizes read from the routing (``.tolist()``, which no shape-only trace
    has values for): an equal share each, as :func:`_balanced_parallel_experts` runs them."""
    logits = self.layer(hidden_states).float()
    top_k_logits, top_k_indices = logits.topk(self.top_k, dim=1)
    top_k_gates = torch.softmax(top_k_logits, dim=1).type_as(hidden_states).flatten()
    index_sorted_experts = top_k_indices.flatten().sort(0)[1]
    batch_index = index_sorted_experts.div(self.top_k, rounding_mode="trunc")
    rows, share = top_k_gates.numel(), -(-top_k_gates.numel() // self.num_experts)
    expert_size = [min(share, max(rows - e * share, 0)) for e in range(self.num_experts)]
    return index_sorted_experts, batch_index, top_k_gates[index_sorted_experts], expert_size, logits


def _balanced_switch_mlp(self: nn.Module, hidden_states: torch.Tensor) -> torch.Tensor:
    """Switch Transformers' ``SparseMLP.forward`` with each expert taking an equal share of the tokens, up to its
    capacity per sequence (``expert_capacity``: the tokens above it skip the experts, as the router's mask drops
    them). The router runs; which expert it picks is not read."""
    batch, seq, hidden = hidden_states.shape
    _, weights, _ = self.router(hidden_states)
    x, w = hidden_states.reshape(-1, hidden), weights.reshape(-1, 1)
    experts = self.router.num_experts
    share = min(batch * self.router.expert_capacity, -(-x.shape[0] // experts))
    rows = [slice(e * share, (e + 1) * share) for e in range(experts)]
    out = [self.experts[f"expert_{e}"](x[r]) * w[r] for e, r in enumerate(rows)]
    kept = sum(o.shape[0] for o in out)
    if kept < x.shape[0]:  # dropped over capacity: zero, as the layer's residual passes them on
        out.append(x.new_zeros(x.shape[0] - kept, hidden))
    return torch.cat(out).reshape(batch, seq, hidden)


# Model code that picks each expert's tokens itself (a list of sizes from the router's values, or a loop over the
# experts hit): the module, and each class with the balanced forward it is traced with
BALANCED_EXPERTS = {
    "transformers.models.jetmoe.modeling_jetmoe": (
        ("JetMoeParallelExperts", _balanced_parallel_experts),
        ("JetMoeTopKGating", _balanced_topk_gating),
    ),
    "transformers.models.switch_transformers.modeling_switch_transformers": (
        ("SwitchTransformersSparseMLP", _balanced_switch_mlp),
    ),
}


def _exponential_(self: torch.Tensor, lambd: float = 1.0, *, generator: Any = None) -> torch.Tensor:
    """``Tensor.exponential_`` as ``-log(1 - U) / lambd``, ``U`` uniform in [0, 1): the same distribution."""
    return self.copy_(
        torch.rand(self.shape, dtype=self.dtype, device=self.device, generator=generator)
        .neg_()
        .log1p_()
        .neg_()
        .div_(lambd)
    )


def _balanced_grouped_mm(
    input: torch.Tensor, weight: torch.Tensor, offs: torch.Tensor | None
) -> torch.Tensor:
    """transformers' grouped matrix product ``(S, K) x (E, K, N) -> (S, N)``, the rows sorted by expert, with each
    expert taking an equal share of the rows (``offs``, the routed split, is not read): one batched MatMul."""
    rows, k = input.shape
    experts = weight.shape[0]
    share = -(-rows // experts)
    if share * experts != rows:
        input = F.pad(input, (0, 0, 0, share * experts - rows))
    return torch.bmm(input.view(experts, share, k), weight).reshape(experts * share, -1)[:rows]
