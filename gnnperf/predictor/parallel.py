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

Beyond one machine (:class:`Cluster`: more GPUs than ``gpus_per_machine``) the rings cross the machines' network,
priced where the query names it (:func:`network_gbs`); a prediction that spans machines without one says so
(``beyond_one_machine`` with ``network`` None) and prices the GPUs' own link alone.

Left out: the all-reduce's per-call latency (tens of microseconds, so small steps are a little under-estimated),
stragglers and the host, DDP's first-iteration bucket rebuilding, and NCCL's tree algorithms, which on a few machines
can beat the ring's network bound.
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

GPUS_PER_MACHINE = 8  # an HGX/DGX board's GPUs: a machine's, unless the query says otherwise (Cluster)
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

# The share of the NICs' line rate a ring all-reduce's bus bandwidth reaches across machines: an assumption, not a
# measurement here. Published nccl-tests figures span a wide range for 400 Gb/s NICs: two H100 machines with eight
# 400 Gb/s InfiniBand NICs each, 400-450 GB/s expected (saturncloud.io/blog/crusoe-nccl-cluster-validation; up to
# and above the NICs' 400 because NCCL runs trees on two machines, NVIDIA/nccl-tests#196), four machines with 200
# GB/s of NICs 90 GB/s (NVIDIA/nccl#1168), two H200 NVL machines on four 400 Gb/s RoCE NICs 35 GB/s
# (kubernetes.recipes, nccl-all-reduce-perf-benchmark-multi-node). The fabric's set-up decides, so a measured bus
# bandwidth (``--network 380gbs``) is the better input.
NETWORK_EFFICIENCY = 0.9

_AGGREGATE = re.compile(r"(nvlink\d*|infinity-fabric)-(\d+(?:\.\d+)?)gbs")
_PCIE = re.compile(r"pcie(\d)x(\d+)")
_NICS = re.compile(r"(\d+)x(\d+(?:\.\d+)?)gb(?:it|ps)")  # NICs per machine x each one's Gbit/s
_BUS = re.compile(r"(\d+(?:\.\d+)?)(?:gbs|gb/s)")  # a measured all-reduce bus bandwidth, GB/s


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


def network_gbs(network: str) -> float:
    """The all-reduce bus bandwidth across machines, GB/s, from the machines' network: ``8x400gbit`` (or
    ``8x400gbps``: NICs per machine x each one's line rate in Gbit/s) is the NICs' aggregate rate at
    :data:`NETWORK_EFFICIENCY`; ``380gbs`` (or ``380GB/s``) is a bus bandwidth measured on the machines (nccl-tests'
    ``all_reduce_perf`` at large sizes, its ``busbw``), taken as it is.

    A ring all-reduce over several machines leaves each machine once per ring, and NCCL runs a ring per NIC, so a
    machine's NICs together carry what each GPU's link carries inside it, ``2 (n - 1) / n`` of the bytes: the bus
    bandwidth is at most their aggregate rate (and at most the GPUs' own link; :func:`collective_gbs`).

    Raises:
        GnnperfError: ``network`` is neither form, or names no bandwidth.
    """
    text = network.strip().lower()
    if (m := _NICS.fullmatch(text)) and int(m[1]) > 0 and float(m[2]) > 0:
        return int(m[1]) * float(m[2]) / 8 * NETWORK_EFFICIENCY
    if (m := _BUS.fullmatch(text)) and float(m[1]) > 0:
        return float(m[1])
    raise GnnperfError(
        f"bad network '{network}': expected the machines' NICs as COUNTxGBITgbit (such as 8x400gbit: eight 400 "
        "Gb/s NICs a machine) or a measured all-reduce bus bandwidth as GBSgbs (such as 380gbs)"
    )


