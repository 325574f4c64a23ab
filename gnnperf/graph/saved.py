"""What autograd saves in one traced training forward, and what the backward pass holds going back through it.

:func:`trace_saved` runs a model under :func:`torch.autograd.graph.saved_tensors_hooks` (on the meta device, with
fake tensors, or on real ones; as on a GPU: :mod:`gnnperf.graph.as_on_gpu`) and returns a :class:`ForwardTrace`:
each saved tensor once per storage, in the order of the saves; with ``by_block``, split by the blocks activation
checkpointing would recompute (:mod:`gnnperf.graph.checkpointing`) with the forward FLOPs inside them; and, from
the op log of :mod:`gnnperf.graph.gradient_flow`, where each weight's gradient is made and the gradients in flight.
:meth:`ForwardTrace.backward_peak_bytes` walks the backward pass back through the saves with them; the step's
estimate around it is :mod:`gnnperf.graph.memory`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.checkpoint import CheckpointPolicy
from torch.utils.flop_counter import FlopCounterMode

from gnnperf.graph.as_on_gpu import CudaAutocast, as_on_gpu
from gnnperf.graph.checkpointing import checkpoint_blocks, selective_policy
from gnnperf.graph.gradient_flow import OpLog

__all__ = ["ForwardTrace", "saved_activation_bytes", "trace_saved"]


def _base(t: torch.Tensor) -> torch.Tensor:
    """The tensor that owns ``t``'s storage (``t`` itself unless it is a view)."""
    return t if t._base is None else t._base


def _storage_bytes(tensors: dict[int, torch.Tensor]) -> int:
    return sum(t.untyped_storage().nbytes() for t in tensors.values())


@dataclass
class ForwardTrace:
    """What one traced forward saved for the backward pass, in order, split by the block that ran it, with its FLOPs.

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
    # per block, the outputs selective checkpointing keeps (gnnperf.graph.checkpointing.selective_policy), the save
    # index each was made at (where autograd saves it too, first_saved rules), and the forward FLOPs of the ops that
    # made them (products, fused attention: not recomputed)
    selected: list[dict[int, torch.Tensor]] = field(default_factory=list)
    selected_at: dict[int, int] = field(default_factory=dict)
    selected_flops: int = 0
    # fused attention's forward FLOPs (the trace's own op, which the FLOP counter does not see): all, and in blocks
    attention_flops: int = 0
    block_attention_flops: int = 0
    _current: int | None = None
    _policy: Callable[..., Any] | None = None  # the running block's (selective_policy: one per block call)

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

    def select(self, *outputs: torch.Tensor, flops: int = 0) -> None:
        """Record outputs of an op the selective policy keeps, made in the running block (outside one: nothing)."""
        if self._current is None:
            return
        for t in outputs:
            self.selected_at.setdefault(id(_base(t)), self.saves)
            self._add(self.selected[self._current], t)
        self.selected_flops += flops

    def fused_attention(self, *outputs: torch.Tensor, flops: int) -> None:
        """Record a fused attention: its FLOPs, and its outputs, which the selective policy keeps."""
        self.attention_flops += flops
        if self._current is not None:
            self.block_attention_flops += flops
        self.select(*outputs, flops=flops)

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

    def backward_peak_bytes(
        self,
        gradient_bytes: Mapping[int, int],
        checkpointed: bool = False,
        in_block: Sequence[int] = (),
        accumulating: bool = False,
        until_done: Sequence[int] = (),
        selective: bool = False,
    ) -> int:
        """The most saved tensors and gradients (``gradient_bytes``, by weight id) held at once in the backward pass.

        Going back through the saves, at index k it still holds the tensors first saved before k, the weights'
        gradients made at k or after (:attr:`gradient_made_at`; a weight no op read, from the start) and the
        gradients in flight at k (:attr:`in_flight`). ``checkpointed``: it keeps what is saved outside the blocks
        and the blocks' inputs; a block's own saved tensors are recomputed when the backward pass is back at the
        block's end and freed as they are without checkpointing. ``in_block``: bytes held besides while the backward
        pass is in each block (FSDP's gathered weights; the trace split by block). ``accumulating``: a backward pass
        after the first of an accumulated step, which holds every gradient from its start and adds each new one
        into it (the new one held as it is made, then freed). ``until_done``: bytes held besides from the backward
        pass's start until it is done with each block (FSDP's weights, where it does not reshard them after the
        forward pass). ``selective``: checkpointed selectively, each block also keeps what the policy selected.
        """
        kept, own = self._checkpointed(selective) if checkpointed else (self._every(), [])
        freed = [0] * (self.saves + 1)  # by index, bytes freed when the backward pass is back there
        for key, t in kept.items():
            freed[self.first_saved.get(key, self.selected_at.get(key))] += t.untyped_storage().nbytes()
        made = [0] * (self.saves + 1)
        for weight, nbytes in gradient_bytes.items():
            made[self.gradient_made_at.get(weight, self.saves)] += nbytes
        recomputed = [0] * (self.saves + 2)  # changes by index (recomputed saves, in_block), summed below
        for (_, end), saved in zip(self.spans, own, strict=False):  # own: empty without checkpointing
            for key, t in saved.items():
                recomputed[self.first_saved[key] + 1] += t.untyped_storage().nbytes()
                recomputed[end + 1] -= t.untyped_storage().nbytes()
        for (start, end), nbytes in zip(self.spans, in_block, strict=True) if in_block else ():
            recomputed[start + 1] += nbytes
            recomputed[end + 1] -= nbytes
        for (start, _), nbytes in zip(self.spans, until_done, strict=True) if until_done else ():
            recomputed[start + 1] += nbytes
        held, peak, rebuilt = sum(made), 0, 0  # at index 0: every gradient, no saved tensor
        for k in range(self.saves + 1):
            rebuilt += recomputed[k]
            new = made[k] if accumulating else 0  # added into the gradient held since the start
            peak = max(peak, held + self.in_flight[k] + rebuilt + new)
            held += freed[k] - (0 if accumulating else made[k])
        return max(peak, held)

    def _every(self) -> dict[int, torch.Tensor]:
        every = dict(self.outside)
        for saved in self.per_block:
            every.update(saved)
        return every

    def _checkpointed(
        self, selective: bool = False
    ) -> tuple[dict[int, torch.Tensor], list[dict[int, torch.Tensor]]]:
        """With every block checkpointed: what is kept (saved outside the blocks, the blocks' inputs; ``selective``:
        and what the policy selected) and each block's own saved tensors, which its recomputation makes again."""
        kept = {**self.outside, **self.inputs}
        for selected in self.selected if selective else ():
            kept.update(selected)
        return kept, [{k: t for k, t in saved.items() if k not in kept} for saved in self.per_block]

    def checkpointed_bytes(self, selective: bool = False) -> int:
        """Peak saved bytes with every block checkpointed: what is kept + the largest block's own."""
        kept, own = self._checkpointed(selective)
        return _storage_bytes(kept) + max(map(_storage_bytes, own), default=0)

    def recompute_share(self, selective: bool = False) -> float:
        """The share of the forward FLOPs a checkpointed backward pass runs again: the blocks' (``selective``: but
        the ops whose outputs the policy kept)."""
        total = self.total_flops + self.attention_flops
        again = self.block_flops + self.block_attention_flops - (self.selected_flops if selective else 0)
        return again / total if total else 0.0

    @contextmanager
    def hooks(self, model: nn.Module, flops) -> Iterator[ForwardTrace]:
        """Track the running block through ``model``'s blocks; ``flops`` is a running ``FlopCounterMode``."""
        handles = []
        start: list[int] = []

        def enter(index: int):
            def pre(module, args, kwargs):
                self._current, self._policy = index, selective_policy()
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
            self.selected.append({})
            self.spans.append((0, 0))
            handles.append(block.register_forward_pre_hook(enter(i), with_kwargs=True))
            handles.append(block.register_forward_hook(leave, with_kwargs=True))
        try:
            yield self
        finally:
            for h in handles:
                h.remove()
            self.total_flops = flops.get_total_flops()


