import math

import numpy as np

import gnnperf.hardware as hw
from gnnperf.hardware.table import get_spec, load_table
from gnnperf.hardware.vector import HARDWARE_FEATURES, hardware_vector, precision_peak_tflops


def _named(spec):
    return dict(zip(HARDWARE_FEATURES, hardware_vector(spec), strict=True))


def test_every_table_entry_gives_a_finite_vector():
    for spec in load_table().values():
        vec = hardware_vector(spec)
        assert vec.dtype == np.float32 and vec.shape == (len(HARDWARE_FEATURES),)
        assert np.isfinite(vec).all(), spec.name


def test_feature_names_are_unique_and_documented():
    from gnnperf.hardware import vector

    assert len(set(HARDWARE_FEATURES)) == len(HARDWARE_FEATURES)
    for name in HARDWARE_FEATURES:
        stem = name.replace("missing_", "").split("_")[0]
        assert stem in vector.__doc__, name


def test_two_gpus_differ():
    assert not np.array_equal(
        hardware_vector(get_spec("rtx-3090")), hardware_vector(get_spec("a100-sxm4-40gb"))
    )
    # Same chip, different memory: still distinguishable.
    assert not np.array_equal(
        hardware_vector(get_spec("v100-pcie-16gb")), hardware_vector(get_spec("v100-pcie-32gb"))
    )


def test_values_and_missing_indicators():
    v100 = _named(get_spec("v100-sxm2-16gb"))
    assert v100["log1p_peak_bf16_tflops"] == 0 and v100["missing_peak_bf16_tflops"] == 1
    assert v100["missing_peak_fp16_tensor_tflops"] == 0
    assert math.isclose(v100["log1p_peak_fp32_tflops"], math.log1p(15.7), rel_tol=1e-6)
    assert math.isclose(v100["log1p_ridge_fp32_flop_per_byte"], math.log1p(15.7e3 / 900), rel_tol=1e-6)
    assert math.isclose(v100["log1p_ridge_matrix_flop_per_byte"], math.log1p(125e3 / 900), rel_tol=1e-6)
    assert v100["kind_gpu"] == 1 and v100["kind_cpu"] == 0 and v100["vendor_nvidia"] == 1
    assert v100["isa_avx512"] == 0 and v100["log1p_threads"] == 0
    mi = _named(get_spec("mi250"))
    assert mi["vendor_amd"] == 1 and mi["vendor_nvidia"] == 0
    b200 = _named(get_spec("b200"))
    assert b200["missing_boost_clock_mhz"] == 1 and b200["log1p_boost_clock_ghz"] == 0


def test_each_precision_runs_at_its_own_data_sheet_rate_or_none():
    a100, titan_xp, t4 = (get_spec(n) for n in ("a100-sxm4-40gb", "titan-xp", "t4"))
    assert precision_peak_tflops(a100, "fp32") == a100.peak_fp32_tflops
    assert precision_peak_tflops(a100, "amp_fp16") == a100.peak_fp16_tensor_tflops
    assert precision_peak_tflops(a100, "tf32") == a100.peak_fp16_tensor_tflops / 2
    assert precision_peak_tflops(a100, "amp_bf16") == a100.peak_bf16_tflops
    # no tensor cores (Pascal): no FP16 rate of its own; Turing: FP16 tensor cores, but no BF16 and no TF32
    assert (
        precision_peak_tflops(titan_xp, "fp16") is None
        and precision_peak_tflops(titan_xp, "amp_fp16") is None
    )
    assert precision_peak_tflops(t4, "amp_fp16") == t4.peak_fp16_tensor_tflops
    assert precision_peak_tflops(t4, "amp_bf16") is None and precision_peak_tflops(t4, "tf32") is None
    # AMD: TF32 matrix mode from CDNA3 on (MI300X data sheet: 653.7 dense), none on CDNA2
    assert precision_peak_tflops(get_spec("mi300x"), "tf32") == 653.7
    assert precision_peak_tflops(get_spec("mi250-gcd"), "tf32") is None


def test_lazy_package_exports():
    assert hw.HARDWARE_FEATURES is HARDWARE_FEATURES
    assert np.array_equal(hw.hardware_vector(hw.get_spec("t4")), hardware_vector(get_spec("t4")))
