"""DistributedDataParallel and FSDP composed from one device's step and the collectives it does not hide."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gnnperf.errors import GnnperfError
from gnnperf.hardware.table import load_table
from gnnperf.predictor.parallel import (
    BACKWARD_SHARE,
    BUCKET_MB,
    LINK_EFFICIENCY,
    NETWORK_EFFICIENCY,
    Cluster,
    allreduce_ms,
    collective_gbs,
    ddp_step,
    fsdp_step,
    link_gbs,
    network_gbs,
    replicate_gbs,
)
from gnnperf.predictor.query import Query


@pytest.mark.parametrize(
    "interconnect, expected",
    [
        ("nvlink3-600gbs", (300.0, "nvlink")),  # vendors quote both directions together
        ("nvlink1-160gbs", (80.0, "nvlink")),
        ("infinity-fabric-896gbs", (448.0, "infinity-fabric")),
        ("pcie4x16", (pytest.approx(31.5, abs=0.1), "pcie")),
        ("pcie3x16", (pytest.approx(15.75, abs=0.1), "pcie")),
        ("PCIe5x8", (pytest.approx(31.5, abs=0.1), "pcie")),
    ],
)
def test_a_peer_links_bandwidth_per_direction_is_read_from_the_tables_interconnect(interconnect, expected):
    assert link_gbs(interconnect) == expected


@pytest.mark.parametrize("interconnect", ["host", "nvlink-c2c-900gbs", "infinity-fabric-oam", "xe-link", ""])
def test_an_interconnect_without_a_gpu_to_gpu_bandwidth_gives_none(interconnect):
    assert link_gbs(interconnect) is None


def test_every_gpu_of_the_table_but_those_without_a_peer_bandwidth_has_one():
    gpus = {name: spec for name, spec in load_table().items() if spec.kind == "gpu"}
    without = sorted(name for name, spec in gpus.items() if link_gbs(spec.interconnect) is None)
    # the GH200's C2C is its CPU link; the MI250 and Max 1550 entries give no link figure
    assert without == ["gh200", "intel-max-1550", "mi250", "mi250-gcd"]


def test_a_ring_all_reduce_moves_two_n_minus_one_over_n_of_the_bytes_through_each_link():
    assert allreduce_ms(1e9, 2, 100.0) == pytest.approx(10.0)  # 1 GB at 100 GB/s
    assert allreduce_ms(1e9, 4, 100.0) == pytest.approx(15.0)
    assert allreduce_ms(1e9, 8, 100.0) / allreduce_ms(1e9, 4, 100.0) == pytest.approx(1.75 / 1.5)


def test_a_long_backward_pass_hides_all_but_the_last_bucket():
    params = 25_000_000  # 100 MB of fp32 gradients
    gbs = 300 * LINK_EFFICIENCY["nvlink"]
    step = ddp_step(100.0, params, "amp_fp16", 8, gbs)
    assert step.link_gbs == gbs
    assert step.allreduce_ms == pytest.approx(allreduce_ms(4 * params, 8, gbs))
    assert step.exposed_ms == pytest.approx(allreduce_ms(BUCKET_MB * 2**20, 8, gbs))
    assert step.iteration_ms == pytest.approx(100.0 + step.exposed_ms)


def test_a_short_step_waits_for_the_all_reduce_it_could_not_hide():
    params = 1_000_000_000  # 4 GB of gradients over PCIe 3
    gbs = link_gbs("pcie3x16")[0] * LINK_EFFICIENCY["pcie"]
    step = ddp_step(50.0, params, "fp32", 4, gbs)
    assert step.exposed_ms == pytest.approx(step.allreduce_ms - BACKWARD_SHARE * 50.0)
    # half-precision weights have half-precision gradients: half the bytes
    half = ddp_step(50.0, params, "fp16", 4, gbs)
    assert half.allreduce_ms == pytest.approx(step.allreduce_ms / 2)


def test_one_device_all_reduces_nothing_and_a_device_without_a_link_figure_is_a_user_error():
    assert ddp_step(10.0, 10**6, "fp32", 1, 20.0).iteration_ms == 10.0
    with pytest.raises(GnnperfError, match="gh200: interconnect 'nvlink-c2c-900gbs' gives no GPU-to-GPU"):
        collective_gbs(load_table()["gh200"], 2, Cluster(), "a DistributedDataParallel")
    with pytest.raises(GnnperfError, match="bad parallel 'zero2': expected one of dp, ddp, fsdp"):
        Query("timm:resnet50", "a10", 8, parallel="zero2")


def test_fsdp_gathers_the_weights_twice_and_reduce_scatters_the_gradients_each_hidden_by_its_pass():
    params = 250_000_000  # 1 GB of fp32 weights and gradients, 8 GPUs over NVLink 3
    gbs = 300 * LINK_EFFICIENCY["nvlink"]
    once = allreduce_ms(4 * params, 8, gbs) / 2  # 7/8 of the bytes through each link
    long = fsdp_step(200.0, params, "amp_bf16", 8, gbs)
    assert (long.gather_ms, long.reduce_scatter_ms, long.link_gbs) == (
        pytest.approx(once),
        pytest.approx(once),
        gbs,
    )
    assert long.exposed_ms == 0 and long.iteration_ms == 200.0  # both passes longer than their collectives
    short = fsdp_step(5.0, params, "amp_bf16", 8, gbs)
    forward, backward = (1 - BACKWARD_SHARE) * 5.0, BACKWARD_SHARE * 5.0
    assert short.exposed_ms == pytest.approx(once - forward + 2 * once - backward)
    assert fsdp_step(5.0, params, "bf16", 8, gbs).gather_ms == pytest.approx(once / 2)
    # each device updates its eighth of the weights
    updating = fsdp_step(200.0, params, "amp_bf16", 8, gbs, update_ms=16.0)
    assert updating.sharded_update_ms == pytest.approx(14.0) and updating.iteration_ms == pytest.approx(186.0)
    # mixed precision: the weights gathered in bf16, the gradients reduce-scattered in fp32; the step's bf16 update
    # (8 ms) becomes an eighth of the fp32 one (16 ms)
    mixed = fsdp_step(5.0, params, "fp32", 8, gbs, 8.0, param_dtype="bf16", shard_update_ms=16.0)
    assert (mixed.gather_ms, mixed.reduce_scatter_ms) == (pytest.approx(once / 2), pytest.approx(once))
    assert mixed.sharded_update_ms == pytest.approx(8.0 - 16.0 / 8)
    # the weights kept gathered from the forward pass: the backward pass hides the reduce-scatter alone
    kept = fsdp_step(5.0, params, "amp_bf16", 8, gbs, gathers=1)
    assert kept.exposed_ms == pytest.approx(once - forward + once - backward)
    with pytest.raises(GnnperfError, match="gh200: interconnect 'nvlink-c2c-900gbs' gives no GPU-to-GPU"):
        collective_gbs(load_table()["gh200"], 2, Cluster(), "a fully sharded")


@pytest.mark.parametrize(
    "network, expected",
    [
        ("8x400gbit", 8 * 50 * NETWORK_EFFICIENCY),  # eight 400 Gb/s NICs a machine, at the NICs' share
        ("1x100GBPS", 12.5 * NETWORK_EFFICIENCY),
        ("2x25.5gbit", 2 * 25.5 / 8 * NETWORK_EFFICIENCY),
        ("380gbs", 380.0),  # a bus bandwidth measured by nccl-tests, as it is
        (" 42.5GB/s ", 42.5),
    ],
)
def test_a_network_is_the_nics_aggregate_rate_or_a_measured_bus_bandwidth(network, expected):
    assert network_gbs(network) == pytest.approx(expected)


@pytest.mark.parametrize("network", ["8x", "400gbit", "0x400gbit", "8x0gbit", "0gbs", "fast", "", "8x400"])
def test_a_network_in_neither_form_is_one_error_line(network):
    with pytest.raises(GnnperfError, match="bad network .*expected the machines' NICs as COUNTxGBITgbit"):
        network_gbs(network)
    with pytest.raises(GnnperfError, match="bad network"):
        Query("timm:resnet50", "a100-sxm4-80gb", 8, num_devices=16, parallel="ddp", network=network)


def test_the_rings_run_at_the_slower_of_the_gpus_link_and_the_machines_network():
    a100 = load_table()["a100-sxm4-80gb"]  # NVLink 3: 240 GB/s for NCCL
    nvlink = 300 * LINK_EFFICIENCY["nvlink"]
    slow, fast = Cluster(8, "1x100gbit"), Cluster(8, "8x400gbit")
    assert collective_gbs(a100, 8, slow, "x") == (nvlink, "link")  # one machine: the network unused
    assert collective_gbs(a100, 16, slow, "x") == (pytest.approx(12.5 * NETWORK_EFFICIENCY), "network")
    assert collective_gbs(a100, 16, fast, "x") == (nvlink, "link")  # 360 GB/s of NICs outrun NVLink 3's 240
    assert collective_gbs(a100, 16, Cluster(8), "x") == (nvlink, "link")  # no network given: not priced
    assert collective_gbs(a100, 16, Cluster(4, "100gbs"), "x") == (100.0, "network")
    assert Cluster(4).machines(16) == 4 and Cluster(8).machines(12) == 2 and Cluster(8).machines(8) == 1
    # one GPU a machine (a GH200 superchip): the ring is the network alone, no GPU-to-GPU link needed
    assert collective_gbs(load_table()["gh200"], 4, Cluster(1, "1x400gbit"), "x") == (45.0, "network")
    with pytest.raises(GnnperfError, match="bad gpus_per_machine 0"):
        Cluster(0)


def test_dataparallel_is_one_machines_and_a_network_is_for_ddp_or_fsdp():
    with pytest.raises(GnnperfError, match="DataParallel runs in one process on one machine: 16 devices"):
        Query("timm:resnet50", "a100-sxm4-80gb", 8, num_devices=16)
    Query("timm:resnet50", "a100-sxm4-80gb", 8, num_devices=16, gpus_per_machine=16)  # a 16-GPU machine
    with pytest.raises(GnnperfError, match="a network between machines is for --parallel ddp or fsdp"):
        Query("timm:resnet50", "a100-sxm4-80gb", 8, num_devices=4, network="8x400gbit")
    with pytest.raises(GnnperfError, match="bad gpus_per_machine -1"):
        Query("timm:resnet50", "a100-sxm4-80gb", 8, num_devices=4, parallel="ddp", gpus_per_machine=-1)


def test_hybrid_sharding_all_reduces_the_gradient_shards_across_the_replicas_in_the_backward_pass():
    params, gbs = 250_000_000, 300 * LINK_EFFICIENCY["nvlink"]
    flat = fsdp_step(5.0, params, "amp_bf16", 8, gbs)
    hybrid = fsdp_step(5.0, params, "amp_bf16", 8, gbs, replicas=4, replicate_gbs=45.0)
    # a ring of 4 all-reduces an eighth of the fp32 gradients, hidden by the backward pass as far as it goes
    assert hybrid.replicate_ms == pytest.approx(allreduce_ms(4 * params / 8, 4, 45.0))
    assert hybrid.exposed_ms == pytest.approx(
        flat.exposed_ms + hybrid.replicate_ms
    )  # nothing left to hide it
    assert (
        hybrid.unsynced_exposed_ms == flat.unsynced_exposed_ms
    )  # a pass that does not sync all-reduces nothing
    long = fsdp_step(2000.0, params, "amp_bf16", 8, gbs, replicas=4, replicate_gbs=45.0)
    assert long.exposed_ms == 0


def test_the_replicas_rings_share_a_machines_nics_and_stay_on_the_link_inside_one():
    a100 = load_table()["a100-sxm4-80gb"]
    nvlink = 300 * LINK_EFFICIENCY["nvlink"]
    # 8 machines of 8, a machine a group: each machine's 8 rings share its eight 400 Gb/s NICs
    assert replicate_gbs(a100, 8, 64, Cluster(8, "8x400gbit")) == (pytest.approx(45.0), "network")
    assert replicate_gbs(a100, 8, 64, Cluster(8, "3200gbs")) == (nvlink, "link")  # NICs faster than NVLink 3
    assert replicate_gbs(a100, 2, 8, Cluster(8, "8x400gbit")) == (nvlink, "link")  # one machine: no network
    assert replicate_gbs(a100, 4, 16, Cluster(8, "100gbs")) == (25.0, "network")  # 4 rings a machine
    assert replicate_gbs(a100, 8, 64, Cluster(8)) == (nvlink, "link")  # no network given: not priced


def test_gradients_as_bucket_views_are_ddps():
    with pytest.raises(GnnperfError, match="views into DDP's buckets are DistributedDataParallel's"):
        Query("timm:resnet50", "a100-sxm4-80gb", 8, num_devices=8, parallel="fsdp", ddp_bucket_view=True)


def test_hybrid_sharding_is_fsdp_over_groups_that_divide_the_devices():
    q = Query("timm:resnet50", "a100-sxm4-80gb", 8, num_devices=16, parallel="fsdp", fsdp_shard_devices=8)
    assert q.fsdp_policy.shard_devices == 8
    assert replace(q, num_devices=8).fsdp_policy.shard_devices is None  # one group: fully sharded
    for bad in ({"fsdp_shard_devices": 6}, {"fsdp_shard_devices": 0}, {"parallel": "ddp"}):
        with pytest.raises(GnnperfError, match="hybrid sharding is --parallel fsdp over groups of devices"):
            replace(q, **bad)
