"""The floors under a prediction: composed in order, and the optimizer update's least time."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from gnnperf.measure.workload import Workload
from gnnperf.predictor.floors import DEVICE, UPDATE, Floors, trained_together
from gnnperf.predictor.optimizer_step import update_bytes, update_floor_ms

GPU_TRAINED = {"workload_combinations_by_kind": {"gpu": [["train", "fp32", "h2d+fwd+bwd", "contiguous"]]}}


def test_update_traffic_counts_the_default_implementations_tensors_at_the_weights_width():
    assert update_bytes(1000, "sgd", "fp32") == 8 * 1000 * 4
    assert update_bytes(1000, "adamw", "amp_fp16") == 20 * 1000 * 4  # autocast keeps fp32 weights
    assert update_bytes(1000, "adam", "bf16") == 18 * 1000 * 2
    assert update_floor_ms(10**9, "sgd", "fp32", 2000.0) == pytest.approx(16.0)  # 32 GB at 2 TB/s
    assert update_floor_ms(10**9, "sgd", "fp32", None) == 0.0


def test_the_update_floor_applies_where_the_step_without_an_update_was_in_training():
    bare = Workload(batch_size=8, input_shape=(3, 32, 32), optimizer="none", timed="fwd+bwd", h2d=True)
    assert trained_together(GPU_TRAINED, "gpu", bare)
    assert not trained_together(GPU_TRAINED, "gpu", replace(bare, precision="amp_fp16"))
    assert not trained_together(GPU_TRAINED, "gpu", replace(bare, h2d=False))
    assert not trained_together(GPU_TRAINED, "cpu", bare)
    assert not trained_together({}, "gpu", bare)  # a checkpoint that does not record it


def test_floors_compose_and_say_which_set_the_time():
    """Two GPUs with SGD >= one GPU with SGD >= one GPU without an update + the update's least time."""
    graph = SimpleNamespace(param_count=lambda: 10**9)
    spec = SimpleNamespace(kind="gpu", mem_bandwidth_gbs=2000.0)
    two = Workload(batch_size=8, input_shape=(3, 32, 32), num_devices=2, h2d=True)  # SGD, h2d+fwd+bwd+opt
    keys = [two]

    def item_of(graph, spec, workload):
        if workload not in keys:
            keys.append(workload)
        return keys.index(workload)

    floors = Floors(item_of, device=True, update=True, trained_on=GPU_TRAINED)
    floors.add(0, graph, spec, two)
    one = replace(two, num_devices=1)
    bare_one = replace(one, optimizer="none", timed="fwd+bwd")
    assert set(keys) == {two, one, bare_one, replace(two, optimizer="none", timed="fwd+bwd")}
    ms = {two: 90.0, one: 100.0, bare_one: 110.0, replace(two, optimizer="none", timed="fwd+bwd"): 50.0}
    resolved = floors.resolve([ms[k] for k in keys])
    assert resolved[keys.index(bare_one)] == (110.0, None, 0.0)
    assert resolved[keys.index(one)] == (pytest.approx(126.0), UPDATE, pytest.approx(16.0))
    assert resolved[0] == (pytest.approx(126.0), DEVICE, 0.0)  # at the one-GPU step as floored itself
    off = Floors(item_of, device=False, update=False, trained_on=GPU_TRAINED)
    off.add(0, graph, spec, two)
    assert off.resolve([ms[k] for k in keys])[0] == (90.0, None, 0.0)


def test_an_inference_step_has_no_floor():
    spec = SimpleNamespace(kind="gpu", mem_bandwidth_gbs=2000.0)
    infer = Workload(batch_size=8, input_shape=(3, 32, 32), mode="infer", timed="fwd", optimizer="none")
    floors = Floors(lambda *a: 1, device=True, update=True, trained_on=GPU_TRAINED)
    floors.add(0, SimpleNamespace(param_count=lambda: 10), spec, infer)
    assert floors.under == {0: []}
