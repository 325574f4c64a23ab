"""Several GPUs: DistributedDataParallel and fully sharded data parallel composed (:func:`fsdp_step`), and the floor
of a DataParallel prediction (:data:`DP_FLOOR_NOTE`).

No source gnnperf learns from timed ``DistributedDataParallel`` (DDP): the only multi-GPU training rows are the
torchvision benchmark's ``DataParallel`` ones (one process scattering each batch, 1-4 GPUs), which scale far worse.
So a DDP iteration is composed here, not learned (as the memory estimate is): one device's step plus the gradient
all-reduce its backward pass does not hide, from parts that are:

- the step of one device at the per-device batch: the GNN's prediction (DDP runs the same program on each GPU);
- the all-reduce of the gradients: a ring all-reduce moves ``2 (n - 1) / n`` times the gradient bytes through each
  GPU's link, at the link's per-direction bandwidth (:func:`link_gbs`, from the hardware table's ``interconnect``)
  times the share NCCL reaches on it (:data:`LINK_EFFICIENCY`);
- the overlap: DDP all-reduces its gradient buckets (:data:`BUCKET_MB`) while the backward pass computes the rest,
  so the iteration waits for what is left of the all-reduce after the backward pass (:data:`BACKWARD_SHARE` of the
  step; of a step with an optimizer update, which comes after the all-reduce, a little more than the backward
  pass), and at least for the last bucket, which only starts once the backward pass ends.

Left out: the all-reduce's per-call latency (tens of microseconds, so small steps are a little under-estimated),
stragglers and the host, DDP's first-iteration bucket rebuilding, and the network between machines (a prediction
for more than :data:`GPUS_PER_MACHINE` GPUs says so: ``beyond_one_machine``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gnnperf.errors import GnnperfError

if TYPE_CHECKING:
    from gnnperf.graph.fsdp import FsdpPolicy
    from gnnperf.hardware.table import HardwareSpec

# torch.nn.DataParallel (learned) | DistributedDataParallel | fully sharded data parallel (FSDP2, ZeRO-3; both
# composed here)
PARALLEL = ("dp", "ddp", "fsdp")

# Why ``Predictor.predict`` floors a DataParallel step on several GPUs at the same step on one: each GPU runs the
# one-device step on its share, plus the scatter, the weights' broadcast and the gradients' reduction. Over the
# torchvision benchmark's 2,304 (model, GPU, precision, mode, batch per GPU) pairs timed on one GPU and on more,
# the several-GPU step took 0.96-16.2x the one-GPU step (median 2.1); the 28 below 1 are fp64 steps of the TITAN Xp
# and TITAN RTX, at most 4% faster. The network learned device counts from those CNN rows alone, and for transformers
# it can say far faster: the shipped v20 did for 28 of 540 multi-GPU queries of a grid (GPT-2 and BERT, by up to
# 16%), for none of the CNNs, and the floor changes none of its predictions of the benchmark's 768 multi-GPU
# training rows, fp64 aside (experiments/torchvision_devices/results_dp_floor.json).
DP_FLOOR_NOTE = (
    "predicted faster on several GPUs than on one at the same per-device batch, so given the one-GPU time"
)

GPUS_PER_MACHINE = 8  # the most GPUs one machine of these links holds (HGX/DGX boards); more span machines
# torch's DistributedDataParallel(bucket_cap_mb=25) default
BUCKET_MB = 25.0
# The backward pass's share of a forward + backward step: the median over NeuSight's 31 single-GPU training labels
# with both parts timed (`e2e_labels_index.csv`, bwall_latency / (fw_latency + bwall_latency): 0.39-0.68, quartiles
# 0.55 and 0.65); the FLOP count's 2/3 is its upper end.
BACKWARD_SHARE = 0.64
# The bus bandwidth NCCL's all-reduce reaches at large sizes, as a share of the link's per-direction bandwidth:
# 8x A100 SXM4 (NVLink 3, 300 GB/s a direction) reach 230-250 GB/s, 8x H100 PCIe (Gen5, 63 GB/s) 35-45 GB/s
# (nccl-tests reference table, docs.alayanew.com/en/docs/tech-blog/2026-05-06-nccl-tests). AMD's Infinity Fabric
# (RCCL) is taken as NVLink: no figure for it was at hand.
LINK_EFFICIENCY = {"nvlink": 0.8, "infinity-fabric": 0.8, "pcie": 0.65}
# PCIe: GB/s per lane and direction, by generation (after line coding)
_PCIE_LANE_GBS = {3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# the grads' bytes per parameter: autocast keeps fp32 weights, so fp32 gradients
GRAD_BYTES = {"fp16": 2, "bf16": 2, "fp64": 8}

_AGGREGATE = re.compile(r"(nvlink\d*|infinity-fabric)-(\d+(?:\.\d+)?)gbs")
_PCIE = re.compile(r"pcie(\d)x(\d+)")


def link_gbs(interconnect: str) -> tuple[float, str] | None:
    """A GPU's peer-link bandwidth in GB/s per direction and its kind, from the hardware table's ``interconnect``.

    ``nvlink3-600gbs`` -> (300, nvlink): NVIDIA and AMD quote the aggregate of both directions. ``pcie4x16`` ->
    (31.5, pcie). None where the entry names no peer link with a bandwidth (``host``, ``nvlink-c2c-900gbs``: the
    CPU-GPU link of a Grace Hopper, ``infinity-fabric-oam``).
    """
    text = interconnect.strip().lower()
    if m := _AGGREGATE.fullmatch(text):
        return float(m[2]) / 2, "infinity-fabric" if m[1] == "infinity-fabric" else "nvlink"
    if (m := _PCIE.fullmatch(text)) and int(m[1]) in _PCIE_LANE_GBS:
        return _PCIE_LANE_GBS[int(m[1])] * int(m[2]), "pcie"
    return None


def _bus_gbs(interconnect: str, device: str, estimate: str) -> float:
    """The bandwidth NCCL's collectives reach over ``device``'s peer link (:data:`LINK_EFFICIENCY`).

    Raises:
        GnnperfError: the ``interconnect`` names no peer-link bandwidth, which ``estimate`` needs.
    """
    link = link_gbs(interconnect)
    if link is None:
        raise GnnperfError(
            f"{device}: interconnect '{interconnect}' gives no GPU-to-GPU bandwidth, which {estimate} estimate "
            "needs; give the device in a --hardware-file with one (such as nvlink3-600gbs or pcie4x16)"
        )
    return link[0] * LINK_EFFICIENCY[link[1]]


def allreduce_ms(nbytes: float, num_devices: int, gbs: float) -> float:
    """A ring all-reduce of ``nbytes`` over ``num_devices`` GPUs whose all-reduce bus bandwidth is ``gbs``."""
    return 2 * (num_devices - 1) / num_devices * nbytes / (gbs * 1e9) * 1e3


@dataclass(frozen=True)
class DdpStep:
    """A DDP iteration, in ms: the one-device step, the gradients' all-reduce, and the part of it not hidden."""

    step_ms: float
    allreduce_ms: float
    exposed_ms: float
    link_gbs: float  # the all-reduce's bus bandwidth used

    @property
    def iteration_ms(self) -> float:
        return self.step_ms + self.exposed_ms


