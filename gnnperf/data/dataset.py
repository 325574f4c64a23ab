"""The PyG dataset of measured samples: one op graph per (model, input shape), specialised per batch size.

``process()`` (:func:`gnnperf.data.processing.process_samples`) reads the stores' samples, builds each distinct
(model_ref, input_shape) graph once and writes to ``<root>/processed/``: ``graphs.jsonl.gz`` (the OpGraphs, read
one at a time when needed: :class:`~gnnperf.data.processing.GraphFile`),
``samples.parquet`` (the sample table with ``graph_idx``, ``graph_digest`` and ``hw_id``), ``devices.json`` (device names and
their specs) and, last, ``meta.json`` (the feature version, a fingerprint of the stores' shards, the graphs'
byte offsets and the graph cache files they came from). A ``meta.json`` from another ``FEATURE_VERSION``,
hardware table or set of shards, or one whose cache files were rewritten since, makes the next construction
reprocess.

``get(i)`` substitutes the sample's batch size into its graph. The substituted tensors are cached per (graph,
batch size), so the same model measured on several devices, and every epoch, shares one copy of them; each
sample gets a shallow copy carrying its own ``u``, ``hw``, ``hw_id``, ``y``, ``agg``, ``batch_size`` and the
strings ``model_ref``, ``family``, ``hardware``, ``sample_id`` (the batch format of issue 4).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from filelock import FileLock
from torch_geometric.data import Data, Dataset

from gnnperf.data.aggregate import aggregate_features
from gnnperf.data.processing import (
    GRAPHS_FILE,
    GraphFile,
    check_software,
    file_signature,
    process_samples,
    workload_from_row,
)
from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError
from gnnperf.graph.build import GraphCache, library_versions
from gnnperf.graph.cost import ablated, graph_costs
from gnnperf.graph.features import FEATURE_VERSION, graph_vector, node_edge_data
from gnnperf.graph.ir import OpGraph
from gnnperf.hardware.table import (
    ENV_VAR,
    HARDWARE_TABLE_VERSION,
    HardwareSpec,
    spec_from_dict,
)
from gnnperf.hardware.vector import hardware_vector
from gnnperf.measure.workload import Workload

log = logging.getLogger(__name__)
PROCESSED_FORMAT = 3  # layout of the processed files; bump when it changes (3: samples' graph_digest)
STAT_KEYS = ("x", "edge_attr", "u", "hw", "agg")


class PerfData(Data):
    """``Data`` whose ``batch_size`` is not offset when batched (PyG offsets every key containing "batch").

    On a collated ``Batch``, read it as ``batch["batch_size"]``: the attribute ``batch.batch_size`` is PyG's
    alias for ``num_graphs``.
    """

    def __inc__(self, key: str, value: Any, *args: Any, **kwargs: Any) -> Any:
        return 0 if key == "batch_size" else super().__inc__(key, value, *args, **kwargs)


@dataclass
class _Entry:
    """Cached tensors of one graph at one batch size; ``extras`` holds (u, agg) per workload."""

    base: PerfData | None = None
    extras: dict[Workload, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)

    def nbytes(self) -> int:
        tensors = [v for _, v in self.base.items() if isinstance(v, torch.Tensor)] if self.base else []
        tensors += [t for pair in self.extras.values() for t in pair]
        return sum(t.numel() * t.element_size() for t in tensors)


class PerfDataset(Dataset):
    """Samples of one or more sample stores as PyG ``Data`` (see the module docstring).

    Args:
        root: directory of the processed files (``<root>/processed``).
        stores: sample store directories; a sample in several stores is taken from the first.
        graph_cache: a :class:`GraphCache` or directory for built graphs; ``None``: ``<store>/graphs``.
        status: sample status to keep (``ok``: rows with a measured time).
        query: a ``pandas.DataFrame.query`` expression over the sample columns selecting the rows to use
            (``"num_devices == 1 and mode == 'train'"``); ``None``: all rows.
        build_graphs: export models whose graph is not in the cache; ``False`` drops their samples instead
            (for large public tables whose graphs were built beforehand, in parallel).
        max_median_over_p10: drop (and count) samples whose median iteration time is over this many times their
            fastest decile: most of their iterations were slowed by something else on the machine, so the
            median is not the model's time. ``None``: keep all. Rows without a spread (public tables) stay.
        pool_software: keep rows that share graph, workload and device with rows of other software (two releases
            of one benchmark table, on purpose); ``False``: such rows are an error, since no feature tells them
            apart (:func:`~gnnperf.data.processing.check_software`). Checked on every load, so it needs no
            reprocessing.
        transform: PyG transform applied by ``__getitem__``.
        cache_size: most (graph, batch size) entries kept in memory (least recently used go); ``None``: all.
        log: print PyG's "Processing..." lines.
        force_reload: reprocess even when the processed files are current.
    """

    def __init__(
        self,
        root: str | Path,
        stores: Sequence[str | Path] | str | Path,
        graph_cache: GraphCache | str | Path | None = None,
        status: str = "ok",
        query: str | None = None,
        build_graphs: bool = True,
        max_median_over_p10: float | None = None,
        pool_software: bool = False,
        transform: Any = None,
        cache_size: int | None = None,
        log: bool = False,
        force_reload: bool = False,
    ) -> None:
        stores = [stores] if isinstance(stores, (str, Path)) else list(stores)
        self.stores = [Path(str(s)).expanduser().resolve() for s in stores]
        if not self.stores:
            raise GnnperfError("PerfDataset needs at least one sample store")
        missing = [str(s) for s in self.stores if not s.is_dir()]
        if missing:
            raise GnnperfError(f"sample store {missing[0]} does not exist")
        self.status = status
        self.query = query or None
        self.build_graphs = build_graphs
        self.max_median_over_p10 = max_median_over_p10
        self.pool_software = pool_software
        self.graph_cache = GraphCache(graph_cache) if isinstance(graph_cache, (str, Path)) else graph_cache
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[int, int], _Entry] = OrderedDict()
        self._fingerprint = self._compute_fingerprint()
        # Jobs started together on one root (a sweep's workers, two trainings) would otherwise all find it stale
        # and write the same files at once; the first processes, the others wait and then load what it wrote.
        Path(root).mkdir(parents=True, exist_ok=True)
        with FileLock(str(Path(root) / "processing.lock")):
            stale = self._is_stale(Path(root) / "processed" / "meta.json")
            super().__init__(str(root), transform=transform, log=log, force_reload=force_reload or stale)
            self._load()

    # -- PyG contract ------------------------------------------------------------------------------------
    @property
    def raw_file_names(self) -> list[str]:
        """The stores' shards as absolute paths (PyG joins them to ``raw_dir``, which keeps them absolute)."""
        return [str(p) for s in self.stores for p in SampleStore(s, readonly=True).shards()]

    @property
    def processed_file_names(self) -> list[str]:
        return [GRAPHS_FILE, "samples.parquet", "devices.json", "meta.json"]  # meta.json written last

    def download(self) -> None:
        raise GnnperfError(f"no sample shards in {', '.join(map(str, self.stores))}")

    def process(self) -> None:
        out, cache = Path(self.processed_dir), self.graph_cache
        process_samples(
            self.stores, out, cache, self.status, self.query, self.build_graphs, self._fingerprint,
            self.max_median_over_p10,
        )  # fmt: skip

    def len(self) -> int:
        return len(self.samples)

    def get(self, idx: int) -> PerfData:
        bs, hw_id = int(self._batch[idx]), int(self._hw_id[idx])
        base, u, agg = self._features(int(self._graph_idx[idx]), self._workloads[idx])
        data = copy.copy(base)  # shallow: the cached tensors are shared, the cached Data is not mutated
        data.u, data.agg = u, agg
        data.hw = self._hw[hw_id : hw_id + 1]
        data.hw_id = torch.tensor([int(self._embedding_id[idx])], dtype=torch.long)
        data.y = torch.tensor([self._y[idx]], dtype=torch.float32)
        data.batch_size = torch.tensor([bs], dtype=torch.long)
        for name, values in self._strings.items():
            setattr(data, name, values[idx])
        return data

    # -- public helpers ------------------------------------------------------------------------------------
    def index_devices(self, devices: Sequence[str]) -> None:
        """Make ``hw_id`` index ``devices`` (a trained model's device list; -1 where absent) instead of ours.

        A checkpoint's learned device embeddings are ordered by the device list of the data it was trained on;
        scoring it on other data must look its devices up by name, and predict the rest from their specs.
        """
        position = {d: i for i, d in enumerate(devices)}
        self._embedding_id = np.array([position.get(d, -1) for d in self.samples["hardware"]], dtype=np.int64)

    def workload(self, idx: int) -> Workload:
        return self._workloads[idx]

    def memory_report(self) -> dict[str, int | dict[str, int]]:
        """Sizes of what the dataset holds: graphs, samples, the graph store on disk and the Data cache."""
        return {
            "graphs": len(self.graphs),
            "samples": len(self.samples),
            "devices": len(self.devices),
            "graph_file_bytes": (Path(self.processed_dir) / GRAPHS_FILE).stat().st_size,
            "graph_json_bytes": int(self.meta["graph_json_bytes"]),
            "data_cache_entries": len(self._cache),
            "data_cache_bytes": sum(e.nbytes() for e in self._cache.values()),
            "dropped": dict(self.meta["dropped"]),
        }

    # -- internals -------------------------------------------------------------------------------------------
    def _compute_fingerprint(self) -> str:
        parts: list[Any] = [
            PROCESSED_FORMAT,
            FEATURE_VERSION,
            HARDWARE_TABLE_VERSION,
            self.status,
            self.query,
            self.build_graphs,
            self.max_median_over_p10,
        ]
        if not self.build_graphs:  # what the cache holds decides which samples stay: a new graph is new data
            roots = [self.graph_cache.root] if self.graph_cache else [s / "graphs" for s in self.stores]
            parts.append([sorted(p.name for p in Path(r).glob("*.json.gz")) for r in roots])
        else:  # graphs cached under other library versions are built again on processing (graph.build)
            parts.append(library_versions())
        parts.append(os.environ.get(ENV_VAR, ""))
        parts.extend(sorted(ablated()))  # cost rules switched off for an ablation: other node features
        for store in self.stores:
            files = SampleStore(store, readonly=True).shards() + sorted((store / "hardware").glob("*.json"))
            parts.append([str(store), [(p.name, p.stat().st_size) for p in files]])
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]

    def _is_stale(self, meta_path: Path) -> bool:
        if not meta_path.exists():
            return False  # nothing processed yet: PyG processes anyway
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            return True
        if meta.get("feature_version") != FEATURE_VERSION:
            log.info("processed dataset has feature version %s, not %s: reprocessing",
                     meta.get("feature_version"), FEATURE_VERSION)  # fmt: skip
            return True
        if meta.get("fingerprint") != self._fingerprint:
            return True
        changed = [p for p, sig in meta.get("graph_files", {}).items() if file_signature(Path(p)) != sig]
        if changed:
            log.info(
                "%d graphs changed in the cache since processing (%s): reprocessing", len(changed), changed[0]
            )
        return bool(changed)

    def _load(self) -> None:
        out = Path(self.processed_dir)
        self.meta: dict[str, Any] = json.loads((out / "meta.json").read_text())
        self.graphs: Sequence[OpGraph] = GraphFile(out / GRAPHS_FILE, self.meta["graph_offsets"])
        self.samples: pd.DataFrame = pd.read_parquet(out / "samples.parquet")
        check_software(self.samples, self.pool_software)
        device_rows = json.loads((out / "devices.json").read_text())
        self.devices: list[str] = [r["device"] for r in device_rows]
        self.hardware_specs: dict[str, HardwareSpec] = {
            r["device"]: spec_from_dict(r["spec"]) for r in device_rows
        }
        vectors = [hardware_vector(self.hardware_specs[d]) for d in self.devices]
        self._hw = torch.from_numpy(np.stack(vectors)).float()
        self._graph_idx = self.samples["graph_idx"].to_numpy(np.int64)
        self._hw_id = self.samples["hw_id"].to_numpy(np.int64)
        self._embedding_id = self._hw_id  # see index_devices
        self._batch = self.samples["batch_size"].to_numpy(np.int64)
        self._y = self.samples["iteration_time_ms"].to_numpy(np.float64)
        self._workloads = [workload_from_row(r) for r in self.samples.to_dict("records")]
        names = ("model_ref", "family", "hardware", "sample_id")
        self._strings = {n: [str(v) for v in self.samples[n]] for n in names}

    def _features(self, graph_idx: int, workload: Workload) -> tuple[PerfData, torch.Tensor, torch.Tensor]:
        """(structure at the batch size, u, agg) from the cache, computed on a miss."""
        key = (graph_idx, workload.batch_size)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = _Entry()
            while self.cache_size is not None and len(self._cache) > max(self.cache_size, 1):
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        if workload not in entry.extras:
            base, u, agg = graph_features(self.graphs[graph_idx], workload)
            entry.extras[workload] = (u, agg)
            if entry.base is None:
                entry.base = base  # x and edge_attr depend on the batch size only, u and agg on the workload
        u, agg = entry.extras[workload]
        return entry.base, u, agg


