"""Peak device memory of a training step, from what autograd saves for the backward pass.

A training step at its peak holds the weights, the optimizer state, the gradients and, above all at large
batches, the activations the forward pass saved for the backward pass. Which tensors those are is decided by
each op's autograd formula (ReLU keeps its output, a convolution its input, an add nothing; views share
storage), so instead of a rule per op type this module asks autograd: the model is built and run on the
``meta`` device (shapes and dtypes only: no memory, no arithmetic) under
:func:`torch.autograd.graph.saved_tensors_hooks`, and every saved tensor that is not a parameter or buffer is
counted once per storage. On a real CPU forward of the same model the count is the same
(``tests/graph/test_memory.py``).

Where the meta device and a GPU differ (autocast, fused attention, dropout's mask), the trace follows the GPU
(:mod:`gnnperf.graph.as_on_gpu`).

The rest (weights and buffers in the model's dtype, one gradient per trainable weight, SGD momentum or Adam's
two states, a fixed workspace for cuBLAS and cuDNN) is checked against 53 peaks measured on an H200 by this
project's harness (``torch.cuda.max_memory_allocated``; ``experiments/memory``).

The trace runs the harness's loss too (:class:`~gnnperf.measure.harness.TrainingLoss`: cross-entropy keeps its
log-softmax, the logits' size in fp32). Beyond what the whole step holds (weights, optimizer state, DDP buckets,
workspace), three moments can set its peak (:attr:`MemoryEstimate.phases_mb`):

- the backward pass, which runs back through the forward's saves, freeing each saved tensor when it is back at its
  first save and making each weight's gradient when it is back at the last op that read the weight: the most saved
  tensors and gradients held at once (:meth:`~gnnperf.graph.saved.ForwardTrace.backward_peak_bytes`), with
  the gradients in flight between the ops (:mod:`gnnperf.graph.gradient_flow`; at its start the loss's two, the
  logits' size each in fp32). A transformer's peak is near its start (all activations, few gradients), a
  small-batch ViT's near its end; summing all activations and all gradients, as the estimate did before, was up to
  30% high;
- its end, where a weight registered twice (an embedding tied to the output layer: GPT-2, BERT) has its two
  gradients summed: three gradient-sized tensors for a moment where the step keeps one (autograd's buffer of the
  two inputs and their sum; accumulating, four: the sum is then added into the gradient held since the first pass);
- the optimizer update, after the activations are freed, where Adam and AdamW as a GPU runs them (torch's default
  ``foreach`` implementation) hold the square roots of all second moments at once, a copy of the weights' size
  (:data:`_UPDATE_TEMPORARIES`).

The estimate is the largest; the latter two win for a model with more weights than activations (an LLM at a small
batch). Against torch's memory profiler on a CPU (the live tensors at their most, one SGD step) the estimate is
within 1% for 14 architectures (GPT-2, BERT, LLaMA, T5, ViTs, Swin, Mixer, DenseNet, EfficientNet, MobileNetV3,
Inception, an MLP, ...) and for LLaMA, ViT-S and ConvNeXt-T checkpointed; for RegNetY, ResNet-50 and ConvNeXt-T it
is 1-4% low, 7% for checkpointed ResNet-50 and 17% for VGG16: tensors the profiler labels temporary or unknown
(``experiments/memory``).
"""

from __future__ import annotations

import logging
from collections import Counter
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from typing import Any, NamedTuple

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from gnnperf.errors import GnnperfError
from gnnperf.graph.checkpointing import SELECTIVE, checkpoint_blocks
from gnnperf.graph.fsdp import DEFAULT_POLICY, FsdpPolicy, FsdpShards, fsdp_shards
from gnnperf.graph.input_values import InputValues
from gnnperf.graph.saved import ForwardTrace, trace_saved
from gnnperf.graph.shaped import AUTOCAST_DTYPE, build_shaped, error_line, quiet_logger, shaped_inputs
from gnnperf.measure.harness import TrainingLoss
from gnnperf.measure.workload import Workload

