"""Probe the local device into a :class:`HardwareSpec`, the same kind of record as a table row.

CPU records are named ``cpu-<model slug>-<threads>t``: the same chip at 1 and at 2 threads is two hardware
entries, because a CPU's speed depends on the threads in use. Where the CPU record puts what a GPU row holds:

- ``sm_count``: physical cores available to this process; ``threads``: the threads in use.
- ``generation``: the ISA, ``<machine>+<flags>`` with the flags that matter for matmul speed
  (``avx2``, ``avx512f``, ``avx512_bf16``, ``amx``; on Arm ``sve``, ``bf16``), e.g. ``x86_64+avx2+avx512f``.
- ``l2_cache_mb``: the last-level cache one core sees (L3 if present, else L2), the CPU analogue of a GPU's L2;
  the L2 per core and L3 sizes are written into ``source``.
- ``peak_fp32_tflops`` / ``mem_bandwidth_gbs``: measured (``measure=True``) achieved fp32 ``torch.mm`` rate and
  copy bandwidth at the threads in use; CPU vendors publish no such figures per thread count.
- ``memory_gb``: system memory, or the cgroup limit where lower; ``interconnect``: ``host``.

CUDA devices matched to the table (via :func:`canonical_name`) keep the data-sheet row, so the probe and the
table give the same vector; measured values are appended to ``source``. Unmatched devices are named
``cuda-<slug>`` and take their peaks from the measurement.
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from gnnperf.errors import GnnperfError
from gnnperf.hardware.table import HardwareSpec, canonical_name, load_table

_ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx", "sve", "bf16")
_CPU_MATMUL_SIZES = (256, 384, 512)
_CPU_COPY_FLOATS = 1 << 24  # 64 MiB per buffer: beyond most last-level caches
# Five calls of each (about 10 ms at one thread) read 0.134-0.147 TFLOP/s in eight probes of one idle VM; timed for a
# quarter second each, 0.147-0.149 (2026-12-06, experiments/cpu_unseen_host).
_CPU_MIN_SECONDS = 0.25
_SYS_CPU = Path("/sys/devices/system/cpu")


def slugify(text: str) -> str:
    """``"Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz"`` -> ``"intel-xeon-gold-6248"``."""
    text = re.sub(r"\(r\)|\(tm\)|@.*$|\bcpu\b|\bprocessor\b", " ", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "unknown"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cpuinfo() -> dict[str, str]:
    """First value of each key in /proc/cpuinfo (empty off Linux)."""
    info: dict[str, str] = {}
    for line in (_read(Path("/proc/cpuinfo")) or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info.setdefault(key.strip().lower(), value.strip())
    return info


def _cache_mb(size: str) -> float | None:
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", size.strip().upper())
    if not m:
        return None
    return int(m.group(1)) * {"": 1 / 2**20, "K": 1 / 1024, "M": 1.0, "G": 1024.0}[m.group(2)]


def _caches() -> dict[int, float]:
    """Data/unified cache size in MB per level, as one core (cpu0) sees it."""
    out: dict[int, float] = {}
    for d in sorted((_SYS_CPU / "cpu0" / "cache").glob("index*")):
        level, kind, size = _read(d / "level"), _read(d / "type"), _read(d / "size")
        if level and size and kind in ("Data", "Unified") and (mb := _cache_mb(size)):
            out[int(level)] = mb
    return out


def _physical_cores() -> int:
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    cores = set()
    for c in cpus:
        topo = _SYS_CPU / f"cpu{c}" / "topology"
        cores.add((_read(topo / "physical_package_id"), _read(topo / "core_id")) if topo.is_dir() else c)
    return max(1, len(cores))


def _memory_gb() -> float | None:
    m = re.search(r"MemTotal:\s+(\d+)\s*kB", _read(Path("/proc/meminfo")) or "")
    total = int(m.group(1)) * 1024 if m else None
    limit = _read(Path("/sys/fs/cgroup/memory.max"))
    if limit and limit.isdigit() and (total is None or int(limit) < total):
        total = int(limit)
    return round(total / 1e9, 2) if total else None


def _clock_mhz(model: str, current_mhz: str | None) -> float | None:
    khz = _read(_SYS_CPU / "cpu0" / "cpufreq" / "cpuinfo_max_freq")
    if khz and khz.isdigit():
        return int(khz) / 1000
    m = re.search(r"@\s*([\d.]+)\s*GHz", model, re.IGNORECASE)
    if m:
        return float(m.group(1)) * 1000
    # Last resort, typical of VMs without cpufreq: the reported (nominal) clock.
    try:
        return round(float(mhz), 1) if (mhz := current_mhz) else None
    except ValueError:
        return None


def _vendor(info: dict[str, str]) -> str:
    vendor_id = info.get("vendor_id", "")
    if "Intel" in vendor_id:
        return "intel"
    if "AMD" in vendor_id:
        return "amd"
    return "arm" if info.get("cpu implementer") or platform.machine() in ("aarch64", "arm64") else "other"


def _isa(info: dict[str, str]) -> str:
    flags = set((info.get("flags") or info.get("features") or "").split())
    have = [f for f in _ISA_FLAGS if f in flags or (f == "amx" and "amx_tile" in flags)]
    return "+".join([platform.machine().lower() or "cpu", *have])


def _median_rate(fn: Any, work: float, reps: int, sync: Any = None, min_seconds: float = 0.0) -> float:
    """Median of ``work / seconds`` over timed calls after one warm-up: ``reps`` of them, more until ``min_seconds``."""
    fn()
    rates = []
    end = time.perf_counter() + min_seconds
    while len(rates) < reps or time.perf_counter() < end:
        if sync:
            sync()
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        rates.append(work / (time.perf_counter() - t0))
    return statistics.median(rates)


def measure_device(
    device: str, sizes: tuple[int, ...], copy_floats: int, reps: int = 5, min_seconds: float = 0.0
) -> tuple[float, float]:
    """Achieved fp32 matmul TFLOP/s (median over sizes of each size's median) and copy GB/s (read + write).

    Each size and the copy run ``reps`` times, and on for ``min_seconds`` if that is longer.
    """
    import torch

    sync = torch.cuda.synchronize if device.startswith("cuda") else None
    rates = []
    for n in sizes:
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        rates.append(_median_rate(partial(torch.mm, a, b), 2.0 * n**3 / 1e12, reps, sync, min_seconds))
    src = torch.randn(copy_floats, device=device)
    dst = torch.empty_like(src)
    moved = 2.0 * src.numel() * src.element_size() / 1e9
    gbs = _median_rate(lambda: dst.copy_(src), moved, reps, sync, min_seconds)
    return statistics.median(rates), gbs


# What tells two probed devices of one brand string apart: a stored record that differs here is another machine.
IDENTITY_FIELDS = ("vendor", "kind", "generation", "sm_count", "l2_cache_mb", "boost_clock_mhz", "threads")


# One machine probed three times in an hour measured 0.156-0.189 TFLOP/s and 12.2-14.3 GB/s at one thread (up to 21%
# apart on a shared VM). Farther apart it is another host under one brand string: two of this project's VMs, both
# "Intel(R) Xeon(R) Processor" with the same caches and flags, probed 0.118 and 0.156 TFLOP/s and ran the same
# training steps a median 1.5x apart (datasets/README.md, `cpu_optimizers/`).
MEASURED_FIELDS = ("peak_fp32_tflops", "mem_bandwidth_gbs")
SPEED_TOLERANCE = 0.25


def identity_differences(a: HardwareSpec, b: HardwareSpec) -> list[str]:
    """The identity fields in which two records of one device name differ, as ``field a vs b``."""
    return [
        f"{f} {getattr(a, f)} vs {getattr(b, f)}" for f in IDENTITY_FIELDS if getattr(a, f) != getattr(b, f)
    ]


def speed_differences(a: HardwareSpec, b: HardwareSpec) -> list[str]:
    """The measured rates (:data:`MEASURED_FIELDS`) both records have and that are over :data:`SPEED_TOLERANCE` apart."""
    differ = []
    for f in MEASURED_FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        if x and y and max(x, y) > (1 + SPEED_TOLERANCE) * min(x, y):
            differ.append(f"measured {f} {x} vs {y}")
    return differ


def _probe_cpu(threads: int | None, measure: bool, tag: str | None = None) -> HardwareSpec:
    import torch

    if threads is not None and threads < 1:
        raise GnnperfError(f"--threads must be >= 1, got {threads}")
    info = _cpuinfo()
    model = info.get("model name") or platform.processor() or platform.machine() or "unknown cpu"
    caches = _caches()
    llc_level = max(caches) if caches else None
    previous = torch.get_num_threads()
    used = threads or previous
    fp32 = bandwidth = None
    if measure:
        torch.set_num_threads(used)  # the measurement is for this thread count; restored below
        try:
            fp32, bandwidth = measure_device(
                "cpu", _CPU_MATMUL_SIZES, _CPU_COPY_FLOATS, min_seconds=_CPU_MIN_SECONDS
            )
        finally:
            torch.set_num_threads(previous)
    cache_note = ", ".join(f"L{lvl} {mb:g} MB" for lvl, mb in sorted(caches.items()) if lvl >= 2)
    what = f"measured matmul {fp32:.3g} TFLOP/s and copy {bandwidth:.3g} GB/s" if measure else "not measured"
    return HardwareSpec(
        name=f"cpu-{slugify(model)}{f'-{slugify(tag)}' if tag else ''}-{used}t",
        # the tag in the display name too: an alias of one entry must not name another
        display_name=f"{' '.join(model.split())} ({f'{tag}, ' if tag else ''}{used} thread{'s' if used > 1 else ''})",
        aliases=(),
        vendor=_vendor(info),
        kind="cpu",
        generation=_isa(info),
        sm_count=float(_physical_cores()),
        peak_fp32_tflops=round(fp32, 4) if fp32 else None,
        peak_fp16_tensor_tflops=None,
        peak_bf16_tflops=None,
        peak_fp64_tflops=None,
        memory_gb=_memory_gb(),
        mem_bandwidth_gbs=round(bandwidth, 2) if bandwidth else None,
        l2_cache_mb=caches.get(llc_level) if llc_level and llc_level >= 2 else None,
        boost_clock_mhz=_clock_mhz(model, info.get("cpu mhz")),
        tdp_w=None,
        interconnect="host",
        source=f"probe: /proc/cpuinfo and sysfs ({cache_note or 'caches unknown'}); {what} (torch {torch.__version__})",
        threads=used,
    )


def _probe_cuda(device: str, measure: bool, extra: str | Path | None) -> HardwareSpec:
    import torch

    if not torch.cuda.is_available():
        raise GnnperfError(f"--device {device}: no CUDA device is available here")
    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    fp32 = bandwidth = None
    if measure:
        with torch.cuda.device(index):
            fp32, bandwidth = measure_device(f"cuda:{index}", (2048, 4096, 8192), 1 << 28)
    measured = f"; measured matmul {fp32:.3g} TFLOP/s and copy {bandwidth:.3g} GB/s" if measure else ""
    l2_bytes = getattr(props, "L2_cache_size", 0) or 0
    seen = f"{props.multi_processor_count} SMs, {props.total_memory / 1e9:.1f} GB"
    name = canonical_name(props.name, extra)
    if name is not None:
        spec = load_table(extra)[name]
        return replace(spec, source=f"{spec.source}; probe: matched {props.name!r} ({seen}){measured}")
    hip = getattr(torch.version, "hip", None)
    return HardwareSpec(
        name=f"cuda-{slugify(props.name)}",
        display_name=props.name,
        aliases=(props.name,),
        vendor="amd" if hip else "nvidia",
        kind="gpu",
        generation=f"sm_{props.major}{props.minor}" if not hip else str(getattr(props, "gcnArchName", "")),
        sm_count=float(props.multi_processor_count),
        peak_fp32_tflops=round(fp32, 3) if fp32 else None,
        peak_fp16_tensor_tflops=None,
        peak_bf16_tflops=None,
        peak_fp64_tflops=None,
        memory_gb=round(props.total_memory / 1e9, 2),
        mem_bandwidth_gbs=round(bandwidth, 1) if bandwidth else None,
        l2_cache_mb=l2_bytes / 2**20 if l2_bytes else None,
        boost_clock_mhz=None,
        tdp_w=None,
        interconnect="",
        source=f"probe: torch.cuda device properties ({seen}); not in the table{measured}",
    )


def probe(
    device: str = "cpu",
    threads: int | None = None,
    measure: bool = True,
    extra: str | Path | None = None,
    tag: str | None = None,
) -> HardwareSpec:
    """Describe the local ``cpu`` or ``cuda[:N]`` device; ``measure`` runs a short matmul and copy test.

    Args:
        device: ``cpu`` or ``cuda``/``cuda:N``.
        threads: CPU threads for the measurement and the record name; default ``torch.get_num_threads()``.
        measure: fill peak fp32 and bandwidth from a measurement (CPU: well under 2 s).
        extra: user spec file consulted when matching a CUDA device name (checked on a CPU too).
        tag: a CPU's name part that tells this host from another of the same brand string
            (``cpu-intel-xeon-TAG-1t``); CPUs are named by ``/proc/cpuinfo``'s model name, which a cloud VM
            may report alike for different host CPUs.
    """
    # read it even where unused (a CPU is described, not matched): a bad file is an error
    if extra is not None:
        load_table(extra)
    if tag is not None and slugify(tag) != tag:
        raise GnnperfError(f"hardware tag {tag!r}: use lower-case letters, digits and dashes")
    if device == "cpu":
        return _probe_cpu(threads, measure, tag)
    if tag is not None:
        raise GnnperfError(
            "a hardware tag names CPUs only: a GPU is named by its table entry or its own name"
        )
    if re.fullmatch(r"cuda(:\d+)?", device):
        return _probe_cuda(device, measure, extra)
    raise GnnperfError(f"unknown device {device!r}: use cpu, cuda or cuda:N")
