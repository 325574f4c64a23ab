"""The processing step of :class:`~gnnperf.data.dataset.PerfDataset`: samples joined with their graphs.

``process_samples`` reads the samples (after the status filter and the query), drops the rows it cannot use
(unknown hardware, an invalid workload, no graph) and counts why, builds or looks up each distinct
(model_ref, input_shape) graph once, and writes the processed files the dataset loads.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gnnperf.data.store import SampleStore, select_samples
from gnnperf.errors import GnnperfError, GnnperfWarning
from gnnperf.graph.build import GraphCache, build_graph
from gnnperf.graph.features import FEATURE_VERSION
from gnnperf.graph.ir import OpGraph
from gnnperf.hardware.table import HardwareSpec, get_spec, load_table, spec_from_dict, spec_to_dict
from gnnperf.measure.workload import Workload, parse_timed_label
from gnnperf.zoo.resolve import resolve_hf

log = logging.getLogger(__name__)
# One gzip member per graph, each one JSON line: ``zcat`` reads the whole file as JSON lines, and graph k alone is
# ``gzip.decompress`` of bytes ``meta["graph_offsets"][k:k + 2]`` (see :class:`GraphFile`).
GRAPHS_FILE = "graphs.jsonl.gz"
SDPA_DROPPED = (
    "hf model timed with sdpa attention (its graph has eager attention's ops; an hf: reference without "
    "attn_implementation runs sdpa since 2026-12-06: import a NeuSight store written before again)"
)


def workload_from_row(row: Mapping[str, Any]) -> Workload:
    """The :class:`Workload` of a sample row.

    Public tables may record ``optimizer``/``memory_format`` as ``unknown``: the optimizer then takes the
    Workload default for the timed region (``sgd`` when the optimizer step is timed, else ``none``) and the
    memory format ``contiguous``.
    """
    timed, h2d = parse_timed_label(str(row["timed"]))
    optimizer = None if row["optimizer"] == "unknown" else str(row["optimizer"])
    memory_format = "contiguous" if row["memory_format"] == "unknown" else str(row["memory_format"])
    shape = tuple(int(d) for d in str(row["input_shape"]).split(",") if d)
    return Workload(
        batch_size=int(row["batch_size"]),
        input_shape=shape,
        mode=str(row["mode"]),
        precision=str(row["precision"]),
        optimizer=optimizer,
        timed=timed,
        h2d=h2d,
        memory_format=memory_format,
        num_devices=int(row["num_devices"]),
    )


def process_samples(
    stores: Sequence[Path],
    out: Path,
    graph_cache: GraphCache | None,
    status: str,
    query: str | None,
    build_graphs: bool,
    fingerprint: str,
    max_median_over_p10: float | None = None,
) -> None:
    """Write the processed files of ``stores`` into ``out`` (arguments as in :class:`PerfDataset`).

    ``meta.json`` says the files are complete: it goes first and is written last, so a run that fails or is
    stopped half-way (after truncating the graph file) leaves a root that the next one reprocesses.
    """
    (out / "meta.json").unlink(missing_ok=True)
    frames = []
    for k, store in enumerate(stores):
        frame = SampleStore(store, readonly=True).read(status=status)
        frames.append(frame.assign(store_idx=k))
    samples = pd.concat(frames, ignore_index=True).drop_duplicates("sample_id", keep="first")
    if query:
        samples = select_samples(samples, query)
    total = len(samples)
    dropped: Counter[str] = Counter()
    if max_median_over_p10 is not None:  # public tables publish no spread (NaN): never dropped here
        disturbed = samples["iteration_time_ms"] > max_median_over_p10 * samples["time_p10_ms"]
        reason = f"disturbed timing (median over {max_median_over_p10:g}x the fastest decile)"
        dropped[reason] += int(disturbed.sum())
        samples = samples[~disturbed]

    specs = device_specs(stores, sorted(samples["hardware"].unique()))
    known = samples["hardware"].isin(list(specs))
    dropped["unknown hardware"] += int((~known).sum())
    samples = samples[known]

    valid = []
    for row in samples.to_dict("records"):
        try:
            workload_from_row(row)
            valid.append(True)
        except GnnperfError as e:
            log.warning("sample %s has an invalid workload: %s", row["sample_id"], e)
            valid.append(False)
    dropped["invalid workload"] += len(valid) - sum(valid)
    samples = samples[np.asarray(valid, dtype=bool)] if len(samples) else samples
    # an hf model timed with sdpa attention: its graph holds eager attention (what the network learns; a prediction
    # composes sdpa's time, gnnperf.predictor.fused_attention), so its label would teach eager ops a fused time
    sdpa = samples["model_ref"].isin([ref for ref in samples["model_ref"].unique() if _runs_sdpa(ref)])
    dropped[SDPA_DROPPED] += int(sdpa.sum())
    samples = samples[~sdpa]

    # Graphs are written as they are loaded (one gzip member each) so the OpGraphs are never all in memory.
    graph_of: dict[tuple[str, str], int] = {}
    digests: list[str] = []
    offsets, graph_json_bytes = [0], 0
    keys = samples.groupby(["model_ref", "input_shape"], sort=True)["store_idx"].first()
    caches = [graph_cache or GraphCache(store / "graphs") for store in stores]
    for cache in caches:  # a cache shared with an earlier dataset holds that one's files too
        cache.used.clear()
    with open(out / GRAPHS_FILE, "wb") as f:
        for (ref, shape), store_idx in keys.items():
            cache = caches[store_idx]
            try:
                shape_tuple = tuple(int(d) for d in shape.split(","))
                graph = build_graph(ref, shape_tuple, cache=cache, cached_only=not build_graphs)
            except Exception as e:  # exporters fail in many ways; one bad model must not stop the dataset
                # without building, a miss is expected (counted below); a failed export is worth a warning
                (log.debug if not build_graphs else log.warning)(
                    "graph of %s at %s not built: %s: %s", ref, shape, type(e).__name__, e
                )
                continue
            line = json.dumps(graph.to_dict(), separators=(",", ":")).encode() + b"\n"
            graph_json_bytes += len(line)
            offsets.append(offsets[-1] + f.write(gzip.compress(line, compresslevel=3)))
            graph_of[(ref, shape)] = len(graph_of)
            digests.append(graph.structure_digest())
    graph_idx = np.asarray([graph_of.get(k, -1) for k in zip(samples["model_ref"], samples["input_shape"])])
    # the network without names: splits keep references that export the same one (aliases) in one part
    samples = samples.assign(
        graph_idx=graph_idx.astype(np.int64),
        graph_digest=[digests[i] if i >= 0 else "" for i in graph_idx],
    )
    missing = "graph not built" if build_graphs else "graph not in the cache"
    dropped[missing] += int((samples["graph_idx"] < 0).sum())
    samples = samples[samples["graph_idx"] >= 0]

    dropped = +dropped  # keep only positive counts
    if dropped:
        reasons = ", ".join(f"{n} {why}" for why, n in sorted(dropped.items()))
        warnings.warn(
            f"PerfDataset dropped {sum(dropped.values())} of {total} samples ({reasons})",
            GnnperfWarning,
            stacklevel=3,
        )
    if samples.empty:
        raise GnnperfError(f"no usable {status} samples in {', '.join(map(str, stores))}")

    devices = sorted(samples["hardware"].unique())
    samples = samples.assign(hw_id=samples["hardware"].map({d: i for i, d in enumerate(devices)}))
    samples = samples.drop(columns="store_idx").sort_values("sample_id").reset_index(drop=True)
    samples.to_parquet(out / "samples.parquet", index=False)
    device_rows = [{"device": d, "spec": spec_to_dict(specs[d])} for d in devices]
    (out / "devices.json").write_text(json.dumps(device_rows, indent=1))
    meta = {
        "feature_version": FEATURE_VERSION,
        "fingerprint": fingerprint,
        "stores": [str(s) for s in stores],
        "status": status,
        "samples": len(samples),
        "graphs": len(graph_of),
        "dropped": dict(dropped),
        "graph_json_bytes": graph_json_bytes,
        "graph_offsets": offsets,
        # a graph rebuilt in the cache later (another library version, an edited model file) makes this stale
        "graph_files": {str(p): file_signature(p) for p in sorted(set().union(*(c.used for c in caches)))},
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1))


# What a sample's features say about its measurement besides the network: rows equal in all of these (and in the
# graph) are one input to the model, whatever else their ``software`` says.
SAME_INPUT = (
    "graph_digest", "input_shape", "batch_size", "mode", "precision", "optimizer", "timed", "memory_format",
    "num_devices", "hardware",
)  # fmt: skip


def mixed_software(samples: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``samples`` that share graph, workload and device (``SAME_INPUT``) with a row of other software.

    No feature holds the software (the torch version, compiled or eager, another harness of the same table), so
    such rows are one input with several labels: pooling them teaches the model their spread as noise.
    """
    if samples.empty:
        return samples
    counts = samples.groupby(list(SAME_INPUT), sort=False)["software"].transform("nunique")
    return samples[counts.to_numpy() > 1]


