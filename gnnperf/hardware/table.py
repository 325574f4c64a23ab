"""The hardware spec table: one row per device, data-sheet values with the source of each row.

The packaged table is ``specs.csv`` next to this module. Users add devices (or override one) with spec files:
a CSV with the same columns, or a YAML/JSON file holding one entry, a list of entries, or a mapping
``name -> fields``; files come from ``--hardware-file`` and from ``$GNNPERF_HARDWARE_FILE`` (``os.pathsep``
separated). Columns, units in names:

| column | meaning |
|---|---|
| name | lowercase slug, the key (``rtx-3090``) |
| display_name | vendor's product name |
| aliases | ``|``-separated spellings used by users, ``torch.cuda`` and public tables |
| vendor, kind | ``nvidia``/``amd``/``intel``; ``gpu``/``cpu`` |
| generation | architecture (``ampere``, ``cdna2``); for probed CPUs the ISA, e.g. ``x86_64+avx2+avx512f`` |
| sm_count | SMs (NVIDIA), CUs (AMD), Xe cores (Intel), physical cores (CPU) |
| peak_fp32_tflops | non-tensor FP32 |
| peak_fp16_tensor_tflops | dense FP16 matrix rate with FP32 accumulate (GeForce cards: the half-rate figure); empty without tensor/matrix units |
| peak_bf16_tflops | dense BF16 matrix rate; empty where unsupported |
| peak_fp64_tflops | non-tensor FP64 |
| memory_gb, mem_bandwidth_gbs | device memory and its bandwidth |
| l2_cache_mb | last on-chip cache level counted as L2 (CPUs: the last-level cache one core sees) |
| boost_clock_mhz, tdp_w, interconnect | max boost clock, board power, host/peer link (``pcie4x16``, ``nvlink3-600gbs``) |
| source | citation for the row |

Empty cells are values that do not exist or are not published; nothing is filled in by guesswork.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from gnnperf.errors import GnnperfError, suggest

SPECS_CSV = Path(__file__).with_name("specs.csv")
ENV_VAR = "GNNPERF_HARDWARE_FILE"


@dataclass(frozen=True)
class HardwareSpec:
    """One device: a table row or a probe record (see the module docstring for the columns)."""

    name: str
    display_name: str
    aliases: tuple[str, ...]
    vendor: str
    kind: str
    generation: str
    sm_count: float | None
    peak_fp32_tflops: float | None
    peak_fp16_tensor_tflops: float | None
    peak_bf16_tflops: float | None
    peak_fp64_tflops: float | None
    memory_gb: float | None
    mem_bandwidth_gbs: float | None
    l2_cache_mb: float | None
    boost_clock_mhz: float | None
    tdp_w: float | None
    interconnect: str
    source: str
    threads: int | None = None  # CPU threads in use (probe records); None for table GPUs


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(HardwareSpec) if f.name != "threads")
NUMERIC_COLUMNS: tuple[str, ...] = (
    "sm_count",
    "peak_fp32_tflops",
    "peak_fp16_tensor_tflops",
    "peak_bf16_tflops",
    "peak_fp64_tflops",
    "memory_gb",
    "mem_bandwidth_gbs",
    "l2_cache_mb",
    "boost_clock_mhz",
    "tdp_w",
)
# A table row without these cannot be placed on a roofline, so it is rejected.
REQUIRED_COLUMNS: tuple[str, ...] = ("name", "vendor", "peak_fp32_tflops", "memory_gb", "mem_bandwidth_gbs")
KINDS = ("gpu", "cpu")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")
# Words vendors put around a product name; dropped for a second, looser match.
_BRAND_RE = re.compile(
    r"\(r\)|\(tm\)|\b(nvidia|geforce|tesla|quadro|amd|radeon|instinct|intel|corporation)\b"
)


def _content_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()[:12]


HARDWARE_TABLE_VERSION: str = _content_hash(SPECS_CSV)


def _number(value: Any, column: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):  # float(True) is 1.0
        raise ValueError(f"{column}={value!r} is not a number")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{column}={str(value)[:40]!r} is not a number") from None
    if not (x > 0 and x != float("inf")):
        raise ValueError(f"{column}={value!r} must be a positive finite number")
    return x


def _aliases(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (str, list, tuple)):
        raise ValueError(f"aliases={value!r}: expected names separated by '|' or a list of names")
    items = value.split("|") if isinstance(value, str) else list(value)
    names = [_as_text(a, "aliases") for a in items]  # YAML's `off` is a boolean, not a name
    return tuple(a for a in names if a)


def _build(raw: dict[str, Any], default_source: str, require: bool) -> HardwareSpec:
    """A spec from one raw entry; raises ValueError saying what is wrong."""
    unknown = sorted(set(raw) - set(COLUMNS) - {"threads"})
    if unknown:
        hints = "".join(suggest(c, COLUMNS) for c in unknown)
        raise ValueError(f"unknown column(s) {', '.join(unknown)}{hints}; expected {', '.join(COLUMNS)}")
    if require:
        missing = [c for c in REQUIRED_COLUMNS if raw.get(c) in (None, "")]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
    name = _text(raw, "name").lower()
    if not _NAME_RE.match(name):
        raise ValueError(f"name {raw.get('name')!r} must be a lowercase slug such as my-gpu")
    kind = (_text(raw, "kind") or "gpu").lower()
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} must be one of {', '.join(KINDS)}")
    threads = raw.get("threads")
    if threads not in (None, ""):
        if _number(threads, "threads") != int(float(threads)):
            raise ValueError(f"threads={threads!r} must be a positive integer")
        threads = int(float(threads))
    values: dict[str, Any] = {c: _number(raw.get(c), c) for c in NUMERIC_COLUMNS}
    return HardwareSpec(
        name=name,
        display_name=_text(raw, "display_name") or name,
        aliases=_aliases(raw.get("aliases")),
        vendor=_text(raw, "vendor").lower(),
        kind=kind,
        generation=_text(raw, "generation").lower(),
        interconnect=_text(raw, "interconnect"),
        source=_text(raw, "source") or default_source.strip(),
        threads=threads or None,
        **values,
    )


def _text(raw: dict[str, Any], column: str) -> str:
    """A text column of a spec entry (see :func:`_as_text`)."""
    return _as_text(raw.get(column), column)


def _as_text(value: Any, column: str) -> str:
    """``value`` stripped; a number is written as text (``generation: 8.6`` in YAML), a mapping, list or boolean is
    refused rather than turned into its Python repr."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{column}={value!r} must be text")
    return str(value).strip()