def batch_features(graph: OpGraph, batch_size: int) -> tuple[list, PerfData]:
    """(per-node costs, graph structure with node and edge features) at ``batch_size``: every workload's at it."""
    costs, _ = graph_costs(graph, batch_size)
    return costs, PerfData.from_dict(node_edge_data(graph, batch_size, costs).to_dict())


def graph_features(
    graph: OpGraph, workload: Workload, at_batch: tuple[list, PerfData] | None = None
) -> tuple[PerfData, torch.Tensor, torch.Tensor]:
    """(graph structure and node/edge features at the workload's batch size, ``u``, ``agg``).

    ``at_batch``: :func:`batch_features` at the workload's batch size, computed once for several workloads.
    """
    costs, base = at_batch or batch_features(graph, workload.batch_size)
    u = torch.tensor([graph_vector(graph, workload, costs)], dtype=torch.float32)
    agg = torch.from_numpy(aggregate_features(graph, workload, costs)).view(1, -1)
    return base, u, agg


def sample_data(
    graph: OpGraph,
    workload: Workload,
    hw: torch.Tensor,
    hw_id: int,
    features: tuple[PerfData, torch.Tensor, torch.Tensor] | None = None,
) -> PerfData:
    """One query in the batch format (no target): what :class:`PerfDataset` yields, for prediction.

    ``features``: :func:`graph_features` of ``graph`` and ``workload`` computed once for several devices (shared,
    not mutated).
    """
    base, u, agg = features or graph_features(graph, workload)
    data = copy.copy(base)  # shallow, as in PerfDataset.get
    data.u, data.agg = u, agg
    data.hw = hw.view(1, -1).float()
    data.hw_id = torch.tensor([hw_id], dtype=torch.long)
    data.batch_size = torch.tensor([workload.batch_size], dtype=torch.long)
    return data