def check_software(samples: pd.DataFrame, pool: bool) -> None:
    """Refuse (``pool=False``) or log (``pool=True``) kept samples that differ only in their software.

    Raises:
        GnnperfError: one line naming the devices and software strings involved and the two ways out.
    """
    mixed = mixed_software(samples)
    if mixed.empty:
        return
    per_device = mixed.groupby("hardware")["software"].agg(lambda s: sorted(set(s)))
    where = "; ".join(f"{hw}: {', '.join(map(repr, sw))}" for hw, sw in per_device.items())
    what = f"{len(mixed)} of {len(samples)} samples share graph, workload and device with rows of other software ({where})"
    if pool:
        log.warning("%s: pooled as data.pool_software asks", what)
        return
    raise GnnperfError(
        f"{what}, which no feature tells apart: keep one software per device in data.query, or set "
        "data.pool_software=true to pool them on purpose"
    )


def _runs_sdpa(ref: str) -> bool:
    """Whether ``ref`` is an hf model that runs sdpa attention (one that cannot be resolved is counted where its
    graph is not built)."""
    try:
        spec = resolve_hf(ref)
    except GnnperfError:
        return False
    return spec is not None and spec.attention == "sdpa"


def file_signature(path: Path) -> list[int] | None:
    """(size, modification time in ns) of a file, None when it is gone."""
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def device_specs(stores: Sequence[Path], names: list[str]) -> dict[str, HardwareSpec]:
    """Specs by device name: the stores' probe records first, then the packaged table."""
    from gnnperf.hardware.probe import identity_differences, speed_differences

    records: dict[str, HardwareSpec] = {}
    where: dict[str, Path] = {}
    for store in stores:
        for path in sorted((store / "hardware").glob("*.json")):
            try:
                spec = spec_from_dict(json.loads(path.read_text()))
            except (OSError, ValueError, GnnperfError) as e:
                log.warning("ignoring unreadable hardware record %s: %s", path, e)
                continue
            known = records.get(spec.name)
            differ = identity_differences(known, spec) + speed_differences(known, spec) if known else []
            if differ and spec.name in names:  # two machines' rows would be one device
                raise GnnperfError(
                    f"{where[spec.name]} and {path} describe different machines under one name "
                    f"{spec.name} ({'; '.join(differ)}): leave one store out"
                )
            records.setdefault(spec.name, spec)
            where.setdefault(spec.name, path)
    load_table()  # a broken packaged table is that error, not "unknown hardware" for every device
    specs = {}
    for name in names:
        if name in records:
            specs[name] = records[name]
            continue
        try:
            specs[name] = get_spec(name)
        except GnnperfError:
            log.warning("hardware %r is neither in a store's hardware/ records nor in the table", name)
    return specs


