"""Dataset generation: a plan of (model, workload) pairs, measured and stored resumably.

The plan is a pure function of the config (seeded), so a rerun plans the same samples and skips every
``sample_id`` already in the store (with ``retry_failed``, only those stored as ``ok``). The optimizer and
precision of each sample are drawn from one stream over the whole plan: a rerun resumes only with the same
config, and one with more models or families draws other optimizers for those already measured. Shards are
flushed every ``shard_every`` samples and when the run ends, fails or is interrupted (Ctrl-C; ``gnnperf-generate``
turns SIGTERM into the same), so only a killed run (SIGKILL, the out-of-memory killer) loses up to one
unflushed shard of measurements, and never a stored one.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnnperf.data.schema import sample_from_measurement, sample_id
from gnnperf.errors import GnnperfError, number
from gnnperf.measure.workload import MeasureSettings, Workload

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlannedSample:
    model_ref: str
    family: str
    workload: Workload


def plan_samples(zoo: Mapping[str, Any], workload: Mapping[str, Any]) -> Iterator[PlannedSample]:
    """Every (model, workload) the config asks for, in a stable order.

    Each zoo family draws ``samples_per_family`` configurations from its sampler (seeded by the zoo seed and the
    family name); each configuration is measured at every batch size, with an optimizer and precision drawn
    from the workload's lists (with ``optimizer_draw: each``, once with every optimizer of the list, ``none``
    timed as ``fwd+bwd``: the update's own time, paired). Named models in ``zoo.models`` are measured the same
    way; an entry may also be ``{ref: timm:resnet50, batch_sizes: [256]}`` to measure that model at its own batch
    sizes (as a public benchmark table chose them per model) instead of the workload's.
    """
    from gnnperf.zoo.registry import get_family
    from gnnperf.zoo.resolve import resolve

    seed = number(zoo.get("seed", 0), "zoo.seed", minimum=0)
    per_family = number(zoo.get("samples_per_family", 1), "zoo.samples_per_family", minimum=0)
    refs: list[tuple[str, list[int] | None]] = []
    for name in zoo.get("families") or []:
        family = get_family(name)
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        fixed = dict((zoo.get("overrides") or {}).get(name, {}) or {})
        seen: set[str] = set()
        for _ in range(per_family * 4):  # redraw duplicates, within reason
            params = family.params({**family.sample(rng), **fixed})
            query = "&".join(f"{k}={_fmt(v)}" for k, v in sorted(params.items()))
            ref = resolve(f"zoo:{name}?{query}").ref
            if ref not in seen:
                seen.add(ref)
                refs.append((ref, None))
            if len(seen) == per_family:
                break
    refs += [_named_model(entry) for entry in zoo.get("models") or []]

    rng = np.random.default_rng(seed)
    default_batches = [
        number(b, "workload.batch_sizes", minimum=1) for b in workload.get("batch_sizes") or []
    ]
    mode = workload.get("mode", "train")
    optimizers = [str(o) for o in workload.get("optimizers") or ["sgd"]]
    each = _each_optimizer(workload, mode)
    for ref, batch_sizes in refs:
        spec = resolve(ref)
        shape = spec.input_shape(None)
        for batch in batch_sizes or default_batches:
            # "each": every optimizer on the same step; drawn before the precision, as plans always drew them
            chosen = optimizers if each else [str(rng.choice(optimizers))] if mode == "train" else ["none"]
            precision = str(rng.choice(list(workload.get("precisions") or ["fp32"])))
            for optimizer in chosen:
                timed = workload.get("timed") if optimizer != "none" else "fwd+bwd"  # no update: fwd+bwd
                yield PlannedSample(
                    model_ref=spec.ref,
                    family=spec.family,
                    workload=Workload(
                        batch_size=batch,
                        input_shape=tuple(shape),
                        mode=mode,
                        precision=precision,
                        optimizer=optimizer,
                        timed=timed if mode == "train" else "fwd",
                        memory_format=workload.get("memory_format", "contiguous"),
                    ),
                )


def _each_optimizer(workload: Mapping[str, Any], mode: str) -> bool:
    """Whether ``workload.optimizer_draw`` asks for every optimizer on each step (``each``) or one drawn (``one``)."""
    draw = workload.get("optimizer_draw", "one")
    if draw not in ("one", "each"):
        raise GnnperfError(f"bad workload.optimizer_draw {draw!r}: expected one or each")
    if draw == "each" and (mode != "train" or workload.get("timed") != "fwd+bwd+opt"):
        raise GnnperfError(
            "workload.optimizer_draw=each times every optimizer's update: it needs mode train and timed "
            f"fwd+bwd+opt, got mode {mode} and timed {workload.get('timed')}"
        )
    return draw == "each"


def _named_model(entry: Any) -> tuple[str, list[int] | None]:
    """A ``zoo.models`` entry: ``"timm:resnet50"`` or ``{ref: ..., batch_sizes: [...]}``."""
    if isinstance(entry, str):
        return entry, None
    if isinstance(entry, Mapping) and isinstance(entry.get("ref"), str):
        unknown = sorted(set(entry) - {"ref", "batch_sizes"})
        batches = entry.get("batch_sizes")
        if not unknown and (
            batches is None or (isinstance(batches, Sequence) and not isinstance(batches, str) and batches)
        ):
            sizes = [number(b, f"zoo.models batch_sizes of {entry['ref']}", minimum=1) for b in batches or []]
            return entry["ref"], sizes or None
    raise GnnperfError(
        f"bad zoo.models entry {entry!r}: expected a model reference or {{ref: ..., batch_sizes: [...]}}"
    )


def _fmt(v: Any) -> str:
    return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def identity_of(p: PlannedSample, hardware: str, software: str) -> str:
    """The ``sample_id`` the measurement of ``p`` will have."""
    w = p.workload
    return sample_id(
        {
            "model_ref": p.model_ref,
            "family": p.family,
            "input_shape": w.input_shape_str,
            "batch_size": w.batch_size,
            "mode": w.mode,
            "precision": w.precision,
            "optimizer": w.optimizer,
            "timed": w.timed_label,
            "memory_format": w.memory_format,
            "num_devices": w.num_devices,
            "hardware": hardware,
            "software": software,
        }
    )


def run_plan(
    plan: list[PlannedSample],
    store,
    settings: MeasureSettings,
    hardware: str,
    software: str,
    timeout_s: float = 300.0,
    shard_every: int = 20,
    limit: int | None = None,
    graph_cache=None,
    progress: bool = True,
    retry_failed: bool = False,
    libraries: str | None = None,
) -> dict[str, int]:
    """Measure the samples of ``plan`` not yet in ``store``; returns counts by status.

    Also ``skipped`` (already stored), ``repeated`` (planned twice: measured once) and ``left`` (not reached
    within ``limit``). With ``retry_failed``, samples stored as ``error`` or ``oom`` are measured again (the
    store reads the latest failure, or the measurement that succeeded). ``libraries``
    (:func:`gnnperf.measure.harness.library_versions`) is written into every new row.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from gnnperf.measure.runner import run_measurement

    done = store.existing_ids(status="ok") if retry_failed else store.existing_ids()
    todo: dict[str, PlannedSample] = {}
    counts: Counter[str] = Counter(skipped=0)
    for p in plan:
        key = identity_of(p, hardware, software)
        if key in done:
            counts["skipped"] += 1
        elif key in todo:  # e.g. one model under two spellings that resolve alike
            counts["repeated"] += 1
        else:
            todo[key] = p
    measure = list(todo.values())[: None if limit is None else int(limit)]
    if len(measure) < len(todo):
        counts["left"] = len(todo) - len(measure)
    buffer: list[dict] = []
    graphs_built: set[tuple[str, tuple[int, ...]]] = set()
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
    )
    columns += (TimeElapsedColumn(), TimeRemainingColumn())
    try:
        with Progress(*columns, disable=not progress, transient=False) as bar:
            task = bar.add_task(f"measuring on {hardware}", total=len(measure), rate="")
            for i, p in enumerate(measure, 1):
                started = time.perf_counter()
                result = run_measurement(p.model_ref, p.workload, settings, timeout_s)
                # wall time per sample (build, warm-up with autotuning, timing): where a device lease goes
                log.info(
                    "%d/%d %s batch %d %s: %s %s ms, %.1f s",
                    i,
                    len(measure),
                    p.model_ref.split("?")[0],
                    p.workload.batch_size,
                    p.workload.precision,
                    result["status"],
                    "-" if result["iteration_time_ms"] is None else f"{result['iteration_time_ms']:.2f}",
                    time.perf_counter() - started,
                )
                buffer.append(
                    sample_from_measurement(
                        p.model_ref, p.family, p.workload, hardware, software, result, libraries=libraries
                    )
                )
                counts[result["status"]] += 1
                if graph_cache is not None and (p.model_ref, p.workload.input_shape) not in graphs_built:
                    graphs_built.add((p.model_ref, p.workload.input_shape))
                    _build_graph(p, graph_cache)
                if len(buffer) >= shard_every:
                    # interrupted right after the write, `finally` writes them again: reads deduplicate
                    store.write_shard(buffer)
                    buffer = []
                elapsed = bar.tasks[0].elapsed or 1e-9
                bar.update(task, advance=1, rate=f"{i / elapsed:.2f} samples/s")
    finally:
        if buffer:
            store.write_shard(buffer)
    return dict(counts)


def _build_graph(p: PlannedSample, cache) -> None:
    from gnnperf.graph.build import build_graph

    try:
        build_graph(p.model_ref, p.workload.input_shape, cache=cache)
    except GnnperfError as e:  # the timing is still a valid sample; the graph failure is reported
        log.warning("graph of %s not built: %s", p.model_ref, e)
