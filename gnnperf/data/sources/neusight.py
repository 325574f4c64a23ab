"""NeuSight end-to-end labels (sitar-lab/NeuSight ``scripts/asplos/label``) -> samples.

``label/<DEVICE>/<model>-<train|inf>-<seqlen>-<batch>[-<option>].json`` holds ``e2e_latency`` (ms). What it
timed (NeuSight ``trace.py::measure_e2e``, PyTorch 2.1.0 + transformers 4.38.1, see ``SOURCE.md``): a
HuggingFace model from ``data/DLmodel_configs/<model>.json`` with random fp32 weights and TF32 off, fed
``torch.ones(batch, seqlen)`` token ids; 25 runs, the mean of the fastest 5 (``n_iters=5``, no spread).

- ``train``: forward + ``loss.backward()``, no optimizer step -> ``timed=fwd+bwd``, ``optimizer=none``;
- ``inf``: forward under ``torch.no_grad()`` -> ``mode=infer``, ``timed=fwd``;
- ``-fusion``: the model ran through ``torch.compile`` -> ``+compile`` in ``software``;
- ``-dp4`` / ``-tp4`` / ``-pp4_1``: 4-GPU Megatron-LM runs (data / tensor / pipeline parallel) ->
  ``num_devices=4``, ``software=torch=2.1.0+megatron+<option>``: a different program and device count, so
  these never share an id (or a pool) with the single-GPU HuggingFace runs. ``batch_size`` is the batch in the
  file name, whose split over the 4 GPUs NeuSight does not record.

``model_ref`` is ``hf:<absolute path of the config>?attn_implementation=eager`` under the folder the user gave
(symbolic links resolved), so the reference builds the measured model with :func:`gnnperf.zoo.resolve.resolve`:
transformers 4.38 ran these classes' eager attention (their sdpa came later, and is transformers' default now, so the
reference names eager); ``family`` is the config's ``model_type``. Where NeuSight ran another class than the
config's ``architectures`` (BERT inference, :data:`TIMED_CLASS`), the reference names it:
``hf:<path>?class=BertForSequenceClassification&attn_implementation=eager``. The path is part
of the sample's identity: the same labels imported from a copy of the folder elsewhere are other samples (their
model is another file).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gnnperf.data.schema import make_sample
from gnnperf.data.sources import register_source
from gnnperf.data.sources.common import (
    Collector,
    ImportReport,
    existing_path,
    is_utf8,
    positive_number,
    printable,
    ref_name,
)
from gnnperf.errors import GnnperfError
from gnnperf.hardware.table import canonical_name

SOURCE = "neusight"
SOFTWARE = "torch=2.1.0+transformers=4.38.1"
MEGATRON_SOFTWARE = "torch=2.1.0+megatron"
N_ITERS = 5  # mean of the fastest 5 of 25 runs
CONFIG_DIR = ("data", "DLmodel_configs")
_NAME_RE = re.compile(
    r"^(?P<model>[A-Za-z0-9_.]+)-(?P<mode>train|inf)-(?P<seq>\d+)-(?P<batch>\d+)(?:-(?P<option>[A-Za-z0-9_]+))?\.json$"
)
_PARALLEL_RE = re.compile(r"^(?:dp|tp|pp)(?P<n>\d+)(?:_\d+)?$")
# (model_type, mode) -> the transformers class NeuSight timed where it is not the config's ``architectures`` one.
# trace.py::get_model picks the class by mode: GPT-2 and OPT as AutoModelForCausalLM and Switch as
# AutoModelForSeq2SeqLM (the configs' classes); BERT trains as AutoModelForPreTraining (the config's BertLMHeadModel
# plus a pooler and a 2-way head on the first token, which the priced first output does not use: the same graph)
# and infers as AutoModelForSequenceClassification, without the config's LM head over every position.
TIMED_CLASS: dict[tuple[str, str], str] = {("bert", "infer"): "BertForSequenceClassification"}


def find_root(path: Path) -> Path:
    """The NeuSight folder (the one holding ``label/``) at or above ``path``."""
    start = path if path.is_dir() else path.parent
    for p in (start, *start.parents):
        if (p / "label").is_dir():
            return p
    raise GnnperfError(f"{path} is not inside a NeuSight folder (no label/ directory at or above it)")


def parse_label_name(name: str) -> dict[str, Any]:
    """Model, workload and software fields from a label file name; raises ValueError saying what is wrong."""
    m = _NAME_RE.match(name)
    if not m:
        raise ValueError("file name does not match <model>-<train|inf>-<seqlen>-<batch>[-<option>].json")
    seq, batch, option = int(m["seq"]), int(m["batch"]), m["option"]
    if seq < 1 or batch < 1:
        raise ValueError("sequence length and batch must be positive")
    train = m["mode"] == "train"
    software, num_devices = SOFTWARE, 1
    if option == "fusion":
        software += "+compile"
    elif option:
        parallel = _PARALLEL_RE.match(option)
        if not parallel:
            raise ValueError(f"unknown option '{option}' (expected fusion, dpN, tpN or ppN_M)")
        software, num_devices = f"{MEGATRON_SOFTWARE}+{option}", int(parallel["n"])
    return {
        "model": m["model"],
        "input_shape": str(seq),
        "batch_size": batch,
        "mode": "train" if train else "infer",
        "precision": "fp32",
        "optimizer": "none",
        "timed": "fwd+bwd" if train else "fwd",
        "memory_format": "contiguous",
        "num_devices": num_devices,
        "software": software,
    }


@register_source(
    SOURCE, "NeuSight transformer labels: fwd+bwd / fwd, fp32 (TF32 off), HF configs, several GPUs"
)
def read(path: str | Path, limit: int | None = None) -> tuple[list[dict[str, Any]], ImportReport]:
    """Samples from NeuSight label JSONs under ``path`` (the NeuSight folder, a ``label/<DEVICE>`` folder or
    one label file)."""
    given = existing_path(path, "NeuSight")
    root = find_root(given)
    config_dir = root.joinpath(*CONFIG_DIR).resolve()
    report = ImportReport(SOURCE)
    out = Collector(report, limit)
    label_dir = (root / "label").resolve()
    base = root / "label" if given.is_dir() and given.resolve() == root.resolve() else given
    files = [given] if given.is_file() else sorted(p for p in base.rglob("*.json") if p.is_file())
    configs: dict[tuple[str, str | None], tuple[str, str] | str] = {}

    def config(model: str, class_name: str | None) -> tuple[str, str] | str:
        if (model, class_name) not in configs:
            configs[model, class_name] = _config(config_dir / f"{model}.json", class_name)
        return configs[model, class_name]

    for file in files:
        if out.full:
            break
        ref = ref_name(file, 3)
        report.files += 1
        if label_dir not in file.resolve().parents:
            report.skip_file(ref, "not a label file (outside label/)")
            continue
        report.rows += 1
        try:
            fixed = parse_label_name(file.name)
        except ValueError as e:
            report.skip_file(ref, str(e))
            continue
        hardware = canonical_name(file.parent.name)
        if hardware is None:
            report.skip_file(ref, f"unknown device '{file.parent.name}' (not in the hardware table)")
            continue
        model = fixed.pop("model")
        built = config(model, None)
        if not isinstance(built, str) and (timed_class := TIMED_CLASS.get((built[1], fixed["mode"]))):
            built = config(model, timed_class)
        if isinstance(built, str):
            report.skip_file(ref, built)
            continue
        model_ref, family = built
        latency = _latency(file, ref, report)
        if latency is None:
            continue
        try:
            sample = make_sample(
                model_ref=model_ref,
                family=family,
                hardware=hardware,
                iteration_time_ms=latency,
                n_iters=N_ITERS,
                status="ok",
                source=SOURCE,
                source_ref=ref,
                **fixed,
            )
        except GnnperfError as e:
            report.skip_file(ref, str(e))
            continue
        out.add(sample, ref, None)
    return out.rows, report


def _config(path: Path, class_name: str | None) -> tuple[str, str] | str:
    """(``hf:`` reference, model type) of a model config built as ``class_name`` (else its ``architectures``), or
    the reason it cannot be used.

    As the other adapters do, a row whose model cannot be built (a missing or unreadable config too) is reported,
    not imported; resolving reads the file and says which of these it is.
    """
    from gnnperf.zoo.resolve import resolve  # imports torch and transformers: only when a label is read

    if not is_utf8(str(path)):  # a shard stores text: the sample's model_ref could not be written
        return f"model config path {printable(str(path))} is not UTF-8 text; rename its folder"
    try:
        spec = resolve(
            f"hf:{path}?" + (f"class={class_name}&" if class_name else "") + "attn_implementation=eager"
        )
    except GnnperfError as e:
        return f"model config cannot be used: {e}"
    return spec.ref, spec.family


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, refusing repeated keys: json.loads keeps the last one silently, and a label with
    two ``e2e_latency`` values does not say which was measured."""
    keys = [k for k, _ in pairs]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise ValueError(f"key {', '.join(map(repr, repeated))} appears more than once")
    return dict(pairs)


def _latency(file: Path, ref: str, report: ImportReport) -> float | None:
    """``e2e_latency`` of a label file, or None after reporting why it is unusable."""
    try:
        # utf-8-sig: a byte order mark, as the CSV adapters take
        data = json.loads(file.read_text(encoding="utf-8-sig"), object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        report.skip_file(ref, f"not valid JSON: {e.msg} (column {e.colno})", row=e.lineno)
        return None
    except (OSError, UnicodeDecodeError) as e:
        report.skip_file(ref, f"cannot read: {e}")
        return None
    except ValueError as e:  # a repeated key; an integer past Python's digit limit
        report.skip_file(ref, f"not usable JSON: {e}")
        return None
    value = data.get("e2e_latency") if isinstance(data, dict) else None
    # a JSON number: a string ("5.0") is a hand-edited label, not what trace.py wrote
    usable = isinstance(value, (int, float)) and not isinstance(value, bool)
    latency = positive_number(value) if usable else None
    if latency is None:
        report.skip_file(ref, f"no positive e2e_latency ({value!r})")
    return latency