# cuBLAS/cuDNN workspaces and small buffers: what the rest of the estimate leaves unexplained in the H200 peaks
# below 1 GB in AMP (median 77 MB; fp32 rows leave 81-400 MB, cuDNN's autotuning workspaces; experiments/memory)
WORKSPACE_MB = 80.0
# The share of a GPU's data-sheet memory a training step can count on: the CUDA context and the caching
# allocator's fragmentation take the rest. Fitted on timm's RTX 3090 training table, where the benchmark stepped
# down from batch 512 (384, 256, 192, ...) after out-of-memory errors: at 0.88, 97% of the batches that ran are
# estimated below it and 94% of the batches that ran out above it (experiments/memory).
USABLE_SHARE = 0.88
_OPTIMIZER_STATES = {"sgd": 1, "adam": 2, "adamw": 2, "none": 0}  # the harness's SGD has momentum
# Weight-sized temporaries the update holds at once in torch's foreach implementations (the default on a GPU;
# a CPU loops over the weights one at a time): Adam and AdamW the list torch._foreach_sqrt returns, SGD with
# momentum none (it updates in place). tests/graph/test_memory.py checks them against torch's memory profiler.
_UPDATE_TEMPORARIES = {"sgd": 0, "adam": 1, "adamw": 1, "none": 0}
_MB = 2**20


@dataclass(frozen=True)
class Checkpointed:
    """Activation checkpointing of the model's repeated blocks, as traced (:mod:`gnnperf.graph.checkpointing`)."""

    blocks: int  # how many modules are checkpointed (0: the model has no repeated blocks)
    recompute_share: float  # the share of the forward FLOPs the backward pass runs again
    activations_plain_mb: float  # the saved activations without checkpointing
    selective: bool = False  # by op (gnnperf.graph.checkpointing.selective_policy), not whole blocks


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak memory of one training step on one device, in MB (2**20 bytes), by what holds it."""

    weights_mb: float
    gradients_mb: float
    optimizer_mb: float
    activations_mb: float
    workspace_mb: float
    # the most activations and gradients the backward pass holds at once (ForwardTrace.backward_peak_bytes)
    backward_mb: float
    # DistributedDataParallel's gradient buckets: a second copy of the gradients (torch's default
    # gradient_as_bucket_view=False), on each of more than one device
    ddp_buckets_mb: float = 0.0
    # with activation checkpointing: activations_mb is then the checkpointed step's peak
    checkpointing: Checkpointed | None = None
    # the optimizer update's temporaries (_UPDATE_TEMPORARIES), held after the activations are freed
    update_mb: float = 0.0
    # the end of the backward pass: two more gradients of the largest weight registered twice, while they are summed
    # (three where their sum is added into a gradient held from an earlier pass)
    tied_gradients_mb: float = 0.0
    # sharded over the devices (FSDP): weights, gradients, optimizer state and update temporaries are a device's shard
    fsdp: FsdpShards | None = None

    @property
    def held_mb(self) -> float:
        """What the whole step holds: weights, optimizer state, DDP buckets, the workspace."""
        return self.weights_mb + self.optimizer_mb + self.ddp_buckets_mb + self.workspace_mb

    @property
    def phases_mb(self) -> dict[str, float]:
        """What each moment of the step holds beyond :attr:`held_mb` (see the module docstring): ``backward``
        activations and gradients, ``tied_gradients`` and ``update`` the gradients and the moment's temporaries."""
        phases = {
            "backward": self.backward_mb,
            "tied_gradients": self.gradients_mb + self._end_of_backward_mb,
            "update": self.gradients_mb + self.update_mb,
        }
        if self.fsdp is not None and self.fsdp.forward_mb:  # sharded, the gradients whole through the passes
            phases["pass_start"] = self.gradients_mb + self.fsdp.forward_mb
        return phases

    @property
    def _end_of_backward_mb(self) -> float:
        """Beyond the gradients, at the end of the backward pass: a tied weight's two gradients being summed, then
        (sharded) the root's gradients copied for their reduce-scatter, with the root's weights gathered."""
        if self.fsdp is None:
            return self.tied_gradients_mb
        f = self.fsdp
        return f.root_mb + max(f.root_gradients_mb, f.root_whole_mb + self.tied_gradients_mb)

    @property
    def peak_at(self) -> str:
        """The moment of :attr:`phases_mb` that sets the peak (the first of equals)."""
        phases = self.phases_mb
        return max(phases, key=phases.__getitem__)

    @property
    def total_mb(self) -> float:
        """The step's peak: what it holds throughout and the largest of :attr:`phases_mb`."""
        return self.held_mb + self.phases_mb[self.peak_at]

    def as_dict(self) -> dict[str, Any]:
        """MB by what holds them, ``total_mb``, ``peak_at``, and ``checkpointing`` (a dict, or None without it)."""
        fsdp = self.fsdp and {
            k: v
            for k, v in asdict(self.fsdp).items()
            if k not in ("root_ids", "in_block_bytes", "until_done_bytes", "unsynced_extra_bytes")
        }
        return {**asdict(self), "fsdp": fsdp, "total_mb": self.total_mb, "peak_at": self.peak_at}

    def on_device(self, memory_gb: float) -> dict[str, Any]:
        """:meth:`as_dict` with the device's memory (data-sheet GB, read as GiB as vendors size it) and a verdict.

        ``verdict``: ``fits`` up to :data:`USABLE_SHARE` of the memory, ``at the limit`` up to all of it, else
        ``does not fit``; ``fits`` is true for the first.
        """
        return {**self.as_dict(), **verdict(self.total_mb, memory_gb)}


