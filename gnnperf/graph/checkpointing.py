"""Activation checkpointing of a model's repeated blocks: which modules, what they keep, what they recompute.

With activation checkpointing (``torch.utils.checkpoint``, as transformers' ``activation_checkpointing_enable()``,
``gradient_checkpointing_enable()`` before version 5, and timm's ``set_grad_checkpointing()`` apply it) a block's
forward pass keeps only the block's inputs; the backward pass runs the block's forward again to get the tensors its
own backward needs. So at the peak a step holds what autograd saves outside the blocks, every block's inputs, and the
saved tensors of one block at a time (the largest); and it runs the blocks' forward pass twice.

The blocks are found in the module tree (:func:`checkpoint_blocks`): the children of a ``ModuleList`` or
``Sequential`` of two or more modules, all of one class and each with at least :data:`MIN_LAYERS` layers with weights,
that hold no such list themselves: a transformer's layers (GPT-2's ``h.N``, BERT's ``encoder.layer.N``, LLaMA's
``layers.N``, ViT's ``blocks.N``), a ResNet's bottlenecks, a ConvNeXt's blocks within its stages, as transformers and
timm checkpoint them. Single layers (VGG's convolutions in ``features``), conv-norm-act units and mixed sequences are
not blocks; a model whose blocks are not kept in such a list (timm's RegNets and DLAs, torchvision's DenseNet,
Inception and MobileNetV3) checkpoints nothing here. A mixture-of-experts layer that keeps its experts in a
``ModuleList`` would have its experts taken for the blocks; transformers 5 keeps them as one module of stacked
weights, so for its MoE models (Mixtral, Qwen2/3-MoE, OLMoE, DeepSeek-V3, GPT-OSS, Switch, ...) the blocks found
are the decoder layers, the modules transformers itself checkpoints (its ``GradientCheckpointingLayer``s).

Selective checkpointing (:data:`SELECTIVE`) is torchtitan's by op (``selective_ac_option = "op"``, its default for
Llama): the same blocks are checkpointed, but in each the outputs of the matrix products (``aten.mm``), every second
one excepted, and of fused attention are kept from the forward pass, and only the rest is recomputed
(:func:`selective_policy`; :func:`selective_checkpointing` applies it with ``torch.utils.checkpoint``, as
torchtitan's ``checkpoint_wrapper`` does).

The shape-only trace (:class:`gnnperf.graph.saved.ForwardTrace`) attributes what autograd saves, and the forward
FLOPs, to the block running at the time, and which outputs a selective policy keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import nn

from gnnperf.errors import GnnperfError

__all__ = [
    "ATTENTION_OPS",
    "SELECTIVE",
    "checkpoint_blocks",
    "library_checkpointing",
    "selective_checkpointing",
    "selective_policy",
]

SELECTIVE = "selective"
# the fused attention kernels whose outputs selective checkpointing keeps (torchtitan lists flash and
# memory-efficient; cuDNN's and the CPU's flash kernel are the same kind)
ATTENTION_OPS = (
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
)


# A block holds at least this many layers with weights of their own: a transformer layer (norms, projections) or a
# residual block (convolutions, norms) does, a conv-norm-act unit (torchvision's Conv2dNormActivation, two) does not.
MIN_LAYERS = 3


def _weighted_layers(module: nn.Module) -> int:
    return sum(1 for m in module.modules() if next(m.parameters(recurse=False), None) is not None)


def checkpoint_blocks(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """``(qualified name, module)`` of the blocks a checkpointed step recomputes (see the module docstring)."""
    candidates: dict[str, nn.Module] = {}
    for name, module in model.named_modules():
        if not isinstance(module, (nn.ModuleList, nn.Sequential)):
            continue
        children = list(module.named_children())
        # a list of blocks: two or more modules, all of one class, each a block (not a conv-norm-act unit)
        if len(children) < 2 or len({type(child) for _, child in children}) > 1:
            continue
        if all(_weighted_layers(child) >= MIN_LAYERS for _, child in children):
            candidates.update(
                (f"{name}.{child_name}" if name else child_name, c) for child_name, c in children
            )
    # innermost: drop a candidate that holds another
    return [
        (name, module)
        for name, module in candidates.items()
        if not any(other.startswith(name + ".") for other in candidates)
    ]


def library_checkpointing(model: nn.Module, on: bool) -> None:
    """Switch the model library's own checkpointing on or off, as a user would: transformers'
    ``activation_checkpointing_enable(use_reentrant=False)`` (``gradient_checkpointing_*`` before version 5), else
    timm's ``set_grad_checkpointing``. What the estimate is checked against (``experiments/checkpointing``)."""
    inner = getattr(model, "m", model)  # an hf: reference's model sits in gnnperf.zoo.hf.HFLogits
    if hasattr(inner, "activation_checkpointing_enable"):
        if on:
            inner.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            inner.activation_checkpointing_disable()
    elif hasattr(model, "set_grad_checkpointing"):
        model.set_grad_checkpointing(on)
    else:
        raise GnnperfError(f"{type(model).__name__} has no checkpointing switch of transformers or timm")


def selective_policy() -> Callable[..., Any]:
    """A fresh policy (its own count of matrix products) for one checkpointed call: keep the outputs of the odd-numbered
    ``aten.mm`` calls and of fused attention, recompute the rest; the recomputation counts again from one."""
    from torch.utils.checkpoint import CheckpointPolicy

    counts = {False: 0, True: 0}  # by ctx.is_recompute

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        if func == torch.ops.aten.mm.default:
            counts[ctx.is_recompute] += 1
            keep = counts[ctx.is_recompute] % 2 == 1
        else:
            keep = func in ATTENTION_OPS
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def selective_checkpointing(model: nn.Module) -> None:
    """Checkpoint the blocks of ``model`` (:func:`checkpoint_blocks`) with :func:`selective_policy`, in place (what the
    selective estimate is checked against, ``experiments/checkpointing``)."""
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    def contexts() -> Any:
        return create_selective_checkpoint_contexts(selective_policy())

    for _, block in checkpoint_blocks(model):
        block.forward = partial(checkpoint, block.forward, use_reentrant=False, context_fn=contexts)
