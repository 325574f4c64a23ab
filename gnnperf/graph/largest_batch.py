"""The largest per-device batch whose training step fits a device's memory, by the memory estimate
(:func:`gnnperf.graph.memory.training_memory`)."""

from __future__ import annotations

from dataclasses import replace

from gnnperf.errors import GnnperfError
from gnnperf.graph.fsdp import DEFAULT_POLICY, FsdpPolicy
from gnnperf.graph.memory import USABLE_SHARE, MemoryEstimate, training_memory
from gnnperf.measure.workload import Workload

__all__ = ["largest_batch"]


def largest_batch(
    model_ref: str,
    workload: Workload,
    memory_gb: float,
    traced: MemoryEstimate | None = None,
    parallel: str = "dp",
    checkpointing: bool = False,
    grad_accum: int = 1,
    fsdp_policy: FsdpPolicy = DEFAULT_POLICY,
    ddp_bucket_view: bool = False,
) -> int:
    """The largest per-device batch whose step fits in :data:`USABLE_SHARE` of ``memory_gb``; 0: not one sample.

    The saved activations are linear in the batch, so two traces give them for every batch: ``workload``'s batch
    (``traced``, its :func:`training_memory` when the caller has it) and batch 1 (batch 2 when ``workload``'s is 1).
    The backward pass holds at least all the activations, so no batch above the one they fill the memory at fits;
    it mostly holds less than all of them beside all the gradients, so the batch those fill it at is a first guess
    that fits (where it does not, the gradients in flight being larger, the search goes below it). Traces of the
    batches between find the largest, halving the range each time. The other moments of
    :attr:`MemoryEstimate.phases_mb` do not depend on the batch: where one does not fit, no batch does.
    """
    usable_mb = USABLE_SHARE * memory_gb * 1024
    batch = workload.batch_size

    def at(b: int) -> MemoryEstimate:
        how = (parallel, checkpointing, grad_accum, fsdp_policy, ddp_bucket_view)
        return training_memory(model_ref, replace(workload, batch_size=b), *how)

    at_batch = traced or at(batch)
    phases = at_batch.phases_mb
    if at_batch.held_mb + max(phases["tied_gradients"], phases["update"]) > usable_mb:
        return 0
    other = 2 if batch == 1 else 1
    at_other = at(other)
    per_sample = (at_batch.activations_mb - at_other.activations_mb) / (batch - other)
    if per_sample <= 0:
        raise GnnperfError(f"{model_ref}: the traced memory does not grow with the batch; no largest batch")
    # the memory left beside what the step holds and its activations at batch 0
    room = usable_mb - at_batch.held_mb - (at_batch.activations_mb - batch * per_sample)

    def fits(b: int) -> bool:
        return (at_batch if b == batch else at(b)).total_mb <= usable_mb

    low = max(0, int((room - at_batch.gradients_mb) // per_sample))  # the first guess
    high = max(0, int(room // per_sample))  # high + 1 does not fit
    if low and not fits(low):
        low, high = 0, low - 1
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low