def verdict(total_mb: float, memory_gb: float) -> dict[str, Any]:
    """``device_memory_gb``, ``verdict`` (``fits`` up to :data:`USABLE_SHARE` of the device's memory, ``at the
    limit`` up to all of it, else ``does not fit``) and ``fits`` for a step's peak of ``total_mb``."""
    capacity_mb = memory_gb * 1024
    said = (
        "fits"
        if total_mb <= USABLE_SHARE * capacity_mb
        else "at the limit"
        if total_mb <= capacity_mb
        else "does not fit"
    )
    return {"device_memory_gb": memory_gb, "verdict": said, "fits": said == "fits"}


def training_memory(
    model_ref: str,
    workload: Workload,
    parallel: str = "dp",
    checkpointing: bool | str = False,
    grad_accum: int = 1,
    fsdp_policy: FsdpPolicy = DEFAULT_POLICY,
    ddp_bucket_view: bool = False,
) -> MemoryEstimate:
    """Peak memory on one device of a training step of ``model_ref`` (see the module docstring).

    ``workload.batch_size`` is per device. ``parallel`` (:data:`~gnnperf.predictor.parallel.PARALLEL`): ``dp``
    and ``ddp`` replicate the model on each of ``workload.num_devices``, ``ddp`` with DistributedDataParallel's
    gradient buckets when there is more than one; ``fsdp`` shards it over them (:class:`FsdpShards`). With
    ``checkpointing`` the model's repeated blocks are checkpointed (:mod:`gnnperf.graph.checkpointing`;
    ``"selective"``: by op, as torchtitan does). With ``grad_accum`` > 1 the step sums its gradients over that many
    forward and backward passes: every pass after the first holds all the gradients from its start (``accumulating``
    in :meth:`~gnnperf.graph.saved.ForwardTrace.backward_peak_bytes`; sharded, the gradients' shards,
    reduce-scattered after every pass as FSDP2 does by default). ``fsdp_policy``: with a
    ``param_dtype`` (:class:`FsdpPolicy`), FSDP2's mixed precision over an fp32 model: the trace runs in that type,
    the shards (weights, gradients, optimizer state) are fp32, and the gradients are cast to fp32 for their
    reduce-scatter; without ``reshard_after_forward``, the blocks' weights stay gathered until their backward pass;
    without ``sync_every_pass``, accumulated gradients are whole until the last pass; with ``shard_devices``, sharded
    over groups of that many devices (hybrid, HSDP). ``ddp_bucket_view``: DDP's ``gradient_as_bucket_view=True``, the
    gradients views into its buckets, which hold them all from the start (as a later pass of an accumulated step
    does), with no second copy (one pass: accumulating, DDP's ``no_sync`` makes them beside the buckets). The model
    runs on the ``meta``
    device, else (code that reads a value, as transformers' mask checks do, skips the read for fake tensors)
    under a :class:`FakeTensorMode`, else (code that reads a value of its inputs: XLM's lengths, Longformer's
    global attention) on ``meta`` with its integer inputs' values (:mod:`gnnperf.graph.input_values`); none
    allocates more than masks. Raises :class:`GnnperfError` for an inference workload,
    an ONNX file (no PyTorch model to trace) or a model neither can run.
    """
    from gnnperf.zoo.resolve import resolve

    if workload.mode != "train":
        raise GnnperfError("the memory estimate covers training steps only")
    fsdp = parallel == "fsdp"
    mixed = fsdp and fsdp_policy.param_dtype is not None
    if mixed:  # the passes (and so the trace) in that type; the shards in the workload's
        workload = replace(workload, precision=fsdp_policy.param_dtype)
    spec = resolve(model_ref)
    if spec.builder is None:
        raise GnnperfError(f"{spec.ref} is an ONNX file: no PyTorch model to trace, so no memory estimate")
    one = spec.make_inputs(1, workload.input_shape or None)  # real, one sample: dtypes and per-sample shapes
    failures = []
    meta = lambda: torch.device("meta")  # noqa: E731
    for name, context, values in (
        ("meta", meta, False),
        ("fake", FakeTensorMode, False),
        ("input values", meta, True),
    ):
        try:
            if values:  # integer inputs as the harness draws them (the floating ones stay shapes), one draw
                seeded = torch.Generator().manual_seed(0)
                one = spec.make_inputs(workload.batch_size, workload.input_shape or None, generator=seeded)
            # fake tensors log each op they cannot run, with its stack, before the error this turns into one line
            with context(), quiet_logger("torch._subclasses.fake_tensor", logging.CRITICAL):
                traced = _trace(spec, workload, one, checkpointing or fsdp, values)
            break
        except Exception as e:  # noqa: BLE001 - data-dependent code (.item(), nonzero) cannot run without values
            failures.append(f"{name}: {type(e).__name__}: {error_line(e)}")
    else:
        raise GnnperfError(
            f"{spec.ref}: memory not estimated, the shape-only traces failed ({'; '.join(failures)})"
        )
    trace, gradient_bytes = traced.trace, traced.gradient_bytes
    # the weights, their gradients and optimizer state sharded n ways (hybrid: over a group, replicated across groups)
    n = (fsdp_policy.shard_devices or workload.num_devices) if fsdp else 1
    # a shard's bytes per traced byte: fp32 shards of the passes' fp16/bf16 weights with FSDP's mixed precision
    shard = (2 if mixed else 1) / n
    grad_mb = sum(gradient_bytes.values()) / _MB
    backward = workload.timed != "fwd"
    gradients_mb = grad_mb * shard if backward else 0.0
    plain = trace.plain_bytes()
    selective = checkpointing == SELECTIVE
    activations = trace.checkpointed_bytes(selective) if checkpointing else plain
    share = trace.recompute_share(selective)
    checkpointed = Checkpointed(trace.blocks, share, plain / _MB, selective) if checkpointing else None
    updates = "opt" in workload.timed
    shards = (
        fsdp_shards(gradient_bytes, traced.block_weights, n, grad_accum > 1, fsdp_policy) if fsdp else None
    )
    # DDP's gradients as views into its buckets: every gradient held from the start, each new one copied in; not
    # accumulating under no_sync, where autograd makes the gradients beside the buckets, as without views (profiled)
    bucket_view = ddp_bucket_view and parallel == "ddp" and workload.num_devices > 1 and grad_accum == 1
    # every weight's whole gradient held from the start (a later pass of an accumulated step, DDP's bucket views): a
    # tied weight's two gradients' sum is a third tensor (sharded, only where the passes do not sync; under FSDP's
    # mixed precision the root's new bf16 gradients instead, FsdpShards.root_whole_mb)
    held_from_start = grad_accum > 1 or bucket_view
    summed_into_held = held_from_start and (not fsdp or not (fsdp_policy.sync_every_pass or mixed))
    at_once = activations
    if backward and shards is None:
        at_once = trace.backward_peak_bytes(
            gradient_bytes, checkpointing, accumulating=held_from_start, selective=selective
        )
    elif backward and grad_accum > 1 and not fsdp_policy.sync_every_pass:
        # every gradient whole from the start, as unsharded (FsdpShards.unsynced_extra_bytes: fp32 under mixed)
        until = shards.until_done_bytes
        at_once = trace.backward_peak_bytes(
            gradient_bytes,
            checkpointing,
            shards.in_block_bytes,
            accumulating=True,
            until_done=until,
            selective=selective,
        )
        at_once += shards.unsynced_extra_bytes + shards.root_mb * _MB
    elif backward:
        # a block's gradients are its shard once it is done, the root's whole until the backward pass ends
        held = {w: b if w in shards.root_ids else b * shard for w, b in gradient_bytes.items()}
        blocks = trace.backward_peak_bytes(
            held,
            checkpointing,
            shards.in_block_bytes,
            until_done=shards.until_done_bytes,
            selective=selective,
        )
        at_once = blocks + shards.root_mb * _MB
        if grad_accum > 1:
            # every shard held from the start, where the first pass has made none (a bound later)
            at_once += sum(gradient_bytes.values()) * shard
    return MemoryEstimate(
        weights_mb=(traced.weight_mb - traced.buffer_mb) * shard + traced.buffer_mb,
        gradients_mb=gradients_mb,
        optimizer_mb=grad_mb * shard * _OPTIMIZER_STATES[workload.optimizer] if updates else 0.0,
        activations_mb=activations / _MB,
        workspace_mb=WORKSPACE_MB,
        # (as views, the buckets are the gradients)
        ddp_buckets_mb=gradients_mb
        if parallel == "ddp" and workload.num_devices > 1 and not bucket_view
        else 0.0,
        checkpointing=checkpointed,
        update_mb=grad_mb * shard * _UPDATE_TEMPORARIES[workload.optimizer] if updates else 0.0,
        tied_gradients_mb=(3 if summed_into_held else 2) * traced.tied_mb if backward else 0.0,
        backward_mb=at_once / _MB,
        fsdp=shards if backward else None,
    )