def spec_to_dict(spec: HardwareSpec) -> dict[str, Any]:
    """Plain JSON-able dict (aliases as a list); ``spec_from_dict`` reverses it."""
    out = asdict(spec)
    out["aliases"] = list(spec.aliases)
    return out


def spec_from_dict(data: dict[str, Any]) -> HardwareSpec:
    """Rebuild a spec saved with :func:`spec_to_dict` (a probe record may lack peaks)."""
    try:
        return _build(dict(data), default_source="", require=False)
    except ValueError as e:
        raise GnnperfError(f"bad hardware record {data.get('name')!r}: {e}") from None


def _read_csv(path: Path, default_source: str, require: bool) -> list[HardwareSpec]:
    try:
        return _read_csv_rows(path, default_source, require)
    except UnicodeDecodeError as e:
        raise _not_utf8(path, e) from None
    except OSError as e:
        raise GnnperfError(f"{path}: cannot read: {e.strerror or e}") from None


def _not_utf8(path: Path, e: UnicodeDecodeError) -> GnnperfError:
    return GnnperfError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})")


def _read_csv_rows(path: Path, default_source: str, require: bool) -> list[HardwareSpec]:
    specs = []
    # utf-8-sig: a byte-order mark (spreadsheets write one) would otherwise stick to the first column's name
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        unknown = sorted(set(header) - set(COLUMNS) - {"threads"})
        if unknown:
            raise GnnperfError(
                f"{path}: header: unknown column(s) {', '.join(unknown)}; expected {', '.join(COLUMNS)}"
            )
        for raw in reader:
            if None in raw:  # more cells than header columns
                raise GnnperfError(f"{path}: row {reader.line_num}: more cells than columns (quote commas)")
            try:
                specs.append(_build(raw, default_source, require))
            except ValueError as e:
                raise GnnperfError(f"{path}: row {reader.line_num}: {e}") from None
    return specs


def _entries(data: Any) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and "name" in data:
        return [data]
    if isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()):
        return [{"name": k, **v} for k, v in data.items()]
    raise ValueError("expected one entry, a list of entries or a mapping name -> entry")


def _read_user_file(path: Path) -> list[HardwareSpec]:
    """The entries of one user spec file; an empty file, or one naming a device twice, is refused."""
    specs = _read_user_entries(path)
    if not specs:
        raise GnnperfError(f"{path}: no hardware entries in it")
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise GnnperfError(f"{path}: device '{spec.name}' is given twice: keep one entry")
        seen.add(spec.name)
    return specs


