"""What a checkpoint's training covered, and which queries leave it (gnnperf.predictor.coverage)."""

from __future__ import annotations

from dataclasses import replace

from gnnperf.hardware.table import get_spec, spec_to_dict
from gnnperf.predictor.coverage import hardware_outside_range


def test_a_device_beyond_the_training_devices_data_sheets_is_named_field_by_field() -> None:
    trained = [spec_to_dict(get_spec(name)) for name in ("t4", "a100-sxm4-40gb")]
    assert hardware_outside_range(trained, get_spec("v100-sxm2-16gb")) == []  # between the two on every field
    b200 = hardware_outside_range(trained, get_spec("b200"))
    assert "peak_fp16_tensor_tflops=2250 (trained 65..312)" in b200
    assert "mem_bandwidth_gbs=8000 (trained 320..1555)" in b200
    # below the range counts too; a field the device lacks is not checked
    p4 = hardware_outside_range(trained, get_spec("p4"))
    assert "peak_fp32_tflops=5.5 (trained 8.1..19.5)" in p4
    assert not any(f.startswith("peak_fp16_tensor_tflops") for f in p4)


def test_only_training_devices_of_the_same_kind_set_the_range() -> None:
    gpu = spec_to_dict(get_spec("a100-sxm4-40gb"))
    cpu = replace(get_spec("t4"), name="some-cpu", kind="cpu", peak_fp32_tflops=1.0)
    assert hardware_outside_range([gpu], cpu) == []  # no CPU in training: left to unseen_on_kind
    assert hardware_outside_range([gpu, spec_to_dict(cpu)], replace(cpu, peak_fp32_tflops=2.0)) == [
        "peak_fp32_tflops=2 (trained 1..1)"
    ]
