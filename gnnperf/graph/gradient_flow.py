"""Which gradients the backward pass holds at each moment, from the order of the forward's ops.

The backward pass runs the forward's ops in reverse. A tensor's gradient exists from the backward of the last op that
read the tensor (it starts there, and later readers' parts are added to it) to the backward of the op that made it
(which turns it into its inputs' gradients and drops it). So, at the backward of op j, the gradients held are those
of the differentiable tensors made at or before op j and read at or after it: the op's own output and inputs, and
any tensor that skips past it (a residual branch). The loss's first gradients are two of these (cross-entropy's
log-softmax and the logits, the logits' size each, in fp32 under autocast as the trace casts them).
A weight's gradient is made at the backward of the last op that read it or a view of it; under autocast, where
the weight was cast: the half copy's gradient is in flight from its readers' backward to the cast's, which makes the
weight's gradient from it once the readers have released what they saved (the copy among it).

:class:`OpLog` records, during the shape-only trace (:func:`gnnperf.graph.saved.trace_saved`), each op's inputs and outputs by
storage (a view, and ``_unsafe_view`` which the op schemas do not mark, shares its base's storage, as its gradient
mostly does) and how many tensors autograd had saved by then; :meth:`OpLog.flow` turns that into, per save index,
the gradients in flight and where each weight's gradient is made. With them the estimate is within 1% of torch's
memory profiler on a CPU step for transformers, ViTs, MLPs (fp32 and CPU autocast) and, checkpointed, LLaMA, ViT
and ConvNeXt blocks; CPU steps of ResNet-50, ConvNeXt and VGG hold more, in tensors the profiler labels temporary
or unknown (``experiments/memory``, ``tests/graph/test_memory.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["OpLog"]


def _key(t: torch.Tensor) -> int:
    """A tensor's storage: views and aliases of one tensor share it."""
    return t.untyped_storage()._cdata


class OpLog(TorchDispatchMode):
    """Each op's save index, input storages and floating-point output storages (with their bytes), in order.

    ``saves``: how many tensors autograd has saved so far (the trace's counter); an op's inputs are saved before it
    runs, its outputs after, so an op's moment is the save index of the next op.
    """

    def __init__(self, saves: Callable[[], int]) -> None:
        super().__init__()
        self.saves = saves
        self.ops: list[tuple[int, list[int], list[tuple[int, int]]]] = []
        # every logged tensor stays alive, so that no storage key is reused
        self._held: list[torch.Tensor] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if outs:  # not the device and size queries
            ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
            self._held += ins + outs
            made = [(_key(t), t.untyped_storage().nbytes()) for t in outs if t.is_floating_point()]
            self.ops.append((self.saves(), [_key(t) for t in ins], made))
        return out

    def flow(
        self,
        weights: Iterable[torch.Tensor],
        copies: Iterable[tuple[torch.Tensor, int]],
        trainable: set[int],
    ) -> tuple[dict[int, int], list[int]]:
        """``(where each weight's gradient is made, the gradients' bytes in flight)``, both by save index.

        Args:
            weights: the weights and buffers.
            copies: each autocast copy of a weight, with the id of the weight. A copy's gradient (in the half
                type) is in flight from the backward of its last reader to that of the cast, which makes the
                weight's gradient from it once the readers have released what they saved (the copy among it): at
                the moment before the cast.
            trainable: ids of the weights that get a gradient.
        """
        weight_of = {_key(t): id(t) for t in weights}
        copy_of = {_key(t): w for t, w in copies if w in trainable}
        saves = self.saves()  # all of the trace's, once it is done
        ends = [s for s, _, _ in self.ops[1:]] + [saves]
        made_at: dict[int, int] = {}
        made_by, read_by, nbytes = {}, {}, {}  # per differentiable tensor, a weight's copy among them
        for j, (start, ins, outs) in enumerate(self.ops):
            differentiable = False
            cast = any(k in copy_of for k, _ in outs)
            for k in ins:
                if k in weight_of:
                    made_at[weight_of[k]] = start if cast else ends[j]
                    differentiable |= weight_of[k] in trainable
                if k in made_by:
                    read_by[k] = j
                    differentiable = True
            if differentiable:
                for k, n in outs:
                    if k not in weight_of and k not in made_by:
                        made_by[k], read_by[k], nbytes[k] = j, j, n
        step = [0] * (len(self.ops) + 1)
        for k, n in nbytes.items():
            step[max(made_by[k] - (k in copy_of), 0)] += n  # a copy's also at the moment before its cast
            step[read_by[k] + 1] -= n
        in_flight, held = [0] * (saves + 1), 0
        for j, end in enumerate(ends):
            held += step[j]
            in_flight[end] = max(in_flight[end], held)
        return made_at, in_flight
