"""What a checkpoint's training rows covered (``trained_on`` in the checkpoint), and which queries leave it.

``gnnperf-train`` records it from the train part's samples (:func:`coverage`); :class:`~gnnperf.predict.Predictor`
checks every query against it, so that a prediction names what it extrapolates instead of doing so silently:

- op types no train graph had (:func:`unseen_op_types`; the network's own record, ``PerfGNN.seen_ops``);
- workload features that never varied in training and differ from their one value there
  (:func:`unlearned_workload`; the network's train statistics);
- a batch size or device count outside the trained range (:func:`outside_range`): the network has seen these
  features vary, but only within that range;
- a device whose data-sheet rates or sizes lie outside those of the training devices of its kind
  (:func:`hardware_outside_range`): e.g. a B200 from a predictor trained up to the H200;
- a workload value seen in training only on the other kind of device (:func:`unseen_on_kind`): each categorical
  feature is learned across kinds, so a value seen only on GPUs (channels_last, amp_fp16) is extrapolated on a CPU;
- values each seen on the query's kind of device but never together (:func:`unseen_combinations`);
- on a training device, a workload value seen on its kind but never on that device (:func:`unseen_on_device`):
  the shipped predictor's RTX 4090 rows are all inference, so its training steps take their level from other GPUs;
- a workload value seen on the query's kind in fewer than :data:`THIN_ROWS` training rows (:func:`thin_on_kind`):
  the H200's nine AMP bf16 steps of small zoo models, the only bf16 rows, teach no level for it;
- a model input of a rank no training graph had (:func:`unseen_input_rank`): a video model's 5-D clips from a
  predictor trained on images and token ids (checkpoints since 2026-12-03 record ``input_ranks``);
- a prediction faster than every training row of its mode (training step or inference) on its kind of device
  (:func:`faster_than_trained`): the shipped predictor's 0.1 ms for a small MLP's training step on an A100, where no
  GPU training step in its data took under 3.8 ms.

Where a device runs bf16 at its fp16 rate and training barely saw bf16, :func:`same_rate_precision` names the fp16
precision whose step is predicted instead. :func:`extrapolation` runs every check for one prediction row, and
:func:`check_respecified` refuses a spec file that gives a training device other figures.

Checkpoints saved before an entry was recorded give empty lists.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for the hints only: predict's start-up imports none of them
    import pandas as pd
    import torch

    from gnnperf.graph.ir import OpGraph
    from gnnperf.hardware.table import HardwareSpec
    from gnnperf.measure.workload import Workload
    from gnnperf.predict import Predictor
    from gnnperf.predictor.model import Standardize

# Workload sizes whose training range is recorded (``workload_range``).
RANGED = ("batch_size", "num_devices")
# Categorical workload fields whose values are recorded per device kind, and those whose combinations are: the
# optimizer is ``none`` exactly where no step is timed, so its combinations say little that ``timed`` does not (and
# checkpoints from before it was recorded hold four-field combinations).
BY_KIND = ("mode", "precision", "timed", "memory_format", "optimizer")
COMBINED = BY_KIND[:4]
# A value in fewer training rows of a device kind than this is flagged (thin_on_kind).
THIN_ROWS = 100
# bf16 precisions and the fp16 ones whose step they are predicted as on a device with one rate for both.
SAME_RATE_AS = {"amp_bf16": "amp_fp16", "bf16": "fp16"}


def workload_range(samples: pd.DataFrame) -> dict[str, list[int]]:
    """``{column: [min, max]}`` of the ranged workload sizes over a samples frame (the train part of a run)."""
    return {k: [int(samples[k].min()), int(samples[k].max())] for k in RANGED}


def workload_counts_by_kind(
    samples: pd.DataFrame, kind_of: Mapping[str, str]
) -> dict[str, dict[str, dict[str, int]]]:
    """``{device kind: {field: {value: rows}}}`` of the categorical workload fields over a samples frame.

    Args:
        kind_of: device name -> its kind (``gpu``/``cpu``), for every device of ``samples``; name -> name gives
            the counts per device.
    """
    kinds = samples["hardware"].map(kind_of)
    return {
        str(kind): {k: {str(v): int(n) for v, n in sorted(part[k].value_counts().items())} for k in BY_KIND}
        for kind, part in samples.groupby(kinds, sort=True)
    }


def workload_by_kind(samples: pd.DataFrame, kind_of: Mapping[str, str]) -> dict[str, dict[str, list[str]]]:
    """``{device kind: {field: sorted values}}`` of the categorical workload fields (see :func:`workload_counts_by_kind`)."""
    counts = workload_counts_by_kind(samples, kind_of)
    return {kind: {k: sorted(values) for k, values in fields.items()} for kind, fields in counts.items()}


def workload_combinations_by_kind(
    samples: pd.DataFrame, kind_of: Mapping[str, str]
) -> dict[str, list[list[str]]]:
    """``{device kind: sorted combinations of the COMBINED fields}`` over a samples frame.

    Each value can be seen on a kind without the combination: the shipped predictor's GPU rows have channels-last
    only in AMP fp16 training steps.
    """
    kinds = samples["hardware"].map(kind_of)
    return {
        str(kind): sorted(map(list, set(part[list(COMBINED)].astype(str).itertuples(index=False, name=None))))
        for kind, part in samples.groupby(kinds, sort=True)
    }


def coverage(samples: pd.DataFrame, kind_of: Mapping[str, str]) -> dict[str, Any]:
    """The ``trained_on`` entries of a train part: its devices, workload range, values and combinations per kind.

    ``devices`` are those with training rows; a checkpoint's device list (``hparams["devices"]``, the order of its
    embeddings) holds every device of its data, the held-out one of a leave-one-device-out run included.
    """
    return {
        "devices": sorted(map(str, samples["hardware"].unique())),
        "workload_range": workload_range(samples),
        "workload_by_kind": workload_by_kind(samples, kind_of),
        "workload_counts_by_kind": workload_counts_by_kind(samples, kind_of),
        "workload_combinations_by_kind": workload_combinations_by_kind(samples, kind_of),
        "workload_by_device": workload_by_kind(samples, {d: d for d in samples["hardware"].unique()}),
        "fastest_ms": fastest_rows(samples, kind_of),
    }


def fastest_rows(samples: pd.DataFrame, kind_of: Mapping[str, str]) -> dict[str, dict[str, list[Any]]]:
    """``{device kind: {mode: [ms, device]}}``: the fastest training and inference rows over a samples frame."""
    out: dict[str, dict[str, list[Any]]] = {}
    for (device, mode), ms in samples.groupby(["hardware", "mode"])["iteration_time_ms"].min().items():
        kind = out.setdefault(str(kind_of[device]), {})
        if str(mode) not in kind or ms < kind[str(mode)][0]:
            kind[str(mode)] = [float(ms), str(device)]
    return out


def faster_than_trained(trained_on: Mapping[str, Any], row: Mapping[str, Any], kind: str) -> str | None:
    """``0.11 ms, under the fastest train row of any gpu in training (3.84 ms, h200)`` where ``row``'s prediction is
    faster than every training row of its mode on its kind of device, else None.

    Per kind and mode, not per device or timed region: the shipped predictor's T4 rows are all large transformers
    (694 ms and up), yet a ResNet-50 there lies inside the times its GPU rows covered. Older checkpoints give None.
    """
    mode, ms = str(row["mode"]), float(row["iteration_time_ms"])
    floor, device = trained_on.get("fastest_ms", {}).get(kind, {}).get(mode, [None, None])
    if floor is None or ms >= floor:
        return None
    return f"{ms:.3g} ms, under the fastest {mode} row of any {kind} in training ({floor:.3g} ms, {device})"


def input_ranks(graphs: Iterable[OpGraph]) -> list[int]:
    """Ranks of the model inputs of ``graphs``, batch included: 4 for images, 2 for token ids, 5 for video clips."""
    return sorted({len(g.input_shape) + 1 for g in graphs})


def unseen_input_rank(trained_on: Mapping[str, Any], graph: OpGraph) -> str | None:
    """``5-D input (trained on 2-D, 4-D)`` where ``graph``'s input rank is not among the recorded ones, else None.

    A 3-D convolution is the op type ``Conv`` as a 2-D one is, so no op check sees a video model; the input rank
    does. Checkpoints without the record (before 2026-12-03, the shipped v13 included) give None.
    """
    ranks = trained_on.get("input_ranks")
    rank = len(graph.input_shape) + 1
    if not ranks or rank in ranks:
        return None
    return f"{rank}-D input (trained on {', '.join(f'{r}-D' for r in ranks)})"


def outside_range(trained_on: Mapping[str, Any], workload: Workload) -> list[str]:
    """``name=value (trained lo..hi)`` for each ranged workload size outside its training range.

    A size that was constant in training is left to the network's own check (``unlearned_workload``).
    """
    out = []
    for name, (lo, hi) in trained_on.get("workload_range", {}).items():
        value = getattr(workload, name)
        if lo < hi and not lo <= value <= hi:
            out.append(f"{name}={value} (trained {lo}..{hi})")
    return out


def hardware_outside_range(trained_specs: Iterable[Mapping[str, Any]], spec: HardwareSpec) -> list[str]:
    """``field=value (trained lo..hi)`` for each data-sheet field of ``spec`` outside the training devices' range.

    Only the training devices of ``spec``'s kind count (CPUs and GPUs differ by orders of magnitude); no field is
    checked when none is of that kind (left to :func:`unseen_on_kind`), nor one every one of them lacks. A field
    ``spec`` lacks and every one of them had is named ``field not given (...)``: the network sees a 0 and a missing
    flag it never saw set on that kind (the B200's L2 and clock; from the shipped predictor, the H100's entry
    without its L2 was predicted 14-26% slower than the H100, without its clock 8-9% faster: ResNet-50 and
    ViT-B/16, batch 128, AMP fp16).

    Args:
        trained_specs: spec dicts (``spec_to_dict``) of the devices with training rows.
        spec: the queried device's :class:`~gnnperf.hardware.table.HardwareSpec`.
    """
    from gnnperf.hardware.vector import SPEC_FIELDS

    same_kind = [t for t in trained_specs if t.get("kind") == spec.kind]
    out = []
    for field in SPEC_FIELDS:
        value = getattr(spec, field)
        seen = [t[field] for t in same_kind if t.get(field)]
        if not seen:
            continue
        if not value and len(seen) == len(same_kind):
            out.append(
                f"{field} not given (every training {spec.kind.upper()} had it: {min(seen):g}..{max(seen):g})"
            )
        elif value and not min(seen) <= value <= max(seen):
            out.append(f"{field}={value:g} (trained {min(seen):g}..{max(seen):g})")
    return out


def check_respecified(spec: HardwareSpec, trained: HardwareSpec, source: str) -> None:
    """Refuse a training device that ``source`` (a spec file) gives other specs than it was trained with.

    Its learned embedding would be paired with figures it never saw, and the row would still say "seen in training";
    under another name the device is predicted from its specs.

    Raises:
        GnnperfError: the two specs give different hardware vectors; the message names the fields that differ.
    """
    from gnnperf.errors import GnnperfError
    from gnnperf.hardware.vector import SPEC_FIELDS, hardware_vector

    if not (hardware_vector(spec) != hardware_vector(trained)).any():
        return
    differ = [
        f"{f} {getattr(spec, f)} (trained {getattr(trained, f)})"
        for f in SPEC_FIELDS
        if getattr(spec, f) != getattr(trained, f)
    ]
    raise GnnperfError(
        f"{source} gives {spec.name}, a device this checkpoint was trained on, other specs "
        f"({', '.join(differ) or 'threads, kind, vendor or ISA'}): give it another name to predict it from them"
    )


def unseen_on_kind(trained_on: Mapping[str, Any], row: Mapping[str, Any], kind: str) -> list[str]:
    """``field=value`` for each workload value seen in training on another device kind but never on ``kind``.

    ``row`` is the prediction's row, whose workload keys are the sample columns recorded in training. A value
    seen on no device at all is left to ``unlearned_workload``, except a timed label with the copy: it joins two
    features (the ``h2d`` flag and the timed region, ``h2d+fwd+bwd+opt``), each of which may have varied in training
    while the pair never occurred, so the network's own check cannot see it.
    """
    seen = trained_on.get("workload_by_kind", {})
    out = []
    for name in BY_KIND:
        value = str(row[name])
        here = seen.get(kind, {}).get(name, [])
        elsewhere = {v for k, fields in seen.items() if k != kind for v in fields.get(name, [])}
        if value not in here and (value in elsewhere or value.startswith("h2d+")):
            had = f"a {kind} in training had only: {', '.join(here)}" if here else f"no {kind} in training"
            out.append(f"{name}={value} ({had})")
    return out


def unseen_on_device(trained_on: Mapping[str, Any], row: Mapping[str, Any], kind: str) -> list[str]:
    """``field=value`` for each workload value seen on ``kind`` in training but never on the row's own device.

    Only for a device with training rows; a value never seen on ``kind`` is left to :func:`unseen_on_kind`.
    """
    device = str(row["hardware"])
    here = trained_on.get("workload_by_device", {}).get(device)
    if not here:
        return []
    on_kind = trained_on.get("workload_by_kind", {}).get(kind, {})
    out = []
    for name in BY_KIND:
        value = str(row[name])
        if value in on_kind.get(name, []) and value not in here.get(name, []):
            out.append(f"{name}={value} ({device} had only: {', '.join(here.get(name, [])) or 'none'})")
    return out


def unseen_combinations(trained_on: Mapping[str, Any], row: Mapping[str, Any], kind: str) -> list[str]:
    """The smallest sets of the row's workload values seen on ``kind`` in training, but never together.

    E.g. ``mode=infer + memory_format=channels_last`` on a GPU from the shipped predictor. Values never seen on
    ``kind`` are left to :func:`unseen_on_kind` and ``unlearned_workload``.
    """
    combos = trained_on.get("workload_combinations_by_kind", {}).get(kind)
    if not combos:
        return []
    here = trained_on.get("workload_by_kind", {}).get(kind, {})
    value = [str(row[name]) for name in COMBINED]
    fields = [i for i, name in enumerate(COMBINED) if value[i] in here.get(name, [])]
    found: list[tuple[int, ...]] = []
    for size in range(2, len(fields) + 1):
        for subset in itertools.combinations(fields, size):
            if any(set(f) <= set(subset) for f in found):
                continue  # holds a smaller set never seen together: not minimal
            if not any(all(seen[i] == value[i] for i in subset) for seen in combos):
                found.append(subset)
    return [" + ".join(f"{COMBINED[i]}={value[i]}" for i in subset) for subset in found]


def thin_on_kind(trained_on: Mapping[str, Any], row: Mapping[str, Any], kind: str) -> list[str]:
    """``field=value (n of N kind training rows)`` for each workload value in under :data:`THIN_ROWS` rows of ``kind``.

    Checkpoints saved before the counts were recorded give an empty list.
    """
    counts = trained_on.get("workload_counts_by_kind", {}).get(kind, {})
    out = []
    for name in BY_KIND:
        value, seen = str(row[name]), counts.get(name, {})
        if 0 < seen.get(value, 0) < THIN_ROWS:
            out.append(f"{name}={value} ({seen[value]} of {sum(seen.values()):,} {kind} training rows)")
    return out


def same_rate_precision(trained_on: Mapping[str, Any], precision: str, spec: HardwareSpec) -> str | None:
    """The fp16 precision whose step a bf16 ``precision`` is predicted as on ``spec``, or None to predict it as is.

    Where the data sheet gives bf16 and fp16 one tensor rate (A100, H100, H200, L4, RTX 4090), the two steps run the
    same kernels on elements of the same size; AMP fp16 adds only the gradient scaler's few passes over the
    gradients. A network that met bf16 in under :data:`THIN_ROWS` rows of the device's kind, and its fp16 twin in
    more, has learned no level for bf16 (the shipped one predicted AMP bf16 steps 1.5-3x the AMP fp16 ones, some
    slower than fp32), so the twin's step is predicted. Checkpoints saved before the counts were recorded (which
    cannot tell how thinly bf16 was seen) take the twin wherever it was seen on the kind.

    Args:
        spec: the queried device's :class:`~gnnperf.hardware.table.HardwareSpec`.
    """
    from gnnperf.hardware.vector import precision_peak_tflops

    twin = SAME_RATE_AS.get(precision)
    if twin is None or spec.kind != "gpu":
        return None
    rate = precision_peak_tflops(spec, precision)
    if not rate or rate != precision_peak_tflops(spec, twin):
        return None
    counts = trained_on.get("workload_counts_by_kind", {}).get(spec.kind, {}).get("precision")
    if counts is None:
        seen = trained_on.get("workload_by_kind", {}).get(spec.kind, {}).get("precision", [])
        return twin if twin in seen else None
    return twin if counts.get(precision, 0) < THIN_ROWS <= counts.get(twin, 0) else None


def unseen_op_types(graph: OpGraph, op_vocab: list[str], seen_ops: list[bool]) -> list[str]:
    """The graph's op types whose vocabulary entry (``OTHER`` for types outside it) no train graph had."""
    seen = dict(zip(op_vocab, seen_ops))
    return sorted({n.op_type for n in graph.nodes if not seen.get(n.op_type, seen.get("OTHER", False))})


