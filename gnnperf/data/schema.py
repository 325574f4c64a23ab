"""The sample schema: one measured configuration, one row of a Parquet shard (GUIDE "Sample").

``sample_id`` is a short sha256 of the identity fields in a canonical JSON form (sorted keys, no spaces,
integers as integers, input shape as ``"3,224,224"``). Its recipe never changes with the package version, so
ids written by one process or release match those of another; that makes generation resumable and merges
idempotent. Importing this module does not import torch.

Beyond the GUIDE's fields, ``libraries`` records the versions of the libraries that built the model (``timm=1.0.31;
torchvision=0.29.1;transformers=5.25.0``): a ``timm:`` reference can build another network under a later timm (the
RTX 3090 tables' ``ig_resnext101_32x16d`` and TResNet, ``gnnperf/data/sources/timm_csv.py``). It is kept with the
row but is not an identity field: making it one would change every stored ``sample_id`` and re-measure stored rows
after any library upgrade. Shards written before it read it as null.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from gnnperf.errors import GnnperfError
from gnnperf.measure.workload import (
    H2D_PREFIX,
    MEMORY_FORMATS,
    MODES,
    OPTIMIZERS,
    PRECISIONS,
    TIMED,
    Workload,
)

IDENTITY_FIELDS: tuple[str, ...] = (
    "model_ref",
    "family",
    "input_shape",
    "batch_size",
    "mode",
    "precision",
    "optimizer",
    "timed",
    "memory_format",
    "num_devices",
    "hardware",
    "software",
)
RESULT_FIELDS: tuple[str, ...] = (
    "iteration_time_ms",
    "time_p10_ms",
    "time_p90_ms",
    "time_cv",
    "n_iters",
    "peak_memory_mb",
    "status",
    "error",
    "source",
    "source_ref",
)
STATUSES = ("ok", "oom", "error")
TIMED_LABELS = TIMED + tuple(H2D_PREFIX + t for t in TIMED)
# Public tables do not always say which optimizer or memory format they used.
SCHEMA_OPTIMIZERS = OPTIMIZERS + ("unknown",)
SCHEMA_MEMORY_FORMATS = MEMORY_FORMATS + ("unknown",)
SAMPLE_ID_CHARS = 16

_S, _I, _F = pa.string(), pa.int64(), pa.float64()
SCHEMA = pa.schema(
    [
        pa.field("sample_id", _S, nullable=False),
        pa.field("model_ref", _S, nullable=False),
        pa.field("family", _S, nullable=False),
        pa.field("input_shape", _S, nullable=False),
        pa.field("batch_size", _I, nullable=False),
        pa.field("mode", _S, nullable=False),
        pa.field("precision", _S, nullable=False),
        pa.field("optimizer", _S, nullable=False),
        pa.field("timed", _S, nullable=False),
        pa.field("memory_format", _S, nullable=False),
        pa.field("num_devices", _I, nullable=False),
        pa.field("hardware", _S, nullable=False),
        pa.field("software", _S, nullable=False),
        pa.field("iteration_time_ms", _F),
        pa.field("time_p10_ms", _F),
        pa.field("time_p90_ms", _F),
        pa.field("time_cv", _F),
        pa.field("n_iters", _I),
        pa.field("peak_memory_mb", _F),
        pa.field("status", _S, nullable=False),
        pa.field("error", _S),
        pa.field("source", _S, nullable=False),
        pa.field("source_ref", _S),
        pa.field("libraries", _S),
        pa.field("created_at", _S, nullable=False),
    ]
)
COLUMNS: tuple[str, ...] = tuple(SCHEMA.names)

_ALLOWED = {
    "mode": MODES,
    "precision": PRECISIONS,
    "optimizer": SCHEMA_OPTIMIZERS,
    "timed": TIMED_LABELS,
    "memory_format": SCHEMA_MEMORY_FORMATS,
    "status": STATUSES,
}
INT64_MAX = 2**63 - 1
_FLOAT_FIELDS = ("iteration_time_ms", "time_p10_ms", "time_p90_ms", "time_cv", "peak_memory_mb")
_SHAPE_RE = re.compile(r"[1-9]\d*(,[1-9]\d*)*")


def normalize_input_shape(shape: Any) -> str:
    """``(3, 224, 224)``, ``[3, 224, 224]``, ``"3x224x224"`` or ``"3, 224, 224"`` -> ``"3,224,224"``."""
    try:
        parts = [p for p in re.split(r"[,x ()\[\]]+", shape) if p] if isinstance(shape, str) else list(shape)
        text = ",".join(str(int(p)) for p in parts)
    except (TypeError, ValueError):
        text = ""
    if not _SHAPE_RE.fullmatch(text):
        raise GnnperfError(f"bad input_shape {shape!r}: expected integers such as 3,224,224")
    return text


def identity(row: Mapping[str, Any]) -> dict[str, Any]:
    """The identity fields of ``row``, normalised (ints as ints, the shape as ``"3,224,224"``)."""
    missing = [k for k in IDENTITY_FIELDS if k not in row or row[k] is None]
    if missing:
        raise GnnperfError(f"sample is missing identity field(s): {', '.join(missing)}")
    ident = {k: row[k] for k in IDENTITY_FIELDS}
    ident["input_shape"] = normalize_input_shape(ident["input_shape"])
    for k in ("batch_size", "num_devices"):
        ident[k] = int(ident[k])
    for k in IDENTITY_FIELDS:
        if k not in ("batch_size", "num_devices"):
            ident[k] = str(ident[k])
    return ident


def sample_id(row: Mapping[str, Any]) -> str:
    """Short sha256 of the identity fields in canonical JSON; stable across processes and versions."""
    canonical = json.dumps(identity(row), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:SAMPLE_ID_CHARS]


def utc_now() -> str:
    """``created_at`` value: UTC ISO 8601 with microseconds, e.g. ``2025-01-31T12:00:00.000001+00:00``."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def make_sample(**fields: Any) -> dict[str, Any]:
    """A validated sample row: fills ``sample_id``, ``created_at`` and absent nullable results.

    Raises :class:`GnnperfError` naming the first bad field (unknown name, missing identity, value not
    allowed, wrong type, an ``ok`` row without a positive finite time, a failed row without an error).
    """
    unknown = sorted(set(fields) - set(COLUMNS))
    if unknown:
        raise GnnperfError(f"unknown sample field '{unknown[0]}'")
    row: dict[str, Any] = {name: None for name in COLUMNS}
    row.update(fields)
    row.update(identity(row))
    created = row["created_at"]
    row["created_at"] = created.isoformat() if isinstance(created, datetime) else str(created or utc_now())
    row["source"] = row["source"] or "gnnperf"
    if row["status"] is None:
        raise GnnperfError("sample is missing 'status'")
    for name, allowed in _ALLOWED.items():
        if row[name] not in allowed:
            raise GnnperfError(f"bad sample {name} '{row[name]}': expected one of {', '.join(allowed)}")
    for name in ("batch_size", "num_devices"):
        if not 1 <= row[name] <= INT64_MAX:  # stored as int64: a larger one would fail the whole shard
            raise GnnperfError(f"bad sample {name} {row[name]}: expected a positive integer below 2**63")
    for name in _FLOAT_FIELDS:
        value = row[name]
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise GnnperfError(f"bad sample {name} {value!r}: expected a number or None")
            row[name] = float(value)
            if math.isnan(row[name]):
                row[name] = None
    if row["n_iters"] is not None:
        row["n_iters"] = int(row["n_iters"])
    if row["status"] == "ok":
        t = row["iteration_time_ms"]
        if t is None or not math.isfinite(t) or t <= 0:
            raise GnnperfError(f"ok sample has no positive iteration_time_ms ({t!r})")
    elif not row["error"]:
        raise GnnperfError(f"sample with status {row['status']} has no error message")
    for name in ("error", "source_ref", "libraries"):
        if row[name] is not None:
            row[name] = str(row[name])
    expected = sample_id(row)
    if fields.get("sample_id") not in (None, expected):
        raise GnnperfError(f"sample_id {fields['sample_id']} does not match its identity fields ({expected})")
    row["sample_id"] = expected
    return row