class GraphFile(Sequence[OpGraph]):
    """The processed dataset's graphs, read one at a time from :data:`GRAPHS_FILE` when asked for.

    Held as Python objects, the graphs of every public table (1.6k graphs, a million ops) took 3 GB and half a
    minute to parse; the dataset needs a graph only to compute the features of a (graph, batch size) it has not
    cached, so it keeps byte offsets instead and parses that one graph. The last graph read is kept: a caller
    going through one graph's batch sizes in a row parses it once.

    Another job on the same dataset root with other data settings reprocesses it and rewrites the file; the
    offsets would then point into other graphs, so a read of a rewritten file is refused.
    """

    def __init__(self, path: Path, offsets: Sequence[int]) -> None:
        self.path, self.offsets = Path(path), [int(o) for o in offsets]
        self._last: tuple[int, OpGraph] | None = None
        self._stamp = _file_stamp(os.stat(self.path))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, k: int) -> OpGraph:  # type: ignore[override]
        if not -len(self) <= k < len(self):
            raise IndexError(f"graph {k} of {len(self)}")
        k %= len(self)
        if self._last is None or self._last[0] != k:
            with open(self.path, "rb") as f:  # opened per read: safe in forked DataLoader workers
                if _file_stamp(os.fstat(f.fileno())) != self._stamp:
                    raise GnnperfError(
                        f"{self.path} was rewritten while in use (another job processed this dataset root with "
                        "other data settings): give each job its own data.root"
                    )
                f.seek(self.offsets[k])
                blob = f.read(self.offsets[k + 1] - self.offsets[k])
            self._last = (k, OpGraph.from_dict(json.loads(gzip.decompress(blob))))
        return self._last[1]


def _file_stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns
