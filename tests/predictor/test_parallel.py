"""DistributedDataParallel and FSDP composed from one device's step and the collectives it does not hide."""

from __future__ import annotations

import pytest

from gnnperf.errors import GnnperfError
from gnnperf.hardware.table import load_table
from gnnperf.predictor.parallel import (
    BACKWARD_SHARE,
    BUCKET_MB,
    LINK_EFFICIENCY,
    allreduce_ms,
    ddp_step,
    fsdp_step,
    link_gbs,
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
    step = ddp_step(100.0, params, "amp_fp16", 8, "nvlink3-600gbs", "a100-sxm4-40gb")
    gbs = 300 * LINK_EFFICIENCY["nvlink"]
    assert step.link_gbs == gbs
    assert step.allreduce_ms == pytest.approx(allreduce_ms(4 * params, 8, gbs))
    assert step.exposed_ms == pytest.approx(allreduce_ms(BUCKET_MB * 2**20, 8, gbs))
    assert step.iteration_ms == pytest.approx(100.0 + step.exposed_ms)


def test_a_short_step_waits_for_the_all_reduce_it_could_not_hide():
    params = 1_000_000_000  # 4 GB of gradients over PCIe 3
    step = ddp_step(50.0, params, "fp32", 4, "pcie3x16", "v100-pcie-16gb")
    assert step.exposed_ms == pytest.approx(step.allreduce_ms - BACKWARD_SHARE * 50.0)
    # half-precision weights have half-precision gradients: half the bytes
    half = ddp_step(50.0, params, "fp16", 4, "pcie3x16", "v100-pcie-16gb")
    assert half.allreduce_ms == pytest.approx(step.allreduce_ms / 2)


def test_one_device_all_reduces_nothing_and_a_device_without_a_link_figure_is_a_user_error():
    assert ddp_step(10.0, 10**6, "fp32", 1, "pcie4x16", "a10").iteration_ms == 10.0
    with pytest.raises(GnnperfError, match="gh200: interconnect 'nvlink-c2c-900gbs' gives no GPU-to-GPU"):
        ddp_step(10.0, 10**6, "fp32", 2, "nvlink-c2c-900gbs", "gh200")
    with pytest.raises(GnnperfError, match="bad parallel 'zero2': expected one of dp, ddp, fsdp"):
        Query("timm:resnet50", "a10", 8, parallel="zero2")


def test_fsdp_gathers_the_weights_twice_and_reduce_scatters_the_gradients_each_hidden_by_its_pass():
    params = 250_000_000  # 1 GB of fp32 weights and gradients, 8 GPUs over NVLink 3
    gbs = 300 * LINK_EFFICIENCY["nvlink"]
    once = allreduce_ms(4 * params, 8, gbs) / 2  # 7/8 of the bytes through each link
    long = fsdp_step(200.0, params, "amp_bf16", 8, "nvlink3-600gbs", "a100-sxm4-80gb")
    assert (long.gather_ms, long.reduce_scatter_ms, long.link_gbs) == (
        pytest.approx(once),
        pytest.approx(once),
        gbs,
    )
    assert long.exposed_ms == 0 and long.iteration_ms == 200.0  # both passes longer than their collectives
    short = fsdp_step(5.0, params, "amp_bf16", 8, "nvlink3-600gbs", "a100-sxm4-80gb")
    forward, backward = (1 - BACKWARD_SHARE) * 5.0, BACKWARD_SHARE * 5.0
    assert short.exposed_ms == pytest.approx(once - forward + 2 * once - backward)
    assert fsdp_step(5.0, params, "bf16", 8, "nvlink3-600gbs", "a").gather_ms == pytest.approx(once / 2)
    # each device updates its eighth of the weights
    updating = fsdp_step(200.0, params, "amp_bf16", 8, "nvlink3-600gbs", "a", update_ms=16.0)
    assert updating.sharded_update_ms == pytest.approx(14.0) and updating.iteration_ms == pytest.approx(186.0)
    # mixed precision: the weights gathered in bf16, the gradients reduce-scattered in fp32; the step's bf16 update
    # (8 ms) becomes an eighth of the fp32 one (16 ms)
    mixed = fsdp_step(
        5.0, params, "fp32", 8, "nvlink3-600gbs", "a", 8.0, param_dtype="bf16", shard_update_ms=16.0
    )
    assert (mixed.gather_ms, mixed.reduce_scatter_ms) == (pytest.approx(once / 2), pytest.approx(once))
    assert mixed.sharded_update_ms == pytest.approx(8.0 - 16.0 / 8)
    # the weights kept gathered from the forward pass: the backward pass hides the reduce-scatter alone
    kept = fsdp_step(5.0, params, "amp_bf16", 8, "nvlink3-600gbs", "a", gathers=1)
    assert kept.exposed_ms == pytest.approx(once - forward + once - backward)
    with pytest.raises(GnnperfError, match="gh200: interconnect 'nvlink-c2c-900gbs' gives no GPU-to-GPU"):
        fsdp_step(10.0, 10**6, "fp32", 2, "nvlink-c2c-900gbs", "gh200")
