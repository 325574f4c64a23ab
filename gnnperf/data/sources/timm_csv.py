"""timm's benchmark CSVs (huggingface/pytorch-image-models ``results/``) -> samples.

File names say the protocol: ``benchmark-{train|infer}-{precision}-{nchw|nhwc}-pt{torch}-{cu{cuda}|cpu}-
{device}[-dynamo].csv``. What one row timed (timm ``benchmark.py``, see ``timm/SOURCE.md``):

- train: forward + cross-entropy loss + backward + SGD ``optimizer.step()`` on an input already on the
  device (``timed=fwd+bwd+opt``, ``optimizer=sgd``), ``train_step_time`` = mean ms over 40 steps;
  ``zero_grad`` is outside the timed region. The batch size is per row (benchmark.py backs off after OOM).
- infer: one forward batch (``timed=fwd``), ``infer_step_time`` = mean ms per batch.
- ``amp`` = fp16 autocast (``amp_fp16``); ``nhwc`` = ``channels_last``; ``-dynamo`` = ``torch.compile``,
  written into ``software`` (``torch=2.4.0+cu124+compile``) since the schema has no compile field.

Model names are checked with :func:`gnnperf.zoo.resolve.resolve` (deprecated aliases resolve through timm);
names that no longer exist are reported, never guessed. Each model timm builds today is also checked against
the row's ``param_count`` (:data:`CHECK_PARAMS`): a row whose count differs timed another model than the graph
would describe, and is reported, not imported. On the public tables (timm 1.0.31) that is timm's alias map
sending ``ig_resnext101_32x16d``, ``_32x32d`` and ``_32x48d`` to ``resnext101_32x8d``; models redefined since
(``ecaresnext50t_32x4d``, the 1000-class ``vit_base_patch16_224_miil`` that now builds the 11,221-class one);
and the torch 2.9 table's re-parameterised (fused) RepVGG, MobileOne, RepViT and GhostNetV3. Where the parameters
agree but the code timed was another (:data:`IMPLEMENTATION_CHANGED`: TResNet with the InplaceABN extension in the
torch 1.x tables), the rows are reported and left out the same way. The two benchmark
CPUs are in no spec table: their data-sheet records come from :func:`hardware_specs`.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from gnnperf.data.schema import make_sample
from gnnperf.data.sources import register_source
from gnnperf.data.sources.common import (
    Collector,
    ImportReport,
    csv_rows,
    existing_path,
    positive_int,
    positive_number,
    ref_name,
    table_files,
)
from gnnperf.errors import GnnperfError
from gnnperf.hardware.table import HardwareSpec, canonical_name

SOURCE = "timm-benchmark"
TRAIN_ITERS = 40  # benchmark.py's --bench-iter default at the commits of the train CSVs
_NAME_RE = re.compile(
    r"^benchmark-(?P<mode>train|infer)-(?P<precision>[a-z0-9_]+)-(?P<layout>nchw|nhwc)-pt(?P<torch>\d{3})"
    r"-(?P<accel>cu\d+|cpu)-(?P<device>[A-Za-z0-9_.]+?)(?P<dynamo>-dynamo)?\.csv$"
)
_PRECISIONS = {
    "amp": "amp_fp16",
    "amp_fp16": "amp_fp16",
    "amp_bf16": "amp_bf16",
    "amp_bfloat16": "amp_bf16",
    "fp32": "fp32",
    "float32": "fp32",
    "fp16": "fp16",
    "float16": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
}
_LAYOUTS = {"nchw": "contiguous", "nhwc": "channels_last"}
_MODES = {"train": "train", "infer": "infer"}
MAX_IMG_SIZE = 8192  # the public tables go up to 1024; a larger side is a damaged cell, not an input

# Peak FP32 = cores x FMA units x SIMD fp32 lanes x 2 flop x *base* clock (all-core vector code does not hold
# the boost clock); FP64 is half of it. Intel publishes no FLOP/s figure for these parts.
_I9_FP32_TFLOPS = 14 * 2 * 16 * 2 * 3.3e9 / 1e12  # 14 cores, 2 AVX-512 FMA units, 3.3 GHz
_I7_FP32_TFLOPS = (6 * 2 * 8 * 2 * 2.3e9 + 8 * 2 * 4 * 2 * 1.7e9) / 1e12  # P: 2x256-bit FMA, E: 2x128-bit
CPU_SPECS: dict[str, HardwareSpec] = {
    "i9_10940x": HardwareSpec(
        name="cpu-i9-10940x",
        display_name="Intel Core i9-10940X",
        aliases=("i9_10940x", "i9-10940X", "Intel(R) Core(TM) i9-10940X CPU @ 3.30GHz"),
        vendor="intel",
        kind="cpu",
        generation="x86_64+avx2+avx512f",
        sm_count=14.0,
        peak_fp32_tflops=round(_I9_FP32_TFLOPS, 3),
        peak_fp16_tensor_tflops=None,
        peak_bf16_tflops=None,
        peak_fp64_tflops=round(_I9_FP32_TFLOPS / 2, 3),
        memory_gb=None,  # system memory of the benchmark machine is not published
        mem_bandwidth_gbs=94.0,
        l2_cache_mb=19.25,
        boost_clock_mhz=4600.0,
        tdp_w=165.0,
        interconnect="host",
        source=(
            "Intel ARK (i9-10940X, Cascade Lake-X): 14 cores / 28 threads, base 3.3 GHz, Turbo Boost 2.0 4.6 GHz "
            "(Turbo Max 3.0 4.8 GHz), 19.25 MB L3 (1 MB L2 per core), AVX-512 with 2 FMA units, quad-channel "
            "DDR4-2933 94 GB/s, 165 W; peak_fp32 = 14 cores x 2 FMA x 16 lanes x 2 flop x 3.3 GHz base "
            "(fp64 half); threads used by the benchmark not recorded"
        ),
    ),
    "i7_12700h": HardwareSpec(
        name="cpu-i7-12700h",
        display_name="Intel Core i7-12700H",
        aliases=("i7_12700h", "i7-12700H", "12th Gen Intel(R) Core(TM) i7-12700H"),
        vendor="intel",
        kind="cpu",
        generation="x86_64+avx2",
        sm_count=14.0,
        peak_fp32_tflops=round(_I7_FP32_TFLOPS, 3),
        peak_fp16_tensor_tflops=None,
        peak_bf16_tflops=None,
        peak_fp64_tflops=round(_I7_FP32_TFLOPS / 2, 3),
        memory_gb=None,
        mem_bandwidth_gbs=76.8,
        l2_cache_mb=24.0,
        boost_clock_mhz=4700.0,
        tdp_w=45.0,
        interconnect="host",
        source=(
            "Intel ARK (i7-12700H, Alder Lake): 6 P + 8 E cores / 20 threads, P base 2.3 / max turbo 4.7 GHz, "
            "E base 1.7 / turbo 3.5 GHz, 24 MB L3, AVX2 (no AVX-512), dual-channel DDR5-4800 76.8 GB/s, "
            "45 W base power; peak_fp32 = (6 P x 2x256-bit FMA x 2.3 GHz + 8 E x 2x128-bit FMA x 1.7 GHz) "
            "x 2 flop at base clocks (fp64 half); threads used by the benchmark not recorded"
        ),
    ),
}


def hardware_specs() -> list[HardwareSpec]:
    """Data-sheet records of the benchmark CPUs, which the packaged spec table does not hold."""
    return list(CPU_SPECS.values())


def torch_version(digits: str) -> str:
    """``pt`` digits of a file name -> version: ``112`` -> ``1.12``, ``240`` -> ``2.4.0``, ``291`` -> ``2.9.1``."""
    return f"1.{digits[1:]}" if digits[0] == "1" else ".".join(digits)


def parse_file_name(name: str) -> dict[str, Any]:
    """The workload fields a file name fixes; raises ValueError saying what does not parse."""
    m = _NAME_RE.match(name)
    if not m:
        raise ValueError(
            "file name does not match benchmark-{train|infer}-{precision}-{nchw|nhwc}-pt{ver}-{cuNNN|cpu}-{device}"
            "[-dynamo].csv"
        )
    precision = _PRECISIONS.get(m["precision"])
    if precision is None:
        raise ValueError(f"unknown precision '{m['precision']}' in the file name")
    device = m["device"]
    hardware = canonical_name(device)
    if hardware is None and device.lower() in CPU_SPECS:
        hardware = CPU_SPECS[device.lower()].name
    if hardware is None:
        raise ValueError(f"unknown device '{device}' (not in the hardware table)")
    mode = _MODES[m["mode"]]
    software = f"torch={torch_version(m['torch'])}+{m['accel']}" + ("+compile" if m["dynamo"] else "")
    return {
        "mode": mode,
        "precision": precision,
        "optimizer": "sgd" if mode == "train" else "none",
        "timed": "fwd+bwd+opt" if mode == "train" else "fwd",
        "memory_format": _LAYOUTS[m["layout"]],
        "num_devices": 1,
        "hardware": hardware,
        "software": software,
    }


@register_source(SOURCE, "timm benchmark CSVs: train (fwd+loss+bwd+SGD, AMP) on RTX 3090; infer on GPUs and CPUs",
                 hardware=hardware_specs)  # fmt: skip
def read(path: str | Path, limit: int | None = None) -> tuple[list[dict[str, Any]], ImportReport]:
    """Samples from timm benchmark CSVs under ``path`` (a folder such as ``shared/external/timm`` or one CSV)."""
    root = existing_path(path, "timm benchmark")
    report = ImportReport(SOURCE)
    out = Collector(report, limit)
    resolved: dict[str, Any] = {}
    for file in table_files(root, "benchmark-*.csv"):
        if out.full:
            break
        ref = ref_name(file, 2)
        report.files += 1
        try:
            fixed = parse_file_name(file.name)
        except ValueError as e:
            report.skip_file(ref, str(e))
            continue
        _read_file(file, ref, fixed, out, resolved)
    return out.rows, report


def _resolve(name: str) -> Any:
    """The ModelSpec of ``timm:name``, or why the name cannot be imported."""
    from gnnperf.zoo.resolve import resolve  # imports torch and timm: only when a table is read

    try:
        return resolve(f"timm:{name}")
    except GnnperfError:
        return f"timm model '{name}' no longer exists (no such model or deprecation alias)"
    except RuntimeError as e:  # an alias to a pretrained tag timm has since removed; resolve lets it out
        return f"timm model '{name}' cannot be created any more: {e}"


CHECK_PARAMS = True  # tests that read whole tables for other reasons turn it off: about 0.2 s per model name


@cache
def _built_params(name: str) -> float | None:
    """Millions of parameters of the model timm builds for ``name`` today; ``None`` if it cannot be counted.

    Built on the meta device: no weights are allocated, so even the 800 M-parameter models cost milliseconds.
    """
    import torch

    from gnnperf.zoo.resolve import resolve

    try:
        with torch.device("meta"):
            model = resolve(f"timm:{name}").build()
    except Exception:  # a model that cannot be built on the meta device is imported unchecked, not lost
        return None
    return sum(p.numel() for p in model.parameters()) / 1e6


def _params_problem(name: str, table_params_m: float | None) -> str | None:
    """Why the model timm builds for ``name`` is not the one the row timed (its parameter count), or ``None``."""
    if not CHECK_PARAMS or table_params_m is None:
        return None
    built = _built_params(name)
    tolerance = max(0.01 * table_params_m, 0.02)  # the tables round to 0.01 M
    if built is None or abs(built - table_params_m) <= tolerance:
        return None
    from timm.models._registry import get_deprecated_models

    alias = get_deprecated_models().get(name)
    builds = f"timm maps the old name '{name}' to '{alias}'" if alias else f"timm's '{name}' is"
    return (
        f"{builds} a model of {built:.2f} M parameters, the table's has {table_params_m:.2f} M: not imported"
    )


# Families whose timm code at the time of some tables ran another implementation than timm builds today, with the
# same parameters (so CHECK_PARAMS cannot see it): family -> (``software`` prefix of those tables, what differed).
IMPLEMENTATION_CHANGED: dict[str, tuple[str, str]] = {
    # The tables say so too: on the torch 1.10-1.13 tables TResNet's NHWC step takes 2.1-4.8x its NCHW step, where
    # ResNets take 0.7-0.8x; on the torch 2.x tables 0.9x, like the others.
    "tresnet": (
        "torch=1.",
        "timm's TResNet of the torch 1.x tables ran the InplaceABN CUDA extension (BatchNorm and LeakyReLU in one "
        "custom kernel, slow in channels-last); timm builds it with BatchNorm + LeakyReLU today: not imported",
    ),
}


def _implementation_problem(family: str, software: str) -> str | None:
    """Why a row of ``family`` in a table measured with ``software`` timed another implementation, or ``None``."""
    changed = IMPLEMENTATION_CHANGED.get(family)
    return changed[1] if changed and software.startswith(changed[0]) else None


def _read_file(file: Path, ref: str, fixed: dict[str, Any], out: Collector, resolved: dict[str, Any]) -> None:
    report = out.report
    parsed = csv_rows(file, ref, report)
    if parsed is None:
        return
    header, rows = parsed
    mode = "train" if fixed["mode"] == "train" else "infer"
    step, batch, img = f"{mode}_step_time", f"{mode}_batch_size", f"{mode}_img_size"
    missing = [c for c in ("model", step, batch, img) if c not in header]
    if missing:
        report.skip_file(
            ref, f"unknown column layout: no {', '.join(missing)} (header: {','.join(header)})", row=0
        )
        return
    used = ("model", step, batch, img, "param_count")
    repeated = [c for c in used if header.count(c) > 1]
    if repeated:  # which copy would be the measurement?
        report.skip_file(ref, f"unknown column layout: repeated column {', '.join(repeated)}", row=0)
        return
    col = {c: header.index(c) for c in ("model", step, batch, img)}
    params_col = header.index("param_count") if "param_count" in header else None
    for i, cells in rows:
        name = cells[col["model"]]
        ms = positive_number(cells[col[step]])
        bs = positive_int(cells[col[batch]])
        size = positive_int(cells[col[img]], maximum=MAX_IMG_SIZE)
        bad = [f"{c}={cells[col[c]]!r}" for c, v in ((step, ms), (batch, bs), (img, size)) if v is None]
        table_params = positive_number(cells[params_col]) if params_col is not None else None
        if params_col is not None and table_params is None:  # without it the model check cannot run
            bad.append(f"param_count={cells[params_col]!r}")
        if not name or bad:
            report.problem(ref, i, f"model {name or '?'}: no valid {', '.join(bad) or 'model name'}")
            continue
        if name not in resolved:
            resolved[name] = _resolve(name)
        spec = resolved[name]
        if isinstance(spec, str):
            report.problem(ref, i, spec)
            continue
        if (
            wrong := _params_problem(name, table_params)
            or _implementation_problem(spec.family, fixed["software"])
        ) is not None:
            report.problem(ref, i, wrong)
            continue
        try:
            sample = make_sample(
                model_ref=spec.ref,
                family=spec.family,
                input_shape=f"3,{size},{size}",
                batch_size=bs,
                iteration_time_ms=ms,  # a mean over the steps; no per-step times are published
                n_iters=TRAIN_ITERS if mode == "train" else None,
                status="ok",
                source=SOURCE,
                source_ref=f"{ref}#row{i}",
                **fixed,
            )
        except GnnperfError as e:
            report.problem(ref, i, str(e))
            continue
        out.add(sample, ref, i)
        if out.full:
            return
