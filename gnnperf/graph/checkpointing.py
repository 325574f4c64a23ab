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
the shape-only trace of :mod:`gnnperf.graph.memory`, and keeps the order of the saves, which the backward pass runs
back through (:meth:`BlockTrace.backward_peak_bytes`), with the gradients it holds on the way
(:mod:`gnnperf.graph.gradient_flow`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from gnnperf.errors import GnnperfError

__all__ = ["BlockTrace", "checkpoint_blocks", "library_checkpointing"]


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


def _base(t: torch.Tensor) -> torch.Tensor:
    """The tensor that owns ``t``'s storage (``t`` itself unless it is a view)."""
    return t if t._base is None else t._base


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
    # the order of the saves, which the backward pass runs back through: per saved storage (and block input) the
    # index of its first save (autograd frees it when the backward pass is back there), per block the indices it ran
    # from and to; copies: a weight's autocast copies, with the weight's id
    first_saved: dict[int, int] = field(default_factory=dict)
    spans: list[tuple[int, int]] = field(default_factory=list)
    copies: list[tuple[torch.Tensor, int]] = field(default_factory=list)
    saves: int = 0
    # by save index, from the order of the ops (gnnperf.graph.gradient_flow): where each weight's gradient is made
    # (by weight id), and the bytes of the gradients in flight
    gradient_made_at: dict[int, int] = field(default_factory=dict)
    in_flight: list[int] = field(default_factory=list)
    _current: int | None = None

    def _add(self, to: dict[int, torch.Tensor], t: torch.Tensor) -> None:
        """``t``'s storage (the base of a view) into ``to``, unless it is a weight; holding it keeps its id unique."""
        base = _base(t)
        if id(base) not in self.weights:
            to[id(base)] = base

    def save(self, t: torch.Tensor) -> None:
        """Record one tensor autograd saved, where and when it was saved."""
        base = _base(t)
        if id(base) not in self.weights:
            self.first_saved.setdefault(id(base), self.saves)
        self.saves += 1
        self._add(self.outside if self._current is None else self.per_block[self._current], t)

    def copied(self, original: torch.Tensor, copy: torch.Tensor) -> None:
        """Record an autocast copy of ``original``: its gradient is in flight until the cast makes the weight's
        (:mod:`gnnperf.graph.gradient_flow`)."""
        if id(original) in self.weights:
            self.copies.append((copy, id(original)))

    @property
    def blocks(self) -> int:
        return len(self.per_block)

    def plain_bytes(self) -> int:
        """Bytes saved with no checkpointing: every saved tensor once."""
        return _storage_bytes(self._every())

    def backward_peak_bytes(self, gradient_bytes: Mapping[int, int], checkpointed: bool = False) -> int:
        """The most saved tensors and gradients (``gradient_bytes``, by weight id) held at once in the backward pass.

        Going back through the saves, at index k it still holds the tensors first saved before k, the weights'
        gradients made at k or after (:attr:`gradient_made_at`; a weight no op read, from the start) and the
        gradients in flight at k (:attr:`in_flight`). ``checkpointed``: it keeps what is saved outside the blocks
        and the blocks' inputs; a block's own saved tensors are recomputed when the backward pass is back at the
        block's end and freed as they are without checkpointing.
        """
        kept, own = self._checkpointed() if checkpointed else (self._every(), [])
        freed = [0] * (self.saves + 1)  # by index, bytes freed when the backward pass is back there
        for key, t in kept.items():
            freed[self.first_saved[key]] += t.untyped_storage().nbytes()
        made = [0] * (self.saves + 1)
        for weight, nbytes in gradient_bytes.items():
            made[self.gradient_made_at.get(weight, self.saves)] += nbytes
        recomputed = [0] * (self.saves + 2)  # changes by index, summed below
        for (_, end), saved in zip(self.spans, own, strict=False):  # own: empty without checkpointing
            for key, t in saved.items():
                recomputed[self.first_saved[key] + 1] += t.untyped_storage().nbytes()
                recomputed[end + 1] -= t.untyped_storage().nbytes()
        held, peak, rebuilt = sum(made), 0, 0  # at index 0: every gradient, no saved tensor
        for k in range(self.saves + 1):
            rebuilt += recomputed[k]
            peak = max(peak, held + self.in_flight[k] + rebuilt)
            held += freed[k] - made[k]
        return max(peak, held)

    def _every(self) -> dict[int, torch.Tensor]:
        every = dict(self.outside)
        for saved in self.per_block:
            every.update(saved)
        return every

    def _checkpointed(self) -> tuple[dict[int, torch.Tensor], list[dict[int, torch.Tensor]]]:
        """With every block checkpointed: what is kept (saved outside the blocks, the blocks' inputs) and each
        block's own saved tensors, which its recomputation makes again."""
        kept = {**self.outside, **self.inputs}
        return kept, [{k: t for k, t in saved.items() if k not in kept} for saved in self.per_block]

    def checkpointed_bytes(self) -> int:
        """Peak saved bytes with every block checkpointed: outside + block inputs + the largest block's own."""
        kept, own = self._checkpointed()
        return _storage_bytes(kept) + max(map(_storage_bytes, own), default=0)

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
                self.spans[index] = (self.saves, self.saves)
                for t in (*args, *kwargs.values()):
                    if isinstance(t, torch.Tensor) and t.is_floating_point():
                        self._add(self.inputs, t)
                        self.first_saved.setdefault(id(_base(t)), self.saves)

            return pre

        def leave(module, args, kwargs, output):
            self.spans[self._current] = (self.spans[self._current][0], self.saves)
            self._current = None
            self.block_flops += flops.get_total_flops() - start.pop()

        for i, (_, block) in enumerate(checkpoint_blocks(model)):
            self.per_block.append({})
            self.spans.append((0, 0))
            handles.append(block.register_forward_pre_hook(enter(i), with_kwargs=True))
            handles.append(block.register_forward_hook(leave, with_kwargs=True))
        try:
            yield self
        finally:
            for h in handles:
                h.remove()
            self.total_flops = flops.get_total_flops()
