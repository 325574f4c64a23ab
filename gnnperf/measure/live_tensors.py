"""The live tensors of a training step at their most, by torch's memory profiler: a check of the memory estimate.

The harness's peak memory is the CUDA allocator's; on a CPU the resident size also counts what is not a tensor (the
math library's buffers). Torch's memory profiler (``profile_memory=True``, ``export_memory_timeline``) follows every
tensor of a step and labels it, so on any machine the tensors a step holds at once can be set beside
:func:`gnnperf.graph.memory.training_memory` (``tests/graph/test_memory.py``, ``experiments/memory``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
from torch import nn

from gnnperf.measure.harness import MODEL_DTYPE, TrainingLoss

__all__ = ["LABELS", "ddp_live_peak_mb", "fsdp_live_peak_mb", "inference_live_peak_mb", "live_peak_mb"]

# export_memory_timeline's columns after the first: torch.profiler._memory_profiler's categories in its plot order
LABELS = (
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
)


def live_peak_mb(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer] | None = None,
    autocast: torch.dtype | None = None,
    profiled: bool = True,
    accumulate: int = 1,
    upcast: bool = False,
    before_pass: Callable[[bool], None] | None = None,
    warmup: int = 1,
) -> dict[str, float]:
    """MB of live tensors by label (:data:`LABELS`) at the moment they add up to the most, in one CPU training step
    with the harness's loss, after a first step that creates the optimizer's state. ``optimizer``: made from the
    parameters; by default the harness's SGD (momentum 0.9). ``autocast``: the forward and loss under CPU autocast
    to that type (its op lists are not CUDA's: compare where they agree). ``profiled=False``: the same two steps,
    unprofiled, returning nothing (the other processes of a sharded run, which must run the same collectives).
    ``accumulate``: each step's gradients summed over that many forward and backward passes of ``inputs``.
    ``upcast``: the loss in fp32, as the harness computes it for an fp16 or bf16 model. ``before_pass``: called
    before each forward and backward pass with whether it is the step's last (FSDP2's
    ``set_requires_gradient_sync``). ``warmup``: the unprofiled steps before (the first makes the optimizer's
    state)."""
    model.train()
    params = list(model.parameters())
    opt = optimizer(params) if optimizer else torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    loss = TrainingLoss(upcast=upcast)

    amp = torch.autocast("cpu", dtype=autocast) if autocast is not None else nullcontext()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for i in range(accumulate):
            if before_pass is not None:
                before_pass(i == accumulate - 1)
            with amp:
                value = loss(model(*inputs))
            value.backward()
        opt.step()

    for _ in range(warmup):
        step()
    if not profiled:
        step()
        return {}
    cpu = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(
        activities=cpu, profile_memory=True, record_shapes=True, with_stack=True
    ) as prof:
        step()
    sizes = _timeline(prof)
    at = sizes.sum(1).argmax()
    return {label: float(v / 2**20) for label, v in zip(LABELS, sizes[at], strict=True)}


def _timeline(prof: torch.profiler.profile) -> np.ndarray:
    """The profiled step's live bytes by label (:data:`LABELS`), one row per moment."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "timeline.json"
        prof.export_memory_timeline(str(path), device="cpu")
        return np.array(json.loads(path.read_text())[1], dtype=float)[:, 1:]  # the first column is unused


def inference_live_peak_mb(
    model: nn.Module, inputs: tuple[torch.Tensor, ...], autocast: torch.dtype | None = None
) -> float:
    """MB of the live tensors at their most in one CPU inference step (``torch.no_grad``, eval mode, after one
    unprofiled), the model's weights among them; ``autocast``: under CPU autocast to that type."""
    model.eval()
    amp = torch.autocast("cpu", dtype=autocast) if autocast is not None else nullcontext()

    def step() -> None:
        with torch.no_grad(), amp:
            model(*inputs)

    step()
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        profile_memory=True,
        record_shapes=True,
        with_stack=True,
    ) as prof:
        step()
    return float(_timeline(prof).sum(1).max() / 2**20)


def fsdp_live_peak_mb(
    ref: str,
    input_shape: tuple[int, ...],
    batch: int,
    processes: int,
    attempts: int = 5,
    accumulate: int = 1,
    param_dtype: str | None = None,
    reshard_after_forward: bool = True,
    sync_every_pass: bool = True,
    shard_devices: int | None = None,
    checkpointing: bool | str = False,
) -> dict[str, float]:
    """:func:`live_peak_mb` of the first of ``processes`` CPU processes (``torchrun``, gloo) training ``ref``
    sharded with PyTorch's FSDP2 ``fully_shard`` as :class:`gnnperf.graph.fsdp.FsdpShards` assumes (each repeated
    block a unit, then the root), at ``batch`` samples a process. The first process alone is profiled. The memory
    timeline's own consistency check (``version mismatch``) fails on some runs, where a tensor the collectives
    write in gloo's threads is versioned out of the order it sees (a ViT's runs more often than not, an LLM's about
    one in three here), so a failed run is run again, up to ``attempts`` runs. ``accumulate``: as
    :func:`live_peak_mb`'s (the gradients reduce-scattered after every pass, FSDP2's default). ``param_dtype``
    (``bf16``, ``fp16``): FSDP2's ``MixedPrecisionPolicy(param_dtype=..., reduce_dtype=torch.float32)``, the passes
    in that type over fp32 shards, the loss in fp32. ``reshard_after_forward``: ``fully_shard``'s, for the blocks.
    ``sync_every_pass`` False: ``set_requires_gradient_sync(False)`` for every pass but the last. ``shard_devices``:
    hybrid sharding, ``fully_shard`` over a 2-D mesh of ``processes / shard_devices`` replicas x ``shard_devices``.
    ``checkpointing``: the model library's activation checkpointing of its blocks on, before they are sharded
    (:func:`~gnnperf.graph.checkpointing.library_checkpointing`); ``"selective"``: the blocks checkpointed by op
    (:func:`~gnnperf.graph.checkpointing.selective_checkpointing`).

    Raises:
        RuntimeError: every run failed (the last one's error output).
    """
    options = [param_dtype or "-", str(int(reshard_after_forward)), str(shard_devices or processes)]
    how = (accumulate, sync_every_pass, checkpointing)
    return _launch("fsdp", ref, input_shape, batch, processes, attempts, *how, options)


