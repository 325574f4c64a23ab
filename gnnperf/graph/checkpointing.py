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

The shape-only trace (:class:`gnnperf.graph.saved.ForwardTrace`) attributes what autograd saves, and the forward
FLOPs, to the block running at the time.
"""

from __future__ import annotations

from torch import nn

from gnnperf.errors import GnnperfError

__all__ = ["checkpoint_blocks", "library_checkpointing"]


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