class _Traced(NamedTuple):
    trace: ForwardTrace
    weight_mb: float  # parameters and buffers
    buffer_mb: float
    gradient_bytes: dict[int, int]  # of each trainable weight, by id
    tied_mb: float  # the largest trainable weight registered twice
    block_weights: list[set[int]]  # ids of each repeated block's trainable weights (an FSDP unit each)


def _trace(
    spec, workload: Workload, one: tuple[torch.Tensor, ...], by_block: bool, values: bool = False
) -> _Traced:
    """The model built and run in the caller's tensor context on ``one``'s shapes at the workload's batch, or with
    ``values`` on its integer tensors themselves (the workload's batch of them), the forward run under
    :class:`~gnnperf.graph.input_values.InputValues`; ``by_block``: the trace split by the repeated blocks."""
    model = build_shaped(spec, workload)
    inputs = shaped_inputs(one, workload, values)
    loss = TrainingLoss(upcast=workload.precision in ("fp16", "bf16"))  # as the harness computes it
    with spec.tracing(), InputValues() if values else nullcontext():
        trace = trace_saved(model, inputs, AUTOCAST_DTYPE.get(workload.precision), by_block, loss)
    lazy = torch.nn.parameter.UninitializedTensorMixin
    trainable = [p for p in model.parameters() if p.requires_grad and not isinstance(p, lazy)]
    buffers = [t for t in model.buffers() if not isinstance(t, lazy)]
    nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts)  # noqa: E731
    params = [p for p in model.parameters() if not isinstance(p, lazy)]
    registered = Counter(id(p) for _, p in model.named_parameters(remove_duplicate=False))
    tied = [p.numel() * p.element_size() for p in trainable if registered[id(p)] > 1]
    gradient_bytes = {id(p): p.numel() * p.element_size() for p in trainable}
    blocks = [
        {id(p) for p in block.parameters() if id(p) in gradient_bytes}
        for _, block in checkpoint_blocks(model)
    ]
    return _Traced(
        trace,
        nbytes(params + buffers) / _MB,
        nbytes(buffers) / _MB,
        gradient_bytes,
        max(tied, default=0) / _MB,
        blocks,
    )