def ddp_step(
    step_ms: float, num_params: int, precision: str, num_devices: int, interconnect: str, device: str
) -> DdpStep:
    """The DDP iteration of a step of ``step_ms`` on one device (see the module docstring).

    Raises:
        GnnperfError: the device's ``interconnect`` names no peer-link bandwidth.
    """
    gbs = _bus_gbs(interconnect, device, "a DistributedDataParallel")
    nbytes = num_params * GRAD_BYTES.get(precision, 4)
    if num_devices == 1 or nbytes == 0:
        return DdpStep(step_ms, 0.0, 0.0, gbs)
    total = allreduce_ms(nbytes, num_devices, gbs)
    last_bucket = allreduce_ms(min(nbytes, BUCKET_MB * 2**20), num_devices, gbs)
    exposed = max(total - BACKWARD_SHARE * step_ms, last_bucket)
    return DdpStep(step_ms, total, exposed, gbs)


@dataclass(frozen=True)
class FsdpStep:
    """A fully sharded data-parallel iteration, in ms: the one-device step, its collectives (the weights gathered for
    the forward pass and again for the backward pass, the gradients reduce-scattered), and the part not hidden."""

    step_ms: float
    gather_ms: float  # one all-gather of all the weights
    reduce_scatter_ms: float
    exposed_ms: float
    link_gbs: float
    sharded_update_ms: float = 0.0  # what updating a shard saves, at least, of the step's optimizer update

    @property
    def iteration_ms(self) -> float:
        return self.step_ms - self.sharded_update_ms + self.exposed_ms


def fsdp_step(
    step_ms: float,
    num_params: int,
    precision: str,
    num_devices: int,
    interconnect: str,
    device: str,
    update_ms: float = 0.0,
    param_dtype: str | None = None,
    shard_update_ms: float | None = None,
    gathers: int = 2,
) -> FsdpStep:
    """The FSDP iteration of a step of ``step_ms`` on one device (:class:`gnnperf.graph.fsdp.FsdpShards`).

    A ring all-gather or reduce-scatter moves ``(n - 1) / n`` of the weights' bytes through each GPU's link, half of
    an all-reduce (:func:`allreduce_ms`). Each unit's gather runs ahead of its compute, so the forward pass hides
    the first all-gather and the backward pass the second and the reduce-scatter, as far as they are shorter
    (:data:`BACKWARD_SHARE` of the step is the backward pass). Each device updates its shard of the weights:
    ``update_ms``, the step's update at its least (:func:`~gnnperf.predictor.optimizer_step.update_floor_ms`), is
    ``1 / n`` as long, a saving no larger than the real one. With FSDP2's mixed precision (``param_dtype``: the
    passes in that type over shards of ``precision``, the gradients reduced in it) the weights are gathered in
    ``param_dtype`` and the step's update (``update_ms``, in ``param_dtype``) becomes ``shard_update_ms`` (the
    update of ``precision``'s weights) on a shard. ``gathers``: 1 where the blocks keep their weights from the
    forward pass to the backward pass (no resharding after the forward pass). Left out: the first unit's gather and the last
    reduce-scatter, which nothing hides (one unit's weights each), and the collectives' per-call latency.

    Raises:
        GnnperfError: the device's ``interconnect`` names no peer-link bandwidth.
    """
    gbs = _bus_gbs(interconnect, device, "a fully sharded")
    gather = allreduce_ms(num_params * GRAD_BYTES.get(param_dtype or precision, 4), num_devices, gbs) / 2
    reduce = allreduce_ms(num_params * GRAD_BYTES.get(precision, 4), num_devices, gbs) / 2
    backward = BACKWARD_SHARE * step_ms
    exposed = max(gather - (step_ms - backward), 0.0) + max((gathers - 1) * gather + reduce - backward, 0.0)
    shard = update_ms if shard_update_ms is None else shard_update_ms
    return FsdpStep(step_ms, gather, reduce, exposed, gbs, update_ms - shard / num_devices)


def parallel_row(
    row: Mapping[str, Any],
    parallel: str,
    num_params: int,
    spec: HardwareSpec,
    num_devices: int,
    policy: FsdpPolicy | None = None,
) -> dict[str, Any]:
    """The fields that make a one-device prediction ``row`` a DDP or FSDP (``parallel``) iteration on
    ``num_devices`` GPUs of ``spec``; ``policy``: FSDP's options (:func:`fsdp_step`; with a ``param_dtype``, ``row``
    predicts the passes in that type).

    The step plus the collectives it does not hide, added to the interval's bounds as well: the collectives are a
    data-sheet estimate with no spread of their own measured. ``row[parallel]`` holds the parts.
    """
    fields: dict[str, Any] = {"num_devices": num_devices}
    if num_devices == 1 or "bwd" not in row["timed"]:  # nothing to all-reduce or shard, so no link needed
        return fields
    args = (row["iteration_time_ms"], num_params, row["precision"], num_devices, spec.interconnect, spec.name)
    step: DdpStep | FsdpStep
    if parallel == "ddp":
        step = ddp_step(*args)
        parts = {
            "allreduce_ms": step.allreduce_ms,
            "exposed_allreduce_ms": step.exposed_ms,
            "allreduce_gbs": step.link_gbs,
        }
    else:
        from gnnperf.predictor.optimizer_step import update_floor_ms  # (which imports this module)

        updates = "opt" in row["timed"] and row["optimizer"] not in (None, "none")

        def update(precision: str) -> float:
            least = update_floor_ms(num_params, row["optimizer"], precision, spec.mem_bandwidth_gbs)
            return least if updates else 0.0

        # the shards are in the row's precision; the predicted step's own update is in the passes' type
        shards = row["precision"]
        param_dtype = policy.param_dtype if policy else None
        step = fsdp_step(
            *args,
            update_ms=update(param_dtype or shards),
            param_dtype=param_dtype,
            shard_update_ms=update(shards),
            gathers=2 if policy is None or policy.reshard_after_forward else 1,
        )
        parts = {
            "all_gather_ms": step.gather_ms,
            "reduce_scatter_ms": step.reduce_scatter_ms,
            "exposed_ms": step.exposed_ms,
            "sharded_update_saves_ms": step.sharded_update_ms,
            "param_dtype": param_dtype,  # FSDP2's mixed precision: the passes' and the gathers' type
            "reshard_after_forward": policy is None or policy.reshard_after_forward,
            "link_gbs": step.link_gbs,
        }
    return {
        **fields,
        "iteration_time_ms": step.iteration_ms,
        "interval_ms": [v + step.iteration_ms - step.step_ms for v in row["interval_ms"]],
        parallel: {
            "step_ms": step.step_ms,
            **parts,
            "interconnect": spec.interconnect,
            # an 8-GPU machine is the largest with one NVLink/PCIe fabric; beyond it the rings cross the network
            "beyond_one_machine": num_devices > GPUS_PER_MACHINE,
        },
    }


def check_parallel(parallel: str) -> None:
    if parallel not in PARALLEL:
        raise GnnperfError(f"bad parallel '{parallel}': expected one of {', '.join(PARALLEL)}")
