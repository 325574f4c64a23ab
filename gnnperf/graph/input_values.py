"""Shape-only tracing of model code that reads values computed from its inputs alone.

The memory trace (:mod:`gnnperf.graph.memory`) runs a model on the ``meta`` device: shapes without values. Some
models read a value on the way, and the read fails there: XLM's ``assert lengths.max().item() <= slen`` on the
lengths it counts in the token ids, FSMT's ``if not padding_mask.any()``, Longformer's and LED's "does any token
attend globally?", X-MOD's per-language adapters picking their tokens with a boolean mask. Each of those values
comes from the token ids (and constants), never from a weight, so it can be computed exactly: the integer inputs
are drawn as the harness draws them (real, on the CPU), the model's weights and activations stay on ``meta``, and
:class:`InputValues` runs every op

- whose tensors are all on the CPU, or that makes a tensor from nothing (``arange``, ``ones``, on the ``meta``
  device or the inputs'), for real on the CPU: the values the inputs give; unless its result would take the
  real results past :data:`REAL_BUDGET`, when it runs on ``meta`` and a later read of it fails as before;
- that mixes CPU and ``meta`` tensors on ``meta``, the CPU tensors copied there (once each); indexing with a CPU
  boolean mask takes the mask's positions (``nonzero``, real) first, so that the result's shape is the one the
  mask gives;
- on ``meta`` tensors on ``meta``, where the code moves them to the inputs' device too (a buffer ``.to(ids.device)``).

A value read from a weight or an activation (a router's expert sizes, a quantiser's range checks) still fails.
Autograd saves the CPU tensors an op is called with, before this mode moves them, so the trace counts their bytes
as on the GPU; a CPU tensor saved again after it was copied to ``meta`` is counted twice (a mask, small beside the
activations).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

__all__ = ["REAL_BUDGET", "InputValues"]

# Bytes of the results one trace computes for real (views are free), all held until it ends (its op log keeps
# every tensor): transformers' masks for Longformer's 4 sequences of 4,096 tokens take 2.6 GiB (the 4-d mask is
# built to be sliced back to 2-d). Results past it run on meta, and a value read from one fails as before.
REAL_BUDGET = 2**32

aten = torch.ops.aten
_INDEXING = {
    aten.index.Tensor,
    aten.index_put.default,
    aten.index_put_.default,
    aten._index_put_impl_.default,
}


class InputValues(TorchDispatchMode):
    """CPU tensors run for real, ``meta`` ones shape-only, the two mixed on ``meta`` (see the module docstring);
    ``budget``: the bytes of real results (:data:`REAL_BUDGET`)."""

    def __init__(self, budget: int = REAL_BUDGET) -> None:
        super().__init__()
        self.budget = budget
        self.real_bytes = 0
        self._copies: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id -> (a CPU tensor, its meta copy)

    def _meta(self, t: Any) -> Any:
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
            return t
        held = self._copies.get(id(t))
        if held is None or held[0] is not t:  # (the CPU tensor is held, so its id is not reused)
            held = self._copies[id(t)] = (t, t.to("meta"))
        return held[1]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        devices = {t.device.type for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        if "meta" in devices and "cpu" in devices:
            mutated = func._schema.arguments[0].alias_info if func._schema.arguments else None
            if mutated is not None and mutated.is_write and args[0].device.type == "cpu":
                raise RuntimeError(
                    f"{func} writes a value computed from the weights into one from the inputs"
                )
            if func in _INDEXING:
                args = (args[0], [p for i in args[1] for p in _positions(i)], *args[2:])
            flat, spec = tree_flatten((args, kwargs))
            args, kwargs = tree_unflatten([self._meta(t) for t in flat], spec)
            return func(*args, **kwargs)
        device = getattr(kwargs.get("device"), "type", None)
        if "meta" in devices:  # shapes only, where the code asks for the inputs' device too
            return func(*args, **{**kwargs, "device": torch.device("meta")} if device == "cpu" else kwargs)
        if not devices and device not in ("cpu", "meta"):
            return func(*args, **kwargs)
        # the inputs' values and constants (made on the meta device or not): real within the budget
        if func.is_view:  # no new bytes
            return func(*args, **kwargs)
        on = {**kwargs, "device": torch.device("meta")} if device else kwargs
        try:
            probe = func(*tree_map(self._meta, args), **tree_map(self._meta, on))
        except (NotImplementedError, RuntimeError):  # no meta kernel: a read (item, nonzero), no larger
            probe = None
        size = sum(t.nbytes for t in tree_flatten(probe)[0] if isinstance(t, torch.Tensor))
        if self.real_bytes + size > self.budget:
            return probe
        self.real_bytes += size
        return func(*args, **{**kwargs, "device": torch.device("cpu")} if device else kwargs)


def _positions(index: torch.Tensor | None) -> list[torch.Tensor | None]:
    """A CPU boolean mask as the positions it selects (one long tensor per dimension it covers), else as given."""
    if index is None or index.device.type != "cpu" or index.dtype not in (torch.bool, torch.uint8):
        return [index]
    return [*index.nonzero().unbind(1)]