def _read_user_entries(path: Path) -> list[HardwareSpec]:
    if not path.is_file():
        raise GnnperfError(f"hardware file {path} {'is a directory' if path.is_dir() else 'not found'}")
    default_source = f"user spec file {path.name}"
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _read_csv(path, default_source, require=True)
    if suffix not in (".yaml", ".yml", ".json"):
        raise GnnperfError(f"{path}: hardware files must end in .csv, .yaml, .yml or .json")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise _not_utf8(path, e) from None
    except OSError as e:
        raise GnnperfError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        if suffix == ".json":
            data = json.loads(text)
        else:
            import yaml  # lazy: only user YAML files need it

            data = yaml.safe_load(text)
        entries = _entries(data)
    except Exception as e:  # parse errors of either format, reported as one line
        raise GnnperfError(f"{path}: cannot read hardware entries: {' '.join(str(e).split())}") from None
    specs = []
    for i, raw in enumerate(entries, start=1):
        label = f"entry {i}" + (f" ({raw.get('name')})" if isinstance(raw, dict) and raw.get("name") else "")
        if not isinstance(raw, dict):
            raise GnnperfError(f"{path}: {label}: expected a mapping of column -> value")
        try:
            specs.append(_build(raw, default_source, require=True))
        except ValueError as e:
            raise GnnperfError(f"{path}: {label}: {e}") from None
    return specs


@lru_cache(maxsize=1)
def _packaged() -> tuple[HardwareSpec, ...]:
    return tuple(_read_csv(SPECS_CSV, default_source="", require=True))


def _user_files(extra: str | Path | None) -> list[Path]:
    paths = [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p.strip()]
    return paths + ([Path(extra)] if extra else [])


def load_table(extra: str | Path | None = None) -> dict[str, HardwareSpec]:
    """The packaged table plus user spec files (``$GNNPERF_HARDWARE_FILE``, then ``extra``).

    A user entry with the name of an existing one replaces it.
    """
    table = {s.name: s for s in _packaged()}
    for path in _user_files(extra):
        for spec in _read_user_file(path):
            table[spec.name] = spec
    return table


def _key(text: str) -> str:
    """Spelling-insensitive key: lowercase alphanumerics, without a trailing run counter like ``(2)``."""
    return re.sub(r"[^a-z0-9]", "", re.sub(r"\(\d+\)\s*$", "", text.strip().lower()))


def _loose_key(text: str) -> str:
    return _key(_BRAND_RE.sub(" ", text.lower()))


@lru_cache(maxsize=16)
def _index(entries: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[dict[str, str], dict[str, str | None]]:
    """(exact key -> name, brand-stripped key -> name or None where ambiguous) of (name, spellings) entries.

    Cached on the spellings: a predictor looks every query's device up in the table joined with its training
    devices, and rebuilding the index (two regexes per spelling) was most of a lookup.
    """
    exact: dict[str, str] = {}
    loose: dict[str, str | None] = {}
    for name, texts in entries:
        for text in texts:
            k = _key(text)
            if exact.setdefault(k, name) != name:
                raise GnnperfError(f"hardware alias {text!r} names both {exact[k]} and {name}")
            lk = _loose_key(text)
            if lk and loose.setdefault(lk, name) != name:
                loose[lk] = None
    return exact, loose


def _lookup(table: dict[str, HardwareSpec], text: str) -> str | None:
    exact, loose = _index(tuple((s.name, (s.name, s.display_name, *s.aliases)) for s in table.values()))
    return exact.get(_key(text)) or loose.get(_loose_key(text))


def canonical_name(text: str, extra: str | Path | None = None) -> str | None:
    """The table name for a device spelling (``"NVIDIA GeForce RTX 3090"`` -> ``rtx-3090``), or None."""
    return _lookup(load_table(extra), text) if text and text.strip() else None


def _did_you_mean(text: str, table: dict[str, HardwareSpec]) -> str:
    import difflib

    k = _loose_key(text) or _key(text)
    hits = [n for n in sorted(table) if k and k in _key(n)]
    hits += [
        n
        for n in difflib.get_close_matches(text.strip().lower(), sorted(table), n=3, cutoff=0.6)
        if n not in hits
    ]
    return f" (did you mean: {', '.join(hits[:5])}?)" if hits else ""


def get_spec(
    name_or_alias: str, extra: str | Path | None = None, records: Mapping[str, HardwareSpec] | None = None
) -> HardwareSpec:
    """Look a device up by name or alias, ignoring case and punctuation.

    Args:
        name_or_alias: the device's name, display name or an alias.
        extra: a user spec file (see :func:`load_table`).
        records: devices beyond the table, e.g. those a predictor checkpoint was trained on (the CPUs of the
            measured stores are in no table); a table or user entry of the same name wins.

    Raises:
        GnnperfError: unknown device; the message lists close names, all names and how to add one.
    """
    table = load_table(extra)
    if records:
        table = {**records, **table}
    name = _lookup(table, name_or_alias) if name_or_alias.strip() else None
    if name is None:
        raise GnnperfError(
            f"unknown hardware {name_or_alias!r}{_did_you_mean(name_or_alias, table)}; "
            f"known: {', '.join(sorted(table))}; add one with a spec file "
            f"(--hardware-file my_gpu.yaml, columns: {', '.join(COLUMNS)})"
        )
    return table[name]
