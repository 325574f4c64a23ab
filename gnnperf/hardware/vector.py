"""The hardware feature vector: a fixed-length float32 embedding of a :class:`HardwareSpec`.

Built from the spec fields alone, so a table row, a user spec file and a probe record of the same device give
the same vector, and an unseen device is embedded from its data sheet. Missing values are 0 with their
``missing_*`` indicator set to 1; the vector never holds NaN.

| feature | value |
|---|---|
| log1p_peak_fp32_tflops | log(1 + non-tensor FP32 TFLOP/s) (CPU: measured matmul rate) |
| log1p_peak_fp16_tensor_tflops | log(1 + dense FP16 tensor/matrix TFLOP/s) |
| log1p_peak_bf16_tflops | log(1 + dense BF16 TFLOP/s) |
| log1p_peak_fp64_tflops | log(1 + FP64 TFLOP/s) |
| log1p_peak_tf32_tflops | log(1 + dense TF32 tensor TFLOP/s): half the FP16 tensor rate on NVIDIA Ampere and later, else 0 |
| log1p_mem_bandwidth_gbs | log(1 + memory bandwidth GB/s) (CPU: measured copy) |
| log1p_memory_gb | log(1 + device memory GB) |
| log1p_l2_cache_mb | log(1 + L2 / last-level cache MB) |
| log1p_sm_count | log(1 + SMs / CUs / Xe cores / CPU cores) |
| log1p_boost_clock_ghz | log(1 + boost clock GHz) |
| log1p_threads | log(1 + CPU threads in use); 0 for GPUs |
| log1p_ridge_fp32_flop_per_byte | log(1 + FP32 FLOP per byte of bandwidth), the roofline ridge point |
| log1p_ridge_matrix_flop_per_byte | the same for the fastest of FP16-tensor, BF16 and FP32 |
| missing_<field> | 1 where fp32, fp16-tensor, bf16, fp64, bandwidth, L2, SM count or clock is absent |
| kind_gpu, kind_cpu | one-hot device kind |
| vendor_nvidia, vendor_amd, vendor_intel | one-hot vendor (all 0 for others, e.g. Arm CPUs) |
| isa_avx512 | CPU with AVX-512 (``avx512f`` in ``generation``); 0 for GPUs |
| isa_bf16 | CPU with native BF16 matmul (``avx512_bf16``, ``amx`` or Arm ``bf16``); 0 for GPUs |
"""

from __future__ import annotations

import math

import numpy as np

from gnnperf.hardware.table import HardwareSpec

# (feature, spec field, scale applied before log1p)
_LOG_FIELDS: tuple[tuple[str, str, float], ...] = (
    ("log1p_peak_fp32_tflops", "peak_fp32_tflops", 1.0),
    ("log1p_peak_fp16_tensor_tflops", "peak_fp16_tensor_tflops", 1.0),
    ("log1p_peak_bf16_tflops", "peak_bf16_tflops", 1.0),
    ("log1p_peak_fp64_tflops", "peak_fp64_tflops", 1.0),
    ("log1p_mem_bandwidth_gbs", "mem_bandwidth_gbs", 1.0),
    ("log1p_memory_gb", "memory_gb", 1.0),
    ("log1p_l2_cache_mb", "l2_cache_mb", 1.0),
    ("log1p_sm_count", "sm_count", 1.0),
    ("log1p_boost_clock_ghz", "boost_clock_mhz", 1e-3),
)
# The data-sheet fields the vector takes on a log scale: where an unseen device's lie outside the training devices',
# the network extrapolates (gnnperf.predictor.coverage.hardware_outside_range).
SPEC_FIELDS: tuple[str, ...] = tuple(field for _, field, _ in _LOG_FIELDS)
_MISSING_FIELDS: tuple[str, ...] = (
    "peak_fp32_tflops",
    "peak_fp16_tensor_tflops",
    "peak_bf16_tflops",
    "peak_fp64_tflops",
    "mem_bandwidth_gbs",
    "l2_cache_mb",
    "sm_count",
    "boost_clock_mhz",
)
_KINDS = ("gpu", "cpu")
_VENDORS = ("nvidia", "amd", "intel")