def ddp_live_peak_mb(
    ref: str,
    input_shape: tuple[int, ...],
    batch: int,
    processes: int,
    attempts: int = 5,
    accumulate: int = 1,
    sync_every_pass: bool = True,
    bucket_view: bool = False,
    checkpointing: bool | str = False,
) -> dict[str, float]:
    """:func:`fsdp_live_peak_mb` with ``torch.nn.parallel.DistributedDataParallel`` (25 MB buckets), profiled after
    two unprofiled steps (DDP rebuilds its buckets in the second); ``sync_every_pass`` False: every pass but the last
    under ``no_sync``; ``bucket_view``: ``gradient_as_bucket_view``; ``checkpointing``: as
    :func:`fsdp_live_peak_mb`'s."""
    how = (accumulate, sync_every_pass, checkpointing)
    return _launch("ddp", ref, input_shape, batch, processes, attempts, *how, [str(int(bucket_view))])


def _launch(
    parallel: str,
    ref: str,
    input_shape: tuple[int, ...],
    batch: int,
    processes: int,
    attempts: int,
    accumulate: int,
    sync_every_pass: bool,
    checkpointing: bool | str,
    options: list[str],
) -> dict[str, float]:
    """Run :func:`_distributed_process` on ``processes`` CPU processes until one run's profile passes its check."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "live.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
        shape = ",".join(map(str, input_shape))
        cmd += [
            "-m",
            __name__,
            parallel,
            ref,
            shape,
            str(batch),
            str(out),
            str(accumulate),
            str(int(sync_every_pass)),
            checkpointing if isinstance(checkpointing, str) else str(int(checkpointing)),
            *options,
        ]
        for _ in range(attempts):
            done = subprocess.run(
                cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}
            )
            if done.returncode == 0:
                return json.loads(out.read_text())
    raise RuntimeError(f"{ref} on {processes} processes failed {attempts} times:\n{done.stderr[-3000:]}")


def _distributed_process(
    parallel: str,
    ref: str,
    input_shape: tuple[int, ...],
    batch: int,
    out: Path,
    accumulate: int,
    sync_every_pass: bool,
    checkpointing: bool | str,
    options: list[str],
) -> None:
    """One process of :func:`fsdp_live_peak_mb`'s or :func:`ddp_live_peak_mb`'s run (``parallel``); the first writes
    its live tensors at their most to ``out``."""
    import torch.distributed as dist

    from gnnperf.graph.checkpointing import SELECTIVE, library_checkpointing, selective_checkpointing
    from gnnperf.zoo.resolve import resolve

    dist.init_process_group("gloo")
    spec = resolve(ref)
    torch.manual_seed(0)
    model = spec.build()
    if checkpointing == SELECTIVE:
        selective_checkpointing(model)
    elif checkpointing:
        library_checkpointing(model, True)
    if parallel == "ddp":
        model = nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=options[0] == "1")
        upcast, warmup = False, 2
        # no_sync, pass by pass: the flag its context manager sets
        sync = lambda last: setattr(model, "require_backward_grad_sync", last)  # noqa: E731
    else:
        param_dtype, reshard, shard_devices = options[0], options[1] == "1", int(options[2])
        model = _fully_sharded(model, None if param_dtype == "-" else param_dtype, reshard, shard_devices)
        upcast, warmup = param_dtype != "-", 1
        sync = model.set_requires_gradient_sync
    first = dist.get_rank() == 0
    inputs = spec.make_inputs(batch, input_shape)
    # False: the gradients kept whole and summed until the last pass, which reduces them
    live = live_peak_mb(
        model,
        inputs,
        profiled=first,
        accumulate=accumulate,
        upcast=upcast,
        before_pass=None if sync_every_pass else sync,
        warmup=warmup,
    )
    if first:
        out.write_text(json.dumps(live))
    dist.destroy_process_group()


def _fully_sharded(model: nn.Module, param_dtype: str | None, reshard: bool, shard_devices: int) -> nn.Module:
    """``model`` under FSDP2 as :class:`gnnperf.graph.fsdp.FsdpShards` assumes: each repeated block a unit, then the
    root; over a 2-D mesh of replicas x ``shard_devices`` where that is fewer than the processes (hybrid)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from gnnperf.graph.checkpointing import checkpoint_blocks

    dtype = MODEL_DTYPE.get(param_dtype)
    policy = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32 if dtype else None)
    replicas = dist.get_world_size() // shard_devices
    shape, names = (
        ((replicas, shard_devices), ("replicate", "shard")) if replicas > 1 else ((shard_devices,), None)
    )
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    for _, block in checkpoint_blocks(model):
        fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


if __name__ == "__main__":  # a process of fsdp_live_peak_mb's or ddp_live_peak_mb's run
    _distributed_process(
        sys.argv[1], sys.argv[2], tuple(int(v) for v in sys.argv[3].split(",")), int(sys.argv[4]), Path(sys.argv[5]),
        int(sys.argv[6]), sys.argv[7] == "1", {"0": False, "1": True}.get(sys.argv[8], sys.argv[8]), sys.argv[9:],
    )  # fmt: skip
