"""ryujaehun/pytorch-gpu-benchmark CSVs (torchvision CNNs, batch 12 per GPU) -> samples.

Each CSV's header holds torchvision model names and every following row one timed iteration (ms); one sample
per (file, model) carries the median, p10, p90 and CV of that column (see ``SOURCE.md`` of the data).

What one iteration timed (the repository's ``benchmark_models.py``): both loops take the CPU batch, cast it,
then between ``torch.cuda.synchronize()`` calls run

- train files: ``model.zero_grad(); model(img.to('cuda'))``, cross-entropy, ``loss.backward()``: the
  host-to-device copy is inside and there is no optimizer step -> ``timed=h2d+fwd+bwd``, ``optimizer=none``;
- inference files: ``model(img.to('cuda'))`` under ``torch.no_grad()`` in eval mode -> ``timed=h2d+fwd``
  (the copy of the input is inside this loop's timed region too).

Precision from the name: ``float``/``single`` = fp32, ``half`` = model and input ``.half()`` (pure fp16,
not autocast), ``double`` = fp64. The A100 ran NGC PyTorch 20.10 (PyTorch 1.7), whose defaults compute fp32
convolutions and matmuls in TF32 on Ampere (``allow_tf32`` was on for both until 1.12): its float files are
``tf32``, which is what the GPU executed. ``_N_gpus_`` files ran ``nn.DataParallel`` over N GPUs with a total
batch of 12 x N: such a sample has ``num_devices=N`` and ``batch_size=12``, the batch per device.

Hardware comes from the GPU folder; software from the folder's ``system_info.txt`` as summarised in
``SOURCE.md``. The 2018 files of ``2080TI`` (``..._benchmark(1).csv`` / ``(2).csv``) were measured on two
separate RTX 2080 Ti cards of one machine (the README's "RTX 2080ti(1)" and "(2)"); the card is part of their
``software`` string so the two measurements keep separate sample ids.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gnnperf.data.schema import INT64_MAX, make_sample
from gnnperf.data.sources import register_source
from gnnperf.data.sources.common import (
    Collector,
    ImportReport,
    csv_rows,
    existing_path,
    positive_number,
    ref_name,
    spread,
    table_files,
)
from gnnperf.errors import GnnperfError
from gnnperf.hardware.table import canonical_name

SOURCE = "pytorch-gpu-benchmark"
BATCH_PER_DEVICE = 12
INPUT_SHAPE = "3,224,224"
# GPU folder -> software of its runs (system_info.txt / README, as in SOURCE.md). Versions not recorded there
# are "unknown"; the tag after them keeps runs of one GPU with different setups apart.
SOFTWARE = {
    "dgx-a100": "ngc-pytorch=20.10+cu11.1+cudnn8004",
    "TitanRTX": "torch=unknown+cu10.2+cudnn7605",
    "TITANXP": "torch=unknown+cu10.2+cudnn7605",
    "2080ti(2)": "torch=1.4+cu10.0+cudnn7600",
    "2080TI": "torch=unknown+results-2080TI",
}
TF32_BY_DEFAULT = ("dgx-a100",)  # Ampere with PyTorch 1.7-1.11 defaults: fp32 math ran as TF32
CODE_2018 = "+code-2018"  # the 20-iteration, 15-model files of results/2080TI
_PRECISIONS = {"float": "fp32", "single": "fp32", "half": "fp16", "double": "fp64"}
_NEW_RE = re.compile(
    r"^(?P<gpu>.+?)_(?P<n>\d+)_gpus__(?P<precision>[a-z]+)_model_(?P<mode>train|training|inference)_benchmark\.csv$"
)
_OLD_RE = re.compile(
    r"^(?P<gpu>.+?)_(?P<precision>[a-z]+)_model_(?P<mode>train|training|inference)_benchmark"
    r"(?:\((?P<card>\d+)\))?\.csv$"
)


def parse_file(file: Path) -> dict[str, Any]:
    """The workload fields a file's folder and name fix; raises ValueError saying what does not parse."""
    m = _NEW_RE.match(file.name)
    old = m is None
    if old:
        m = _OLD_RE.match(file.name)
    if m is None:
        raise ValueError(
            "file name does not match <GPU>_<N>_gpus__<precision>_model_<train|inference>_benchmark.csv"
        )
    precision = _PRECISIONS.get(m["precision"])
    if precision is None:
        raise ValueError(f"unknown precision '{m['precision']}' in the file name")
    folder = file.parent.name
    hardware = canonical_name(folder) or canonical_name(m["gpu"])
    if hardware is None:
        raise ValueError(f"unknown GPU '{folder}' / '{m['gpu']}' (not in the hardware table)")
    if folder not in SOFTWARE:
        raise ValueError(f"no software versions known for folder '{folder}' (known: {', '.join(SOFTWARE)})")
    software = SOFTWARE[folder]
    if precision == "fp32" and folder in TF32_BY_DEFAULT:
        precision = "tf32"
    if old:
        software += CODE_2018 + (f"+gpu{m['card']}" if m["card"] else "")
    num_devices = 1 if old else int(m["n"])
    if not 1 <= num_devices <= INT64_MAX:
        raise ValueError(f"bad GPU count {num_devices} in the file name")
    train = m["mode"] != "inference"
    return {
        "input_shape": INPUT_SHAPE,
        "batch_size": BATCH_PER_DEVICE,
        "mode": "train" if train else "infer",
        "precision": precision,
        "optimizer": "none",
        "timed": "h2d+fwd+bwd" if train else "h2d+fwd",
        "memory_format": "contiguous",
        "num_devices": num_devices,
        "hardware": hardware,
        "software": software,
    }


