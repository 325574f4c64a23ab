"""Gradient accumulation's time: one optimizer update after the gradients of several micro-batches are summed.

Composed, not learned (no source here timed an accumulated step). An iteration of ``k`` micro-batches is the step the
network predicts (one forward and backward pass and the update, with DDP's all-reduce, which runs once: the libraries
skip it in the other passes with ``no_sync``) plus ``k - 1`` passes, each:

- the network's step without the optimizer update, at most the step with it less the update's least time on a GPU
  (:func:`~gnnperf.predictor.optimizer_step.update_floor_ms`): where no GPU source timed a step without an update
  (AMP steps), the network's guess of it can come out above the step with one (:mod:`gnnperf.predictor.floors`);
- with activation checkpointing, its blocks' forward pass again (:mod:`gnnperf.predictor.recompute`);
- fully sharded, the collectives a pass does not hide, as the step's (FSDP2 gathers the weights for every pass and
  reduce-scatters the gradients after each by default), or its gathers alone where the passes before the last do not
  reduce-scatter (``set_requires_gradient_sync(False)``; :class:`~gnnperf.graph.fsdp.FsdpPolicy`);
- the gradients' sum: autograd (sharded, FSDP) adds each new gradient (shard) into the one held, reading two
  gradient-sized tensors and writing one, at the device's bandwidth (a least time, as the update's); the whole
  gradients where FSDP's passes do not reduce-scatter.

The memory estimate holds every gradient through the passes after the first (:mod:`gnnperf.graph.memory`).
Checked on this project's CPU against accumulated steps timed beside their parts (``experiments/grad_accum``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gnnperf.predictor.optimizer_step import update_floor_ms
from gnnperf.predictor.parallel import GRAD_BYTES
from gnnperf.predictor.recompute import FORWARD_SHARE

if TYPE_CHECKING:
    from gnnperf.graph.memory import Checkpointed
    from gnnperf.hardware.table import HardwareSpec

ADD_TENSORS = 3  # gradient-sized tensors the sum reads plus writes: held + new -> held


def accumulation_row(
    row: dict[str, Any],
    step_ms: float,
    bare_ms: float | None,
    micro_batches: int,
    num_params: int,
    spec: HardwareSpec,
    checkpointed: Checkpointed | None,
) -> dict[str, Any]:
    """The fields that make ``row`` (one pass with the update, as predicted: ``step_ms`` before anything composed on
    it) an iteration of ``micro_batches`` passes.

    Args:
        bare_ms: the network's step without the update, or None where ``row``'s step times none.
        checkpointed: the blocks each pass recomputes, or None.
    """
    updates = row["optimizer"] not in (None, "none") and "opt" in row["timed"]
    # the network's step, and its update, in the passes' type
    passes = row.get("fsdp_param_dtype") or row["precision"]
    least = (
        update_floor_ms(num_params, row["optimizer"], passes, spec.mem_bandwidth_gbs)
        if updates and spec.kind == "gpu"
        else 0.0
    )
    pass_ms = min(bare_ms, step_ms - least) if updates and bare_ms is not None else step_ms
    recompute = FORWARD_SHARE * checkpointed.recompute_share * pass_ms if checkpointed else 0.0
    bandwidth = spec.mem_bandwidth_gbs or 0.0
    sharded = row.get("fsdp", {})
    # else the gradients whole until the last pass, which reduce-scatters them
    synced = sharded.get("sync_every_pass", True)
    # the gradients in the reduce type (fp32 under autocast or FSDP's mixed precision), a shard each where synced
    add_bytes = ADD_TENSORS * num_params * GRAD_BYTES.get(row["precision"], 4)
    add_bytes /= sharded["shard_devices"] if sharded and synced else 1
    add_ms = add_bytes / (bandwidth * 1e9) * 1e3 if bandwidth else 0.0
    collectives = sharded.get("exposed_ms" if synced else "unsynced_pass_exposed_ms", 0.0)
    extra = (micro_batches - 1) * (pass_ms + recompute + collectives + add_ms)
    before = row["iteration_time_ms"]
    total = before + extra
    return {
        "iteration_time_ms": total,
        "interval_ms": [
            v * total / before for v in row["interval_ms"]
        ],  # the passes share one prediction error
        "grad_accumulation": {
            "micro_batches": micro_batches,
            "pass_ms": pass_ms,  # one more forward and backward pass, without the update
            "recompute_ms": recompute,
            "collectives_ms": collectives,  # fully sharded: what a pass's all-gathers and reduce-scatter add
            "gradient_sum_ms": add_ms,
            "update_ms": step_ms - pass_ms,
            "one_pass_ms": before,  # the step of one micro-batch with the update (and DDP's all-reduce)
        },
    }