def sample_from_measurement(
    model_ref: str,
    family: str,
    workload: Workload,
    hardware: str,
    software: str,
    result: Mapping[str, Any],
    source: str = "gnnperf",
    source_ref: str | None = None,
    libraries: str | None = None,
) -> dict[str, Any]:
    """A sample row from a :class:`Workload` and the harness/runner result dict.

    The workload must carry the resolved per-sample input shape (``spec.input_shape(None)`` for the model's
    default), since the shape is part of the sample's identity. ``libraries``: the versions of the libraries
    that build models (:func:`gnnperf.measure.harness.library_versions`), kept with the row, not in its identity.
    """
    if not workload.input_shape:
        raise GnnperfError(f"{model_ref}: resolve the default input shape before recording a sample")
    return make_sample(
        model_ref=model_ref,
        family=family,
        input_shape=workload.input_shape_str,
        batch_size=workload.batch_size,
        mode=workload.mode,
        precision=workload.precision,
        optimizer=workload.optimizer,
        timed=workload.timed_label,
        memory_format=workload.memory_format,
        num_devices=workload.num_devices,
        hardware=hardware,
        software=software,
        source=source,
        source_ref=source_ref,
        libraries=libraries,
        **{k: result.get(k) for k in RESULT_FIELDS if k not in ("source", "source_ref")},
    )
