"""A prediction request: a model reference, a device and the workload (:class:`Query`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from gnnperf.predictor.parallel import GPUS_PER_MACHINE  # (no heavy imports)

if TYPE_CHECKING:  # the package's heavy imports stay lazy (predict start-up)
    from gnnperf.graph.fsdp import FsdpPolicy
    from gnnperf.measure.workload import Workload
    from gnnperf.predictor.parallel import Cluster


@dataclass(frozen=True)
class Query:
    """One prediction request (GUIDE "Model reference" and workload fields; see :class:`Workload`).

    ``batch_size`` is per device; ``num_devices`` > 1 is a data-parallel iteration, run by ``parallel``: ``dp``,
    ``torch.nn.DataParallel``, as learned (the torchvision GPU benchmark's rows, 1-4 GPUs, are the only multi-GPU
    training data of the shipped predictor), or ``ddp``, ``DistributedDataParallel``: one device's predicted step
    plus the gradient all-reduce it does not hide, or ``fsdp``, fully sharded: the memory of a device's shard
    (:class:`gnnperf.graph.fsdp.FsdpShards`) and one device's step plus the collectives it does not hide
    (:mod:`gnnperf.predictor.parallel`; both composed, not learned).
    ``h2d`` puts the host-to-device copy of the inputs inside the predicted time, as that benchmark timed it.
    ``activation_checkpointing`` checkpoints the model's repeated blocks: the step's memory as traced that way, its
    time plus the blocks' recomputed forward pass (:mod:`gnnperf.predictor.recompute`, composed, not learned);
    ``"selective"``: by op, as torchtitan does (:mod:`gnnperf.graph.checkpointing`): the blocks keep the outputs of
    every other matrix product and of attention, and recompute the rest.
    ``fsdp_param_dtype`` (``bf16``, ``fp16``): fully sharded with FSDP2's ``MixedPrecisionPolicy(param_dtype=...,
    reduce_dtype=torch.float32)``: the passes in that type over the ``fp32`` model's shards (weights, gradients,
    optimizer state), the weights gathered in it and the gradients reduce-scattered in fp32.
    ``fsdp_reshard_after_forward`` False: each block's weights stay gathered from its forward pass to its backward
    pass (FSDP2 ``fully_shard(reshard_after_forward=False)``, one all-gather a step).
    ``fsdp_sync_every_pass`` False, with ``grad_accum`` > 1: FSDP2's ``set_requires_gradient_sync(False)`` for every
    micro-batch but the last, the gradients kept whole and reduce-scattered once (FSDP1's ``no_sync``).
    ``fsdp_shard_devices``: hybrid sharding (HSDP), sharded over groups of that many devices (such as a machine's)
    and replicated across the groups, which all-reduce their gradient shards.
    ``ddp_bucket_view``: DDP's ``gradient_as_bucket_view=True``, the gradients views into its buckets (no second copy).
    ``grad_accum`` > 1 sums the gradients of that many micro-batches of ``batch_size`` before each optimizer update:
    the iteration is the whole update's (:mod:`gnnperf.predictor.accumulation`, composed, not learned).
    ``gpus_per_machine`` GPUs share a machine's peer link; a DDP or FSDP job on more spans machines, whose collectives
    cross ``network`` (:class:`gnnperf.predictor.parallel.Cluster`: the NICs, such as ``8x400gbit``, or a measured
    all-reduce bus bandwidth, such as ``380gbs``; None: not priced, and the prediction says so). ``DataParallel`` is
    one process: at most ``gpus_per_machine`` devices.
    """

    model: str
    hardware: str
    batch_size: int
    input_shape: tuple[int, ...] | None = None
    precision: str = "fp32"
    mode: str = "train"
    optimizer: str | None = None
    timed: str | None = None
    memory_format: str = "contiguous"
    h2d: bool = False
    num_devices: int = 1
    parallel: str = "dp"
    activation_checkpointing: bool | str = False
    grad_accum: int = 1
    fsdp_param_dtype: str | None = None
    fsdp_reshard_after_forward: bool = True
    fsdp_sync_every_pass: bool = True
    fsdp_shard_devices: int | None = None
    ddp_bucket_view: bool = False
    gpus_per_machine: int = GPUS_PER_MACHINE
    network: str | None = None

    def __post_init__(self) -> None:
        from gnnperf.errors import GnnperfError
        from gnnperf.graph.checkpointing import SELECTIVE
        from gnnperf.predictor.parallel import check_parallel

        check_parallel(self.parallel)
        if self.activation_checkpointing not in (False, True, SELECTIVE):
            raise GnnperfError(
                f"activation_checkpointing must be True, False or '{SELECTIVE}', got {self.activation_checkpointing!r}"
            )
        cluster = self.cluster  # checks both fields
        if self.parallel == "dp" and self.num_devices > cluster.gpus_per_machine:
            raise GnnperfError(
                f"torch.nn.DataParallel runs in one process on one machine: {self.num_devices} devices are more "
                f"than its {cluster.gpus_per_machine} GPUs (--gpus-per-machine); --parallel ddp or fsdp spans machines"
            )
        if self.network is not None and self.parallel == "dp":
            raise GnnperfError(
                "a network between machines is for --parallel ddp or fsdp, which span machines"
            )
        if self.fsdp_param_dtype is not None:
            if self.fsdp_param_dtype not in ("bf16", "fp16"):
                raise GnnperfError(f"bad fsdp_param_dtype '{self.fsdp_param_dtype}': expected bf16 or fp16")
            if self.parallel != "fsdp" or self.precision != "fp32" or self.mode != "train":
                raise GnnperfError(
                    "FSDP's mixed precision casts an fp32 model's shards for the passes of a training step: it "
                    "needs --parallel fsdp, --precision fp32 (the shards' type) and --mode train"
                )
        if not self.fsdp_reshard_after_forward and self.parallel != "fsdp":
            raise GnnperfError(
                "resharding after the forward pass is fully sharded data parallel's: --parallel fsdp"
            )
        k = self.grad_accum
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise GnnperfError(f"bad grad_accum {k!r}: expected a positive number of micro-batches")
        if self.ddp_bucket_view and self.parallel != "ddp":
            raise GnnperfError(
                "gradients as views into DDP's buckets are DistributedDataParallel's: --parallel ddp"
            )
        if (shard := self.fsdp_shard_devices) is not None and (
            self.parallel != "fsdp"
            or isinstance(shard, bool)
            or not isinstance(shard, int)
            or shard < 1
            or (self.num_devices > shard and self.num_devices % shard)
        ):
            raise GnnperfError(
                f"bad fsdp_shard_devices {shard!r}: hybrid sharding is --parallel fsdp over groups of devices that "
                f"divide --num-devices ({self.num_devices})"
            )
        if not self.fsdp_sync_every_pass and (self.parallel != "fsdp" or k == 1):
            raise GnnperfError(
                "leaving the gradients unsynced until the last micro-batch is for fully sharded gradient "
                "accumulation: --parallel fsdp and --grad-accum K > 1"
            )
        if k > 1 and (self.mode != "train" or self.timed == "fwd"):
            raise GnnperfError(
                "gradient accumulation sums the gradients of several backward passes: it needs a training step "
                "that times one"
            )
        # a list or a numpy array from a Python caller becomes the tuple that keys the prediction's caches
        if self.input_shape is not None:
            object.__setattr__(self, "input_shape", tuple(int(d) for d in self.input_shape))

    @property
    def passes_precision(self) -> str:
        """The precision the forward and backward passes run in: ``fsdp_param_dtype``, else ``precision``."""
        return self.fsdp_param_dtype or self.precision

    @property
    def fsdp_policy(self) -> FsdpPolicy:
        """How fully sharded data parallel shards the blocks (its options as :class:`FsdpPolicy`)."""
        from gnnperf.graph.fsdp import FsdpPolicy

        # no more devices than a group: sharded over all of them
        groups = self.fsdp_shard_devices is not None and self.num_devices > self.fsdp_shard_devices
        shard = self.fsdp_shard_devices if groups else None
        return FsdpPolicy(
            self.fsdp_param_dtype, self.fsdp_reshard_after_forward, self.fsdp_sync_every_pass, shard
        )

    @property
    def training_memory_options(self) -> tuple[str, bool, int, FsdpPolicy, bool]:
        """What a training step's memory estimate takes beside the workload, in the order of
        :func:`~gnnperf.graph.memory.training_memory`'s arguments after it (``grad_accum`` at most 2: every pass after
        the first holds its gradients alike)."""
        k = min(self.grad_accum, 2)
        return (self.parallel, self.activation_checkpointing, k, self.fsdp_policy, self.ddp_bucket_view)

    @property
    def cluster(self) -> Cluster:
        """The machines a job on several GPUs spans (``gpus_per_machine`` and ``network`` as :class:`Cluster`)."""
        from gnnperf.predictor.parallel import Cluster

        return Cluster(self.gpus_per_machine, self.network)

    def workload(self, input_shape: Iterable[int]) -> Workload:
        """The query's workload at the model's resolved per-sample ``input_shape`` (every other field its own)."""
        from gnnperf.measure.workload import Workload

        same = {f.name: getattr(self, f.name) for f in fields(Workload) if f.name != "input_shape"}
        return Workload(input_shape=tuple(input_shape), **same)

    @classmethod
    def from_sample(cls, row: Mapping[str, Any], hardware: str | None = None) -> Query:
        """The query of a sample row (GUIDE "Sample schema"), on its own device unless ``hardware`` is given."""
        from gnnperf.data.processing import workload_from_row

        w = workload_from_row(row)
        return cls(
            model=str(row["model_ref"]), hardware=hardware or str(row["hardware"]), batch_size=w.batch_size,
            input_shape=w.input_shape, precision=str(row["precision"]), mode=w.mode, optimizer=w.optimizer,
            timed=w.timed, memory_format=w.memory_format, h2d=w.h2d, num_devices=w.num_devices,
        )  # fmt: skip