def unlearned_workload(u: torch.Tensor, graph_features: list[str], standardize: Standardize) -> list[str]:
    """Workload features of a query's graph-level vector ``u`` that never varied in training and differ here.

    Such a feature is standardised to 0 (:class:`~gnnperf.predictor.model.Standardize` ``standardize``, the
    network's statistics of ``u``), so the prediction is the one for the training value: e.g. ``log2_devices``
    from a checkpoint trained on one device only.
    """
    from gnnperf.graph.features import WORKLOAD_FEATURES

    workload = {name for name, _ in WORKLOAD_FEATURES}
    return [
        name
        for j, name in enumerate(graph_features)
        if name in workload
        and not bool(standardize.varied[j])
        and abs(float(u[j]) - float(standardize.mean[j])) > 1e-6
    ]


def extrapolation(
    predictor: Predictor,
    row: Mapping[str, Any],
    graph: OpGraph,
    spec: HardwareSpec,
    workload: Workload,
    u: torch.Tensor,
) -> dict[str, Any]:
    """Every check above for one prediction row of ``predictor`` (each entry empty or false if nothing).

    Args:
        predictor: the :class:`~gnnperf.predict.Predictor` whose checkpoint records what it was trained on.
        row: the prediction's row, holding the query's workload fields as the network saw them.
        spec: the device's :class:`~gnnperf.hardware.table.HardwareSpec`; ``workload`` the
            :class:`~gnnperf.measure.workload.Workload` predicted; ``u`` its graph-level feature vector.
    """
    from gnnperf.hardware.vector import precision_peak_tflops

    trained_on = predictor.info.get("trained_on", {})
    devices = set(predictor.devices)
    network = predictor.model
    return {
        "unseen_op_types": unseen_op_types(graph, predictor.hparams["op_vocab"], network.seen_ops.tolist()),
        "unseen_input_rank": unseen_input_rank(trained_on, graph),
        "unlearned_workload": unlearned_workload(
            u, predictor.hparams["graph_features"], network.standardize["u"]
        ),
        "outside_training_range": outside_range(trained_on, workload),
        "hardware_outside_training_range": hardware_outside_range(
            [d for name, d in trained_on.get("hardware_specs", {}).items() if name in devices], spec
        ),
        # no rate of its own for the precision in the data sheet: every predictor prices it at the FP32 peak
        "priced_at_fp32_peak": (
            workload.precision != "fp32" and precision_peak_tflops(spec, workload.precision) is None
        ),
        "unseen_on_device_kind": unseen_on_kind(trained_on, row, spec.kind),
        "unseen_on_device": unseen_on_device(trained_on, row, spec.kind),
        "unseen_combination": unseen_combinations(trained_on, row, spec.kind),
        "thin_on_device_kind": thin_on_kind(trained_on, row, spec.kind),
        "faster_than_trained": faster_than_trained(trained_on, row, spec.kind),
    }