@dataclass(frozen=True)
class Cluster:
    """The machines a job on several GPUs spans: ``gpus_per_machine`` GPUs share the peer link of the hardware
    table's ``interconnect``; the rings of a job on more GPUs cross ``network`` (:func:`network_gbs`; None: not
    priced, and the prediction says so)."""

    gpus_per_machine: int = GPUS_PER_MACHINE
    network: str | None = None

    def __post_init__(self) -> None:
        g = self.gpus_per_machine
        if isinstance(g, bool) or not isinstance(g, int) or g < 1:
            raise GnnperfError(f"bad gpus_per_machine {g!r}: expected a positive number of GPUs")
        if self.network is not None:
            network_gbs(self.network)

    def machines(self, num_devices: int) -> int:
        return -(-num_devices // self.gpus_per_machine)


def collective_gbs(
    spec: HardwareSpec, num_devices: int, cluster: Cluster, estimate: str
) -> tuple[float, str]:
    """The bus bandwidth NCCL's ring collectives reach over ``num_devices`` GPUs of ``spec`` and what bounds it:
    ``link``, the GPUs' peer link (:data:`LINK_EFFICIENCY`), or ``network``, the machines' (:func:`network_gbs`),
    whichever is slower where the GPUs span machines of ``cluster``.

    Raises:
        GnnperfError: a ring inside a machine, and the device's ``interconnect`` names no peer-link bandwidth, which
            ``estimate`` needs.
    """
    spans = cluster.machines(num_devices) > 1 and cluster.network is not None
    network = network_gbs(cluster.network) if spans else None
    if network is not None and cluster.gpus_per_machine == 1:  # one GPU a machine: no peer link in the ring
        return network, "network"
    gbs = _link_bus_gbs(spec, estimate)
    return (network, "network") if network is not None and network < gbs else (gbs, "link")


def _link_bus_gbs(spec: HardwareSpec, estimate: str) -> float:
    """The bus bandwidth NCCL reaches over ``spec``'s peer link (:data:`LINK_EFFICIENCY`).

    Raises:
        GnnperfError: the device's ``interconnect`` names no peer-link bandwidth, which ``estimate`` needs.
    """
    link = link_gbs(spec.interconnect)
    if link is None:
        raise GnnperfError(
            f"{spec.name}: interconnect '{spec.interconnect}' gives no GPU-to-GPU bandwidth, which {estimate} "
            "estimate needs; give the device in a --hardware-file with one (such as nvlink3-600gbs or pcie4x16)"
        )
    return link[0] * LINK_EFFICIENCY[link[1]]


def replicate_gbs(spec: HardwareSpec, shard: int, num_devices: int, cluster: Cluster) -> tuple[float, str]:
    """The bus bandwidth of hybrid sharding's all-reduce of the gradient shards across its replicas (groups of
    ``shard`` devices among ``num_devices``) and what bounds it, ``link`` or ``network``.

    Each of the ``shard`` rings joins the devices holding one shard, a device in each group. Inside one machine they
    run over the GPUs' link (:func:`collective_gbs`). Across machines every ring leaves each machine, and the rings of
    a machine's ``min(shard, gpus_per_machine)`` shard indices share its NICs (:func:`network_gbs`): each gets that
    share of them (one 400 Gb/s NIC per GPU of eight: 45 GB/s), and no more than the GPUs' link.
    """
    spans = cluster.machines(num_devices) > 1 and cluster.network is not None
    if not spans:  # one machine, or a network not priced
        return _link_bus_gbs(spec, "a hybrid sharded"), "link"
    share = network_gbs(cluster.network) / min(shard, cluster.gpus_per_machine)
    if cluster.gpus_per_machine == 1:
        return share, "network"
    link = _link_bus_gbs(spec, "a hybrid sharded")
    return (share, "network") if share < link else (link, "link")


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


def ddp_step(step_ms: float, num_params: int, precision: str, num_devices: int, gbs: float) -> DdpStep:
    """The DDP iteration of a step of ``step_ms`` on one device, its all-reduce at a bus bandwidth of ``gbs``
    (:func:`collective_gbs`; see the module docstring)."""
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
    # a pass that does not reduce-scatter (accumulating without syncing every pass): its gathers not hidden
    unsynced_exposed_ms: float = 0.0
    # hybrid sharding: the all-reduce of the gradient shards across the replicas, after the reduce-scatter
    replicate_ms: float = 0.0

    @property
    def iteration_ms(self) -> float:
        return self.step_ms - self.sharded_update_ms + self.exposed_ms


def fsdp_step(
    step_ms: float,
    num_params: int,
    precision: str,
    num_devices: int,
    gbs: float,
    update_ms: float = 0.0,
    param_dtype: str | None = None,
    shard_update_ms: float | None = None,
    gathers: int = 2,
    replicas: int = 1,
    replicate_gbs: float = 0.0,
) -> FsdpStep:
    """The FSDP iteration of a step of ``step_ms`` on one device (:class:`gnnperf.graph.fsdp.FsdpShards`), its
    collectives at a bus bandwidth of ``gbs`` (:func:`collective_gbs`).

    A ring all-gather or reduce-scatter moves ``(n - 1) / n`` of the weights' bytes through each GPU's link, half of
    an all-reduce (:func:`allreduce_ms`). Each unit's gather runs ahead of its compute, so the forward pass hides
    the first all-gather and the backward pass the second and the reduce-scatter, as far as they are shorter
    (:data:`BACKWARD_SHARE` of the step is the backward pass). Each device updates its shard of the weights:
    ``update_ms``, the step's update at its least (:func:`~gnnperf.predictor.optimizer_step.update_floor_ms`), is
    ``1 / n`` as long, a saving no larger than the real one. With FSDP2's mixed precision (``param_dtype``: the
    passes in that type over shards of ``precision``, the gradients reduced in it) the weights are gathered in
    ``param_dtype`` and the step's update (``update_ms``, in ``param_dtype``) becomes ``shard_update_ms`` (the
    update of ``precision``'s weights) on a shard. ``gathers``: 1 where the blocks keep their weights from the
    forward pass to the backward pass (no resharding after the forward pass). Hybrid sharding (``num_devices`` a group
    of ``replicas``): the backward pass hides each gradient shard's all-reduce across the replicas too, at
    ``replicate_gbs`` (:func:`replicate_gbs`). Left out: the first unit's gather and the last reduce-scatter (and
    all-reduce), which nothing hides (one unit's weights each), and the collectives' per-call latency.
    """
    gather = allreduce_ms(num_params * GRAD_BYTES.get(param_dtype or precision, 4), num_devices, gbs) / 2
    nbytes = num_params * GRAD_BYTES.get(precision, 4)
    reduce = allreduce_ms(nbytes, num_devices, gbs) / 2
    replicate = allreduce_ms(nbytes / num_devices, replicas, replicate_gbs) if replicas > 1 else 0.0
    backward = BACKWARD_SHARE * step_ms
    forward = max(gather - (step_ms - backward), 0.0)
    exposed = forward + max((gathers - 1) * gather + reduce + replicate - backward, 0.0)
    unsynced = forward + max((gathers - 1) * gather - backward, 0.0)
    shard = update_ms if shard_update_ms is None else shard_update_ms
    saves = update_ms - shard / num_devices
    return FsdpStep(step_ms, gather, reduce, exposed, gbs, saves, unsynced, replicate)


def parallel_row(
    row: Mapping[str, Any],
    parallel: str,
    num_params: int,
    spec: HardwareSpec,
    num_devices: int,
    policy: FsdpPolicy | None = None,
    cluster: Cluster = Cluster(),
) -> dict[str, Any]:
    """The fields that make a one-device prediction ``row`` a DDP or FSDP (``parallel``) iteration on
    ``num_devices`` GPUs of ``spec`` in machines of ``cluster``; ``policy``: FSDP's options (:func:`fsdp_step`; with
    a ``param_dtype``, ``row`` predicts the passes in that type).

    The step plus the collectives it does not hide, added to the interval's bounds as well: the collectives are a
    data-sheet estimate with no spread of their own measured. ``row[parallel]`` holds the parts.
    """
    fields: dict[str, Any] = {"num_devices": num_devices}
    if num_devices == 1 or "bwd" not in row["timed"]:  # nothing to all-reduce or shard, so no link needed
        return fields
    estimate = "a DistributedDataParallel" if parallel == "ddp" else "a fully sharded"
    # fully sharded: over every device, or (hybrid) over groups of shard_devices, replicated across them
    shard = (policy.shard_devices if policy else None) or num_devices if parallel == "fsdp" else num_devices
    gbs, bound = collective_gbs(spec, shard, cluster, estimate)
    args = (row["iteration_time_ms"], num_params, row["precision"], shard, gbs)
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
        replicas = num_devices // shard
        across = replicate_gbs(spec, shard, num_devices, cluster) if replicas > 1 else (0.0, None)
        step = fsdp_step(
            *args,
            update_ms=update(param_dtype or shards),
            param_dtype=param_dtype,
            shard_update_ms=update(shards),
            gathers=2 if policy is None or policy.reshard_after_forward else 1,
            replicas=replicas,
            replicate_gbs=across[0],
        )
        parts = {
            "shard_devices": shard,  # hybrid (HSDP): fewer than num_devices, replicated across the groups
            "replicas": replicas,
            "replicate_allreduce_ms": step.replicate_ms,
            "replicate_gbs": across[0],
            "replicate_bound": across[1],
            "all_gather_ms": step.gather_ms,
            "reduce_scatter_ms": step.reduce_scatter_ms,
            "exposed_ms": step.exposed_ms,
            "sharded_update_saves_ms": step.sharded_update_ms,
            "param_dtype": param_dtype,  # FSDP2's mixed precision: the passes' and the gathers' type
            "reshard_after_forward": policy is None or policy.reshard_after_forward,
            # False: with gradient accumulation, the passes before the last keep the gradients whole
            "sync_every_pass": policy is None or policy.sync_every_pass,
            "unsynced_pass_exposed_ms": step.unsynced_exposed_ms,
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
            "machines": cluster.machines(num_devices),
            "gpus_per_machine": cluster.gpus_per_machine,
            # beyond one machine the rings cross its network: None where the query names none (not priced)
            "beyond_one_machine": cluster.machines(num_devices) > 1,
            "network": cluster.network if cluster.machines(num_devices) > 1 else None,
            "bandwidth_bound": bound,  # what sets the collectives' bandwidth: the GPUs' link or the network
        },
    }


def check_parallel(parallel: str) -> None:
    if parallel not in PARALLEL:
        raise GnnperfError(f"bad parallel '{parallel}': expected one of {', '.join(PARALLEL)}")