class _Selected(TorchDispatchMode):
    """Asks the running block's selective policy of each op, and tells ``trace`` the outputs it keeps (with a matrix
    product's FLOPs). Fused attention is the trace's own op (:mod:`gnnperf.graph.as_on_gpu`), which reports its
    outputs itself; the policy keeps them all."""

    forward = SimpleNamespace(is_recompute=False)  # the policy's context: the forward pass

    def __init__(self, trace: ForwardTrace) -> None:
        super().__init__()
        self.trace = trace

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        policy = self.trace._policy if self.trace._current is not None else None
        if policy is not None and policy(self.forward, func, *args) == CheckpointPolicy.MUST_SAVE:
            mm = func is torch.ops.aten.mm.default
            flops = 2 * args[0].shape[0] * args[0].shape[1] * args[1].shape[1] if mm else 0
            self.trace.select(*(t for t in tree_leaves(out) if isinstance(t, torch.Tensor)), flops=flops)
        return out


def trace_saved(
    model: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    autocast: torch.dtype | None = None,
    by_block: bool = False,
    loss: Callable[[Any], torch.Tensor] | None = None,
) -> ForwardTrace:
    """What autograd saves for the backward pass in one training-mode forward of ``model`` on ``inputs``.

    Parameters and buffers are not counted (they are the weights); a tensor saved by several ops, or through
    several views, is counted once. ``autocast``: the half-precision type of CUDA autocast, traced on any device.
    ``loss``: applied to the output in the same trace (the harness's cross-entropy keeps its log-softmax, the size
    of the logits, in fp32).
    ``by_block``: split the saved tensors and the forward FLOPs by the blocks activation checkpointing would
    recompute (:mod:`gnnperf.graph.checkpointing`); without it no hook or FLOP counter joins the trace.
    The op log of the gradients in flight (:mod:`gnnperf.graph.gradient_flow`) keeps every tensor of the forward
    until the trace returns: free on the meta device and with fake tensors, a real forward's whole memory on a CPU.
    """
    weights = [*model.parameters(), *model.buffers()]
    trace = ForwardTrace(weights={id(t) for t in weights})

    def pack(t: torch.Tensor) -> torch.Tensor:
        trace.save(t)
        return t

    model.train()
    amp = CudaAutocast(autocast, trace.copied) if autocast is not None else nullcontext()
    ops = OpLog(lambda: trace.saves)
    with ExitStack() as stack:
        if by_block:
            flops = stack.enter_context(FlopCounterMode(display=False))
            stack.enter_context(trace.hooks(model, flops))
            stack.enter_context(_Selected(trace))
        attention = trace.fused_attention if by_block else None
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), as_on_gpu(attention), amp, ops:
            out = model(*inputs)
            if loss is not None:
                loss(out)
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    trace.gradient_made_at, trace.in_flight = ops.flow(weights, trace.copies, trainable)
    return trace


def saved_activation_bytes(
    model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], autocast: torch.dtype | None = None
) -> int:
    """Bytes autograd saves for the backward pass in one training-mode forward (:func:`trace_saved`)."""
    return trace_saved(model, inputs, autocast).plain_bytes()