@register_source(
    SOURCE, "ryujaehun/pytorch-gpu-benchmark: torchvision CNNs, batch 12/GPU, fp32/fp16/fp64, 1-4 GPUs"
)
def read(path: str | Path, limit: int | None = None) -> tuple[list[dict[str, Any]], ImportReport]:
    """Samples from pytorch-gpu-benchmark CSVs under ``path`` (the repository copy, ``results/``, one GPU
    folder or one CSV); one sample per (file, model)."""
    root = existing_path(path, "pytorch-gpu-benchmark")
    report = ImportReport(SOURCE)
    out = Collector(report, limit)
    specs: dict[str, Any] = {}
    for file in table_files(root, "*.csv"):
        if out.full:
            break
        ref = ref_name(file, 2)
        report.files += 1
        try:
            fixed = parse_file(file)
        except ValueError as e:
            report.skip_file(ref, str(e))
            continue
        _read_file(file, ref, fixed, out, specs)
    return out.rows, report


def _read_file(file: Path, ref: str, fixed: dict[str, Any], out: Collector, specs: dict[str, Any]) -> None:
    from gnnperf.zoo.resolve import resolve  # imports torch/torchvision: only when a table is read

    report = out.report
    parsed = csv_rows(file, ref, report)
    if parsed is None:
        return
    header, rows = parsed
    columns: dict[int, Any] = {}
    for j, name in enumerate(header):
        if name not in specs:
            try:
                specs[name] = resolve(f"torchvision:{name}")
            except GnnperfError:
                specs[name] = None
        if specs[name] is None:
            report.problem(ref, 0, f"column {j + 1} '{name}' is not a torchvision model; column skipped")
        elif any(header[k] == name for k in columns):
            report.problem(ref, 0, f"column {j + 1} '{name}' repeats an earlier column; skipped")
        else:
            columns[j] = specs[name]
    if not columns:
        report.skip_file(ref, "unknown column layout: no torchvision model names in the header", row=0)
        return
    times: dict[int, list[float]] = {j: [] for j in columns}
    for i, cells in rows:
        for j in columns:
            ms = positive_number(cells[j])
            if ms is None:
                report.problem(
                    ref, i, f"column '{header[j]}': {cells[j]!r} is not a positive number; cell skipped"
                )
            else:
                times[j].append(ms)
    for j, spec in columns.items():
        if out.full:
            return
        if not times[j]:
            report.problem(ref, None, f"model {header[j]}: no valid iteration times")
            continue
        try:
            sample = make_sample(
                model_ref=spec.ref,
                family=spec.family,
                status="ok",
                source=SOURCE,
                source_ref=f"{ref}#{header[j]}",
                **spread(times[j]),
                **fixed,
            )
        except GnnperfError as e:
            report.problem(ref, None, f"model {header[j]}: {e}")
            continue
        out.add(sample, ref, None)
