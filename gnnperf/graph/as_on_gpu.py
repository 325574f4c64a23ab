"""What the shape-only memory trace does as a GPU does it, where the meta device would not.

Three things differ between the meta device and a GPU, and are traced as on the GPU:

- Autocast keys on the device, so meta tensors ignore it. :class:`CudaAutocast` applies CUDA autocast's
  documented op lists (matrix products and convolutions in half precision, norms, softmax and reductions in
  fp32, the rest in their inputs' type) at the Python API, above autograd as autocast itself sits, so the
  half-precision copies of inputs and weights that autocast saves are counted. On a CPU forward it saves what
  CPU autocast saves wherever the two lists agree.
- ``scaled_dot_product_attention`` on 4-D inputs is traced as the fused GPU kernels save it (inputs, output and a
  log-sum-exp per row), not as the math fallback does (the attention matrix), which runs for other shapes;
  explicit ``softmax(q @ k.T) @ v`` code, as in HF eager attention, keeps the matrix and is counted with it.
  Dropout is traced as the fused CUDA kernel saves it (a one-byte mask per element), not as elsewhere (a noise
  tensor of the input's type).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager
from functools import partial

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map_only

__all__ = ["CudaAutocast", "as_on_gpu"]


class _TraceOnly(torch.autograd.Function):
    """An op that only saves what a GPU kernel saves: the trace stops before any backward pass."""

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError


class _FusedAttention(_TraceOnly):
    """``scaled_dot_product_attention`` as the GPU's fused kernels save it: q, k, v, the output, a log-sum-exp.

    The output is laid out as (batch, tokens, heads, dim) and returned transposed: the memory-efficient kernel (and
    CPU flash attention) always, flash and cuDNN as the query is laid out, which is so where q, k and v are split
    from one projection (timm) or transposed from (batch, tokens, heads, dim) (transformers). Merging the heads
    after it is then a view, not a copy.
    """

    @staticmethod
    def forward(ctx, q, k, v, outputs: Callable | None = None):
        batch, heads, tokens, _ = q.shape
        # the kernel reads k and v (a view of each, free): the op log then has their gradients made here
        for t in (k, v):
            torch.ops.aten.alias(t)
        out = q.new_empty((batch, tokens, heads, v.shape[-1])).transpose(1, 2)
        lse = q.new_empty(q.shape[:-1], dtype=torch.float32)
        ctx.save_for_backward(q, k, v, out, lse)
        if outputs is not None:  # the kernel's outputs (what selective checkpointing keeps of it)
            outputs(out, lse)
        return out


class _FusedDropout(_TraceOnly):
    """Dropout as the GPU's fused kernel saves it: a one-byte mask (elsewhere a 4-byte noise tensor is kept)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(torch.empty_like(x, dtype=torch.bool))
        return torch.empty_like(x)


def attention_flops(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, causal: bool) -> int:
    """The forward FLOPs of fused attention's two products (scores, weighted values), batch x heads x queries x keys;
    ``causal``: the tiles on and below the diagonal only, (S + 1) / 2S of a square score matrix."""
    *lead, queries, width = query.shape
    keys = key.shape[-2]
    flops = 2 * math.prod(lead) * queries * keys * (width + value.shape[-1])
    return flops * (queries + 1) // (2 * queries) if causal and queries == keys else flops


@contextmanager
def as_on_gpu(fused_attention: Callable | None = None):
    """Attention and dropout traced as the fused CUDA kernels run them (see the module docstring);
    ``fused_attention`` is called with each fused attention's output tensors and its ``flops``
    (:func:`attention_flops`, which no FLOP counter sees in this op of the trace's own)."""
    sdpa, dropout = F.scaled_dot_product_attention, F.dropout

    def attention(query, key, value, *args, **kwargs):  # mask, dropout, scale: no memory
        if (
            query.dim() != 4
        ):  # the fused kernels take (batch, heads, tokens, dim) only; the math path keeps more
            return sdpa(query, key, value, *args, **kwargs)
        if fused_attention is None:
            return _FusedAttention.apply(query, key, value)
        causal = bool(kwargs.get("is_causal", args[2] if len(args) > 2 else False))
        told = partial(fused_attention, flops=attention_flops(query, key, value, causal))
        return _FusedAttention.apply(query, key, value, told)

    def drop(input, p=0.5, training=True, inplace=False):  # F.dropout's signature
        return _FusedDropout.apply(input) if training and 0 < p < 1 else dropout(input, p, training, inplace)

    F.scaled_dot_product_attention, F.dropout = attention, drop
    try:
        yield
    finally:
        F.scaled_dot_product_attention, F.dropout = sdpa, dropout


# CUDA autocast's op lists (PyTorch "Automatic Mixed Precision" docs, CUDA ops that autocast to float16 / to
# float32), as the Python functions that reach them; ops in neither list run in their inputs' type.
_TO_HALF = {
    F.linear, F.prelu, F.scaled_dot_product_attention, F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d,
    torch.conv1d, torch.conv2d, torch.conv3d, torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.baddbmm,
    torch.addbmm, torch.mv, torch.addmv, torch.addr, torch.chain_matmul, torch.linalg.multi_dot, torch.einsum,
    torch.Tensor.__matmul__, torch.Tensor.__rmatmul__, torch.Tensor.matmul, torch.Tensor.mm, torch.Tensor.bmm,
    torch.Tensor.addmm, torch.Tensor.baddbmm, torch.Tensor.addbmm, torch.Tensor.mv, torch.Tensor.addmv,
    torch.Tensor.addr,  # the methods too: autocast casts the ops, however they are called (Bloom's alibi.baddbmm)
}  # fmt: skip
_TO_FP32 = {
    F.layer_norm, F.group_norm, F.softmax, F.log_softmax, F.softmin, F.softplus, F.normalize, F.cross_entropy,
    F.nll_loss, F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.kl_div, F.binary_cross_entropy_with_logits,
    F.cosine_similarity, torch.layer_norm, torch.group_norm, torch.softmax, torch.log_softmax, torch.norm,
    torch.exp, torch.log, torch.pow, torch.rsqrt, torch.reciprocal, torch.sum, torch.prod, torch.cumsum,
    torch.cumprod, torch.cdist, torch.Tensor.softmax, torch.Tensor.log_softmax, torch.Tensor.norm,
    torch.Tensor.exp, torch.Tensor.log, torch.Tensor.pow, torch.Tensor.__pow__, torch.Tensor.rsqrt,
    torch.Tensor.reciprocal, torch.Tensor.sum, torch.Tensor.prod, torch.Tensor.cumsum,
    F.rms_norm, torch.rms_norm,  # not listed: it decomposes into pow and rsqrt, which are
}  # fmt: skip


class CudaAutocast(TorchFunctionMode):
    """CUDA autocast's casts for tensors of any device (see the module docstring); ``copied(original, copy)`` is
    told of every cast."""

    def __init__(self, half: torch.dtype, copied: Callable[[torch.Tensor, torch.Tensor], None]) -> None:
        super().__init__()
        self.half = half
        self.copied = copied

    def _cast(self, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if not t.is_floating_point():
            return t
        copy = t.to(dtype)
        self.copied(t, copy)
        return copy

    def __torch_function__(self, func, types, args=(), kwargs=None):
        dtype = self.half if func in _TO_HALF else torch.float32 if func in _TO_FP32 else None
        if dtype is not None:
            args, kwargs = tree_map_only(torch.Tensor, lambda t: self._cast(t, dtype), (args, kwargs or {}))
        return func(*args, **(kwargs or {}))