HARDWARE_FEATURES: list[str] = [
    *(f for f, _, _ in _LOG_FIELDS),
    "log1p_threads",
    "log1p_ridge_fp32_flop_per_byte",
    "log1p_ridge_matrix_flop_per_byte",
    *(f"missing_{f}" for f in _MISSING_FIELDS),
    *(f"kind_{k}" for k in _KINDS),
    *(f"vendor_{v}" for v in _VENDORS),
    "isa_avx512",
    "isa_bf16",
    "log1p_peak_tf32_tflops",
]


def _log1p(value: float | None, scale: float = 1.0) -> float:
    return math.log1p(value * scale) if value else 0.0


def _ridge(tflops: float | None, bandwidth_gbs: float | None) -> float:
    """log1p of FLOP per byte at the roofline ridge; 0 when either side is unknown."""
    return _log1p(tflops * 1e3 / bandwidth_gbs) if tflops and bandwidth_gbs else 0.0


# Generations whose matrix units run TF32, at half their dense FP16 rate (A100 156 of 312, RTX 3090 35.6 of 71,
# H100 SXM 495 of 989, MI300X 653.7 of 1307.4 TFLOP/s). PyTorch runs it on MI300 only when asked
# (torch.set_float32_matmul_precision("high")), as on NVIDIA since 1.12.
TF32_GENERATIONS: dict[str, tuple[str, ...]] = {
    "nvidia": ("ampere", "ada", "hopper", "blackwell"),
    "amd": ("cdna3",),
}


def peak_tf32_tflops(spec: HardwareSpec) -> float | None:
    """Dense TF32 matrix TFLOP/s of ``spec`` (None where the device has no TF32 matrix mode)."""
    if spec.generation in TF32_GENERATIONS.get(spec.vendor, ()) and spec.peak_fp16_tensor_tflops:
        return spec.peak_fp16_tensor_tflops / 2
    return None


# The spec field holding each precision's peak rate. TF32 has none: :func:`peak_tf32_tflops` derives it.
PEAK_FIELD: dict[str, str] = {
    "fp32": "peak_fp32_tflops",
    "amp_fp16": "peak_fp16_tensor_tflops",
    "fp16": "peak_fp16_tensor_tflops",
    "amp_bf16": "peak_bf16_tflops",
    "bf16": "peak_bf16_tflops",
    "fp64": "peak_fp64_tflops",
}


def precision_peak_tflops(spec: HardwareSpec, precision: str) -> float | None:
    """The data-sheet TFLOP/s of ``spec`` at ``precision``; None where the table has no such rate.

    None means the device has no arithmetic of its own for the precision in the table (FP16 on a GPU without
    tensor cores, BF16 before Ampere, TF32 but on NVIDIA Ampere and later and AMD CDNA3): every predictor prices it at
    the FP32 peak. How such a device really runs it the table does not say: the P100 has FP16 units at twice its
    FP32 rate, while the TITAN Xp's FP16 training steps in the torchvision benchmark took a median 1.2x their
    FP32 time (0.88-2.2x over 32 CNNs).
    """
    if precision == "tf32":
        return peak_tf32_tflops(spec)
    return getattr(spec, PEAK_FIELD.get(precision, "peak_fp32_tflops")) or None


def hardware_vector(spec: HardwareSpec) -> np.ndarray:
    """The float32 feature vector of ``spec``, ordered as :data:`HARDWARE_FEATURES`."""
    matrix = max(
        (v for v in (spec.peak_fp16_tensor_tflops, spec.peak_bf16_tflops, spec.peak_fp32_tflops) if v),
        default=None,
    )
    isa = set(spec.generation.split("+")) if spec.kind == "cpu" else set()
    values = [
        *(_log1p(getattr(spec, field), scale) for _, field, scale in _LOG_FIELDS),
        _log1p(spec.threads),
        _ridge(spec.peak_fp32_tflops, spec.mem_bandwidth_gbs),
        _ridge(matrix, spec.mem_bandwidth_gbs),
        *(float(getattr(spec, field) is None) for field in _MISSING_FIELDS),
        *(float(spec.kind == k) for k in _KINDS),
        *(float(spec.vendor == v) for v in _VENDORS),
        float("avx512f" in isa),
        float(bool(isa & {"avx512_bf16", "amx", "bf16"})),
        _log1p(peak_tf32_tflops(spec)),
    ]
    return np.asarray(values, dtype=np.float32)
