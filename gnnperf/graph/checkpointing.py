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
``ModuleList`` would have its experts taken for the blocks.

:class:`BlockTrace` attributes what autograd saves, and the forward FLOPs, to the block running at the time, during
the shape-only trace of :mod:`gnnperf.graph.memory`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

__all__ = ["BlockTrace", "checkpoint_blocks"]


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


def _storage_bytes(tensors: dict[int, torch.Tensor]) -> int:
    return sum(t.untyped_storage().nbytes() for t in tensors.values())


@dataclass
class BlockTrace:
    """Saved tensors and forward FLOPs of one traced forward, split by the block that ran them.

    Attributes:
        weights: ids of the model's parameters and buffers, never counted (they are the weights).
        outside: saved tensors (by storage) outside every block.
        inputs: the blocks' input tensors (what a checkpointed block keeps).
        per_block: saved tensors of each block.
        block_flops: forward FLOPs inside blocks; ``total_flops`` of the whole forward (matrix products and
            convolutions, as ``torch.utils.flop_counter`` counts them).
    """

    weights: set[int] = field(default_factory=set)
    outside: dict[int, torch.Tensor] = field(default_factory=dict)
    inputs: dict[int, torch.Tensor] = field(default_factory=dict)
    per_block: list[dict[int, torch.Tensor]] = field(default_factory=list)
    block_flops: int = 0
    total_flops: int = 0
    _current: int | None = None

    def _add(self, to: dict[int, torch.Tensor], t: torch.Tensor) -> None:
        """``t``'s storage (the base of a view) into ``to``, unless it is a weight; holding it keeps its id unique."""
        base = t if t._base is None else t._base
        if id(base) not in self.weights:
            to[id(base)] = base

    def save(self, t: torch.Tensor) -> None:
        """Record one tensor autograd saved, where it was saved."""
        self._add(self.outside if self._current is None else self.per_block[self._current], t)

    @property
    def blocks(self) -> int:
        return len(self.per_block)

    def plain_bytes(self) -> int:
        """Bytes saved with no checkpointing: every saved tensor once."""
        every = dict(self.outside)
        for saved in self.per_block:
            every.update(saved)
        return _storage_bytes(every)

    def checkpointed_bytes(self) -> int:
        """Peak saved bytes with every block checkpointed: outside + block inputs + the largest block's own."""
        kept = {**self.outside, **self.inputs}
        largest = max(
            (_storage_bytes({k: t for k, t in saved.items() if k not in kept}) for saved in self.per_block),
            default=0,
        )
        return _storage_bytes(kept) + largest

    @property
    def recompute_share(self) -> float:
        """The blocks' share of the forward FLOPs: what a checkpointed backward pass runs again."""
        return self.block_flops / self.total_flops if self.total_flops else 0.0

    @contextmanager
    def hooks(self, model: nn.Module, flops) -> Iterator[BlockTrace]:
        """Track the running block through ``model``'s blocks; ``flops`` is a running ``FlopCounterMode``."""
        handles = []
        start: list[int] = []

        def enter(index: int):
            def pre(module, args, kwargs):
                self._current = index
                start.append(flops.get_total_flops())
                for t in (*args, *kwargs.values()):
                    if isinstance(t, torch.Tensor) and t.is_floating_point():
                        self._add(self.inputs, t)

            return pre

        def leave(module, args, kwargs, output):
            self._current = None
            self.block_flops += flops.get_total_flops() - start.pop()

        for i, (_, block) in enumerate(checkpoint_blocks(model)):
            self.per_block.append({})
            handles.append(block.register_forward_pre_hook(enter(i), with_kwargs=True))
            handles.append(block.register_forward_hook(leave, with_kwargs=True))
        try:
            yield self
        finally:
            for h in handles:
                h.remove()
            self.total_flops = flops.get_total_flops()
