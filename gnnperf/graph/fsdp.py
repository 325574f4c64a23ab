"""Fully sharded data parallel's memory on each device: the shards each holds, the units it gathers whole.

:class:`FsdpShards` is the part of :class:`gnnperf.graph.memory.MemoryEstimate` that sharding sets; the estimate
itself is :func:`gnnperf.graph.memory.training_memory` with ``parallel="fsdp"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DEFAULT_POLICY", "FsdpPolicy", "FsdpShards", "fsdp_shards"]

_MB = 2**20


@dataclass(frozen=True)
class FsdpPolicy:
    """How the blocks are sharded: FSDP2 ``fully_shard``'s options.

    Attributes:
        param_dtype: ``MixedPrecisionPolicy(param_dtype=..., reduce_dtype=torch.float32)`` (``bf16``, ``fp16``) over
            an fp32 model: the passes in that type, the shards fp32; None: the model's own type throughout.
        reshard_after_forward: False keeps each block's weights gathered from its forward pass to the end of its
            backward pass (one all-gather a step instead of two; FSDP1's ``SHARD_GRAD_OP``, ZeRO-2's weights).
        sync_every_pass: False, with gradient accumulation: ``set_requires_gradient_sync(False)`` for every pass but
            the last, so the gradients are kept whole (in the reduce type) and summed on each device, and
            reduce-scattered once, in the last pass (FSDP1's ``no_sync``).
        shard_devices: hybrid sharding (HSDP: ``fully_shard`` over a 2-D mesh, replicas x shard): the weights,
            gradients and optimizer state sharded over groups of this many devices and replicated across the groups,
            which all-reduce their gradient shards; None: sharded over every device.
    """

    param_dtype: str | None = None
    reshard_after_forward: bool = True
    sync_every_pass: bool = True
    shard_devices: int | None = None


DEFAULT_POLICY = (
    FsdpPolicy()
)  # fully_shard's defaults: the model's own type, resharded after the forward pass


@dataclass(frozen=True)
class FsdpShards:
    """Fully sharded data parallel (PyTorch's FSDP2 ``fully_shard``, ZeRO stage 3) over ``devices``, each repeated
    block (:func:`~gnnperf.graph.checkpointing.checkpoint_blocks`: a transformer layer) one unit and the rest of the
    model (embeddings, output layer, final norm) the root's, as transformers' and torchtitan's recipes wrap it.

    Each device holds its shard of the weights, gradients and optimizer state. A unit's weights are gathered whole
    for its forward and again for its backward pass, with the next unit's gathered ahead, and its gradients are
    whole until they are reduce-scattered at the end of its backward pass; the root's weights stay gathered from
    the start of the forward pass to the end of the backward pass, when its gradients are whole and copied into the
    reduce-scatter's input, counted at once with a tied weight's two gradients (:attr:`MemoryEstimate.phases_mb`
    ``tied_gradients``, the end of the backward pass). Checked against torch's memory profiler on runs of 1, 2 and
    4 processes on a CPU (``experiments/fsdp``).
    """

    devices: int
    units: int  # the repeated blocks, each its own unit
    root_mb: float  # the root's weights, gathered whole from the forward pass to the end of the backward pass
    # the root's gradients beyond their shard at the end of the backward pass: whole, and copied into the
    # reduce-scatter's input (accumulating: and the new shard beside the one held)
    root_gradients_mb: float
    # the root's gradients beyond their shard before their reduce-scatter: whole (accumulating: beside the shard held),
    # when a tied weight's two gradients are summed (accumulating without syncing every pass: every gradient's)
    root_whole_mb: float
    largest_unit_mb: float
    root_ids: frozenset[int] = field(default=frozenset(), repr=False, compare=False)
    # by block, what its backward pass holds beyond the traced tensors (bytes): its weights and gradients whole, the
    # next block's weights gathered ahead
    in_block_bytes: tuple[int, ...] = field(default=(), repr=False, compare=False)
    # by block, what the backward pass holds from its start until it is done with the block (bytes): its weights,
    # gathered since its forward pass, where the blocks are not resharded after it
    until_done_bytes: tuple[int, ...] = field(default=(), repr=False, compare=False)
    # accumulating without syncing every pass: every gradient whole, from the start of the passes after the first,
    # beyond what the traced gradients count (in the reduce type: fp32 under mixed precision; bytes)
    unsynced_extra_bytes: int = field(default=0, repr=False, compare=False)
    # accumulating without syncing every pass, beyond the gradients' shards at the start of a forward pass after the
    # first: every gradient whole, the root's weights gathered beside their all-gather's output (FSDP2 keeps it until
    # the next all-gather) and the first block's two the same (0: no such moment, the other policies)
    forward_mb: float = 0.0


def fsdp_shards(
    gradient_bytes: dict[int, int],
    block_weights: list[set[int]],
    n: int,
    accumulating: bool = False,
    policy: FsdpPolicy = DEFAULT_POLICY,
) -> FsdpShards:
    """The units FSDP gathers whole over ``n`` devices, from each trainable weight's bytes (by id) and the weights
    of each repeated block (see :class:`FsdpShards`). ``accumulating``: a pass after the first of an accumulated
    step, whose reduce-scatter writes each new shard beside the one held, then adds it in (FSDP2 reduce-scatters
    after every pass by default). ``policy``: with a ``param_dtype``, the passes (and ``gradient_bytes``) in fp16 or
    bf16 over fp32 shards of twice the bytes, and the gradients cast to fp32 before they are copied into the
    reduce-scatter's input; without ``reshard_after_forward``, each block's weights whole from its forward pass until
    the backward pass is done with it. Without ``sync_every_pass`` (``accumulating``): every gradient whole through
    the passes (:func:`_unsynced`)."""
    units = [sum(gradient_bytes[w] for w in block) for block in block_weights]
    in_blocks = set().union(*block_weights)
    root_ids = frozenset(w for w in gradient_bytes if w not in in_blocks)
    root = sum(gradient_bytes[w] for w in root_ids)
    if accumulating and not policy.sync_every_pass:
        return _unsynced(units, root, root_ids, sum(gradient_bytes.values()), n, policy)
    # in block i's backward: its weights gathered, its gradients whole, and the weights of the block the backward
    # pass runs next (i - 1), gathered ahead; the gradients' copy into the reduce-scatter's input comes once the
    # block's saved tensors are freed, and is left out (with it, ViT-S 1.025-1.042 of the profiled peak, without
    # 1.007-1.013: experiments/fsdp)
    mixed = policy.param_dtype is not None
    shard = (2 if mixed else 1) / n
    # fp32 bytes per gradient byte in the cast and the reduce-scatter's input
    copies = 4 if mixed else 1
    kept = (
        not policy.reshard_after_forward
    )  # then a block's weights are held until it is done, and not gathered again
    during = tuple(u if kept else 2 * u + (units[i - 1] if i else 0) for i, u in enumerate(units))
    return FsdpShards(
        devices=n,
        units=len(units),
        root_mb=root / _MB,
        # whole, copied into the reduce-scatter's input (cast to fp32 first: two fp32 copies), less the shard the
        # gradients count, which is written after them (accumulating: beside the one held)
        root_gradients_mb=(1 + copies - (0 if accumulating else shard)) * root / _MB,
        root_whole_mb=(1 - (0 if accumulating else shard)) * root / _MB,
        largest_unit_mb=max(units, default=0) / _MB,
        root_ids=root_ids,
        in_block_bytes=during,
        until_done_bytes=tuple(units) if kept else (),
    )


def _unsynced(
    units: list[int], root: int, root_ids: frozenset[int], total: int, n: int, policy: FsdpPolicy
) -> FsdpShards:
    """:func:`fsdp_shards` for a pass after the first of an accumulated step whose passes before the last do not
    reduce-scatter (``policy.sync_every_pass`` False; FSDP2 ``set_requires_gradient_sync(False)``).

    Every weight's gradient is whole on each device from the pass's start, as without sharding (the traced
    ``accumulating`` backward pass); under mixed precision FSDP2 keeps it in fp32 (``unsharded_accumulated_grad``,
    twice the traced bytes) and a block's new bf16 gradients until its backward pass ends. While the backward pass
    is in a block it holds the block's weights gathered and the next block's gathered ahead. The end of the
    backward pass is the larger of two moments: a pass before the last, with every gradient whole (and a tied
    weight's two being summed; under mixed precision beside the root's new bf16 gradients, which are added into the
    fp32 ones when the pass is done with the root), and the last, with the blocks' gradients reduce-scattered to their
    shards and the root's whole gradients copied into the reduce-scatter's input. A forward pass after the first
    starts with every gradient whole too (:attr:`FsdpShards.forward_mb`)."""
    mixed = policy.param_dtype is not None
    stored = 2 if mixed else 1  # accumulated bytes per traced gradient byte
    shard = stored / n
    kept = not policy.reshard_after_forward
    new = 1 if mixed else 0  # a block's new gradients, held until the end of its backward pass
    during = tuple(new * u + (0 if kept else u + (units[i - 1] if i else 0)) for i, u in enumerate(units))
    return FsdpShards(
        devices=n,
        units=len(units),
        root_mb=root / _MB,
        # the last pass: the root's accumulated gradients and their copy for the reduce-scatter, in the reduce type,
        # before its shard is written (the optimizer freed the step before's; mixed: beside the root's new bf16
        # gradients, which the profiled runs hold then)
        root_gradients_mb=(2 * stored - shard + new) * root / _MB,
        # a pass before the last: every gradient whole, less the shards the gradients count (mixed: and the root's
        # new bf16 gradients)
        root_whole_mb=((stored - shard) * total + new * root) / _MB,
        largest_unit_mb=max(units, default=0) / _MB,
        root_ids=root_ids,
        in_block_bytes=during,
        until_done_bytes=tuple(units) if kept else (),
        unsynced_extra_bytes=(stored - 1) * total,
        forward_mb=((stored - shard) * total + 2 * root + 2 * (units[0] if units else 0)) / _MB,
    )
