"""The PyG dataset, aggregate features, feature statistics and the DataModule, on a tiny handmade store."""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from filelock import FileLock

import gnnperf.data.processing as processing_module
from gnnperf.data.aggregate import AGG_FEATURES, aggregate_features
from gnnperf.data.datamodule import PerfDataModule
from gnnperf.data.dataset import PerfDataset, workload_from_row
from gnnperf.data.processing import GRAPHS_FILE, GraphFile
from gnnperf.data.schema import sample_id
from gnnperf.data.split_files import load_split
from gnnperf.data.stats import MIN_SPAN, STD_FLOOR, feature_stats
from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError
from gnnperf.graph.build import GraphCache, build_graph
from gnnperf.graph.features import EDGE_FEATURES, FEATURE_VERSION, GRAPH_FEATURES, NODE_FEATURES
from gnnperf.hardware.table import get_spec, spec_to_dict
from gnnperf.hardware.vector import HARDWARE_FEATURES
from gnnperf.zoo.resolve import resolve

REFS = [
    "zoo:mlp?depth=2&width=32&in_features=16",
    "zoo:mlp?depth=1&width=16&in_features=8",
    "zoo:resnet?depths=1,1&width=8&image_size=32&stem=cifar&num_classes=10",
    "zoo:vgg?depths=1,1&width=8&image_size=32&fc_width=16&num_classes=10",
]
BROKEN = "tests.graph.factories:broken"  # its export fails: the sample is dropped, not the dataset
DEVICES = ["rtx-3090", "a100-sxm4-40gb"]
CPU = "cpu-test-1t"  # not in the packaged table: its record lives in <store>/hardware/
BATCHES = [2, 4]
LOG2_BATCH = [name for name, _ in GRAPH_FEATURES].index("log2_batch")


def _row(ref: str, batch: int, hardware: str, time_ms: float, **changes) -> dict:
    spec = resolve(ref) if ref != BROKEN else None
    row = {
        "model_ref": spec.ref if spec else ref,
        "family": spec.family if spec else "custom",
        "input_shape": ",".join(map(str, spec.input_shape(None))) if spec else "3,8,8",
        "batch_size": batch,
        "mode": "train",
        "precision": "fp32",
        "optimizer": "adam",
        "timed": "fwd+bwd+opt",
        "memory_format": "contiguous",
        "num_devices": 1,
        "hardware": hardware,
        "software": "torch=test",
        "iteration_time_ms": time_ms,
        "status": "ok",
    }
    return {**row, **changes}


def _rows() -> list[dict]:
    rows = []
    for m, ref in enumerate(REFS):
        # the vgg rows come from a "public table": no optimizer step, h2d timed, unknown optimizer/format
        extra = {"timed": "h2d+fwd+bwd", "optimizer": "unknown", "memory_format": "unknown"} if m == 3 else {}
        for b in BATCHES:
            for d, device in enumerate(DEVICES):
                rows.append(_row(ref, b, device, 1.0 + m + b * 0.5 + d * 0.25, **extra))
    rows.append(_row(REFS[0], 2, CPU, 9.5))
    rows.append(_row(BROKEN, 2, DEVICES[0], 3.0))
    return rows


def _write_store(path, rows) -> SampleStore:
    store = SampleStore(path)
    store.write_shard(rows)
    cpu = {**spec_to_dict(get_spec("rtx-3090")), "name": CPU, "kind": "cpu", "vendor": "intel", "threads": 1}
    cpu.update(aliases=[], generation="x86_64+avx2", peak_fp16_tensor_tflops=None, peak_bf16_tflops=None)
    (path / "hardware").mkdir(exist_ok=True)
    (path / "hardware" / f"{CPU}.json").write_text(json.dumps(cpu))
    return store


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(dataset, build_graph calls, warnings, tmp dir); graphs land in a cache shared by this module."""
    tmp = tmp_path_factory.mktemp("perf")
    _write_store(tmp / "store", _rows())
    calls = []
    real = processing_module.build_graph

    def counting(ref, shape, **kw):
        calls.append((ref, shape))
        return real(ref, shape, **kw)

    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mp.setattr(processing_module, "build_graph", counting)
        ds = PerfDataset(tmp / "root", [tmp / "store"], graph_cache=tmp / "graphs")
    return ds, calls, [str(w.message) for w in caught], tmp


def _index(ds: PerfDataset, ref_i: int, batch: int, hardware: str) -> int:
    s = ds.samples
    ref = resolve(REFS[ref_i]).ref
    hit = s.index[(s.model_ref == ref) & (s.batch_size == batch) & (s.hardware == hardware)]
    assert len(hit) == 1
    return int(hit[0])


def test_graphs_are_built_once_per_model_and_bad_graphs_dropped(built) -> None:
    ds, calls, caught, _ = built
    assert sorted(ref for ref, _ in calls) == sorted([resolve(r).ref for r in REFS] + [BROKEN])
    assert len(ds.graphs) == len(REFS)
    assert len(ds) == len(REFS) * len(BATCHES) * len(DEVICES) + 1
    assert any("dropped 1 of" in m and "graph not built" in m for m in caught)
    report = ds.memory_report()
    assert report["graphs"] == len(REFS) and report["samples"] == len(ds)
    assert report["dropped"] == {"graph not built": 1} and report["graph_file_bytes"] > 0
    assert ds.devices == sorted([*DEVICES, CPU])
    assert ds.hardware_specs[CPU].kind == "cpu" and ds.hardware_specs["rtx-3090"].kind == "gpu"


def test_graphs_are_read_one_at_a_time_from_the_processed_file(built) -> None:
    ds, _, _, tmp = built
    assert isinstance(ds.graphs, GraphFile)  # offsets, not a list of parsed OpGraphs
    cache = GraphCache(tmp / "graphs")
    for k in range(len(ds.graphs)):
        row = ds.samples[ds.samples.graph_idx == k].iloc[0]
        shape = tuple(int(d) for d in row.input_shape.split(","))
        built_graph = build_graph(row.model_ref, shape, cache=cache, cached_only=True)
        assert ds.graphs[k].to_dict() == built_graph.to_dict()
        # each sample names its network, which splits group by
        assert set(ds.samples.graph_digest[ds.samples.graph_idx == k]) == {built_graph.structure_digest()}
    assert ds.graphs[-1].to_dict() == ds.graphs[len(ds.graphs) - 1].to_dict()
    with pytest.raises(IndexError):
        ds.graphs[len(ds.graphs)]
    path = tmp / "root" / "processed" / GRAPHS_FILE
    with gzip.open(path, "rt") as f:  # the gzip members read back as one JSON-lines stream
        refs = [json.loads(line)["model_ref"] for line in f]
    assert refs == [ds.graphs[k].model_ref for k in range(len(ds.graphs))]


def test_a_graph_file_rewritten_under_a_reader_is_refused(built, tmp_path) -> None:
    ds, _, _, tmp = built
    path = tmp_path / GRAPHS_FILE
    path.write_bytes((tmp / "root" / "processed" / GRAPHS_FILE).read_bytes())
    graphs = GraphFile(path, ds.meta["graph_offsets"])
    assert graphs[0].model_ref == ds.graphs[0].model_ref
    path.write_bytes(path.read_bytes() + b"more")  # another job's processing rewrote it
    with pytest.raises(GnnperfError, match="rewritten while in use"):
        graphs[1]


def test_processing_waits_for_another_process_on_the_same_root(built) -> None:
    _, _, _, tmp = built
    root = tmp / "locked_root"
    root.mkdir()
    lock = FileLock(str(root / "processing.lock"))
    made: list[PerfDataset] = []
    worker = threading.Thread(
        target=lambda: made.append(PerfDataset(root, [tmp / "store"], graph_cache=tmp / "graphs"))
    )
    with lock:  # another process processing this root
        worker.start()
        worker.join(timeout=2.0)
        assert worker.is_alive() and not made and not (root / "processed" / "meta.json").exists()
    worker.join()
    assert len(made) == 1 and len(made[0]) > 0


def test_fit_loads_the_dataset_once(built, monkeypatch) -> None:
    _, _, _, tmp = built
    loads = []
    real = PerfDataset._load
    monkeypatch.setattr(PerfDataset, "_load", lambda self: loads.append(1) or real(self))
    kw = dict(stores=[tmp / "store"], root=tmp / "root", graph_cache=tmp / "graphs", split="holdout_model")
    dm = PerfDataModule(**kw)
    dm.setup()
    dm.prepare_data()  # Lightning's order inside fit() after our own setup()
    assert len(loads) == 1
    dm = PerfDataModule(**kw)
    dm.prepare_data()
    dm.setup()  # Lightning's own order: setup takes over what prepare_data loaded
    assert len(loads) == 2 and dm.dataset is not None


def test_devices_share_the_cached_tensors(built) -> None:
    ds, *_ = built
    i, j = _index(ds, 2, 4, DEVICES[0]), _index(ds, 2, 4, DEVICES[1])
    a, b = ds[i], ds[j]
    assert a.x.data_ptr() == b.x.data_ptr() and a.edge_index.data_ptr() == b.edge_index.data_ptr()
    assert not torch.equal(a.hw, b.hw) and a.hw_id.item() != b.hw_id.item()
    assert ds.devices[a.hw_id.item()] == a.hardware == DEVICES[0]
    assert a.y.item() != b.y.item()
    cached = ds._cache[(int(ds.samples.graph_idx[i]), 4)].base
    assert "y" not in cached and "hw" not in cached  # the shared Data is never mutated
    assert ds.memory_report()["data_cache_bytes"] > 0


def test_batch_size_is_substituted(built) -> None:
    ds, *_ = built
    small, large = ds[_index(ds, 2, 2, DEVICES[0])], ds[_index(ds, 2, 4, DEVICES[0])]
    assert small.u[0, LOG2_BATCH].item() == pytest.approx(1.0)
    assert large.u[0, LOG2_BATCH].item() == pytest.approx(2.0)
    assert small["batch_size"].tolist() == [2] and large["batch_size"].tolist() == [4]
    assert small.x.shape == large.x.shape and not torch.equal(small.x, large.x)
    assert small.agg[0, AGG_FEATURES.index("log2_batch")].item() == pytest.approx(1.0)


def test_sample_fields_match_the_store(built) -> None:
    ds, *_ = built
    for i in range(len(ds)):
        data, row = ds[i], ds.samples.iloc[i]
        assert data.y.item() == pytest.approx(row.iteration_time_ms)
        assert (data.sample_id, data.model_ref, data.family) == (row.sample_id, row.model_ref, row.family)
        assert data.x.shape[1] == len(NODE_FEATURES) and data.edge_attr.shape[1] == len(EDGE_FEATURES)
        assert data.hw.shape == (1, len(HARDWARE_FEATURES)) and data.agg.shape == (1, len(AGG_FEATURES))


def test_public_table_labels_become_workloads(built) -> None:
    ds, *_ = built
    w = ds.workload(_index(ds, 3, 2, DEVICES[0]))
    assert (w.timed, w.h2d, w.optimizer, w.memory_format) == ("fwd+bwd", True, "none", "contiguous")
    row = _row(REFS[0], 8, DEVICES[0], 1.0, optimizer="unknown")
    assert workload_from_row(row).optimizer == "sgd"  # the optimizer step is timed: the Workload default
    graph = ds.graphs[int(ds.samples.graph_idx[0])]
    agg = aggregate_features(graph, ds.workload(0))
    assert agg.dtype == np.float32 and np.isfinite(agg).all()
    shares = [agg[AGG_FEATURES.index(n)] for n in AGG_FEATURES if n.startswith("node_share=")]
    assert sum(shares) == pytest.approx(1.0)


def test_feature_stats_use_only_the_given_indices(built) -> None:
    ds, _, _, tmp = built
    train = np.arange(0, len(ds), 2)
    stats = feature_stats(ds, train)
    x = torch.cat([ds[int(i)].x for i in train]).double()
    mean, std = stats["x"]
    assert torch.allclose(mean.double(), x.mean(0), atol=1e-4)
    assert torch.allclose(std.double(), x.std(0, unbiased=False).clamp_min(1e-6), atol=1e-4)
    assert all(s.min() >= 1e-6 for _, s in stats.values())
    # Rewrite every non-train sample (new batch size and time): the train-only statistics stay put.
    train_ids = set(ds.samples.sample_id[train])
    rows = _rows()
    changed = [
        r
        if sample_id(r) in train_ids
        else {**r, "batch_size": r["batch_size"] * 16, "iteration_time_ms": 99.0}
        for r in rows
    ]
    _write_store(tmp / "store2", changed)
    with pytest.warns(UserWarning, match="1 graph not built"):
        ds2 = PerfDataset(tmp / "root2", [tmp / "store2"], graph_cache=tmp / "graphs")
    train2 = np.flatnonzero(ds2.samples.sample_id.isin(train_ids).to_numpy())
    assert len(train2) == len(train)
    stats2 = feature_stats(ds2, train2)
    for key in stats:
        assert torch.allclose(stats[key][0], stats2[key][0]) and torch.allclose(stats[key][1], stats2[key][1])
    everything = feature_stats(ds2, np.arange(len(ds2)))
    assert not torch.allclose(everything["u"][0], stats["u"][0])


def test_a_device_column_the_training_devices_barely_span_counts_as_constant(built, monkeypatch) -> None:
    ds, *_ = built
    train = np.arange(len(ds))
    ids = sorted(set(ds._hw_id[train].tolist()))
    hw = ds._hw.clone()
    hw[ids, 0] = hw[ids[0], 0]
    hw[ids[1], 0] += 1.0  # wide: a real difference between the training devices
    hw[ids, 1] = hw[ids[0], 1]
    hw[ids[1], 1] += MIN_SPAN / 2  # narrow: two hosts' 25.33 and 25.32 GB
    monkeypatch.setattr(ds, "_hw", hw)
    _, std = feature_stats(ds, train)["hw"]
    assert float(std[1]) == pytest.approx(STD_FLOOR) and float(std[0]) > 0.1


def test_stale_cache_is_rebuilt(built, monkeypatch) -> None:
    _, _, _, tmp = built
    _write_store(tmp / "small", [_row(REFS[0], b, DEVICES[0], 1.0 + b) for b in BATCHES])
    processed = []
    real = PerfDataset.process
    monkeypatch.setattr(PerfDataset, "process", lambda self: processed.append(1) or real(self))
    make = lambda: PerfDataset(tmp / "small_root", [tmp / "small"], graph_cache=tmp / "graphs")  # noqa: E731
    assert len(make()) == 2 and len(processed) == 1
    make()
    assert len(processed) == 1  # current: loaded, not reprocessed
    meta_path = tmp / "small_root" / "processed" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "feature_version": FEATURE_VERSION - 1}))
    make()
    assert len(processed) == 2 and json.loads(meta_path.read_text())["feature_version"] == FEATURE_VERSION
    SampleStore(tmp / "small").write_shard([_row(REFS[0], 8, DEVICES[0], 5.0)])
    assert len(make()) == 3 and len(processed) == 3  # a new shard is new data
    (used,) = json.loads(meta_path.read_text())["graph_files"]  # the cache file its one graph came from
    assert Path(used).parent == tmp / "graphs"
    os.utime(used, ns=(0, 0))  # rebuilt since (`gnnperf data graphs`, another library version)
    make()
    assert len(processed) == 4
    make()
    assert len(processed) == 4  # and recorded again
    # one GraphCache object for two datasets: each records the files it read, not the other's too
    from gnnperf.graph.build import GraphCache

    shared = GraphCache(tmp / "graphs")
    PerfDataset(tmp / "shared_root_a", [tmp / "store"], graph_cache=shared)
    PerfDataset(tmp / "shared_root_b", [tmp / "small"], graph_cache=shared)
    meta = json.loads((tmp / "shared_root_b" / "processed" / "meta.json").read_text())
    assert list(meta["graph_files"]) == [used]


def test_datamodule_yields_the_batch_format(built) -> None:
    ds, _, _, tmp = built
    split_file = tmp / "split.json"
    kw = dict(stores=[tmp / "store"], root=tmp / "root", split="holdout_model", batch_size=4)
    dm = PerfDataModule(**kw, graph_cache=tmp / "graphs", split_file=split_file)
    dm.prepare_data()
    dm.setup("fit")
    assert split_file.exists()
    assert set(dm.stats) == {"x", "edge_attr", "u", "hw", "agg"}
    batch = next(iter(dm.train_dataloader()))
    n = batch.num_graphs
    assert n == 4 and batch.x.shape[1] == len(NODE_FEATURES) and batch.op.shape == (batch.num_nodes,)
    assert batch.edge_index.shape[0] == 2 and batch.edge_attr.shape == (
        batch.edge_index.shape[1],
        len(EDGE_FEATURES),
    )
    assert batch.u.shape == (n, len(GRAPH_FEATURES)) and batch.hw.shape == (n, len(HARDWARE_FEATURES))
    assert (
        batch.agg.shape == (n, len(AGG_FEATURES)) and batch.y.shape == (n,) and batch.y.dtype == torch.float32
    )
    assert batch.hw_id.dtype == torch.long and batch.hw_id.shape == (n,)
    assert batch["batch_size"].dtype == torch.long and set(batch["batch_size"].tolist()) <= set(BATCHES)
    for name in ("model_ref", "family", "hardware", "sample_id"):
        assert isinstance(getattr(batch, name), list) and len(getattr(batch, name)) == n
    assert int(batch.edge_index.max()) < batch.num_nodes
    assert len(next(iter(dm.predict_dataloader())).sample_id) > 0
    # A second module reads the committed split file and gets the same parts.
    again = PerfDataModule(**kw, graph_cache=tmp / "graphs", split_file=split_file)
    again.setup()
    for part in ("train", "val", "test"):
        assert np.array_equal(again.split[part], dm.split[part])
    # one that asks for another split does not silently test the file's rows under its own name
    other = PerfDataModule(
        **{**kw, "split": "random", "seed": 7}, graph_cache=tmp / "graphs", split_file=split_file
    )
    with pytest.raises(
        GnnperfError, match="saved for another split: split 'holdout_model' \\(this run: 'random'\\)"
    ):
        other.setup()
    assert np.array_equal(load_split(split_file, ds.samples)["test"], dm.split["test"])
    assert math.isfinite(float(dm.stats["agg"][0].sum()))


def test_query_selects_rows_and_is_part_of_the_fingerprint(built) -> None:
    ds, _, _, tmp = built
    query = f"hardware == '{DEVICES[0]}' and timed != 'h2d+fwd+bwd'"
    sub = PerfDataset(tmp / "query_root", [tmp / "store"], graph_cache=tmp / "graphs", query=query)
    expected = ds.samples.query(query)
    assert len(sub) == len(expected) > 0
    assert set(sub.samples["sample_id"]) == set(expected["sample_id"])
    other = PerfDataset(tmp / "query_root", [tmp / "store"], graph_cache=tmp / "graphs")
    assert len(other) == len(ds)  # same root, no query: reprocessed, not the filtered files


def test_an_hf_model_timed_with_sdpa_attention_is_dropped_and_counted(tmp_path) -> None:
    """Its graph holds eager attention: learning a fused kernel's time on those ops would pool two measurements."""
    gpt = "hf:gpt2?class=GPT2LMHeadModel&n_layer=1&n_embd=32&n_head=2&n_positions=64&vocab_size=100"
    rows = [
        _row(f"{gpt}&attn_implementation=eager", 2, DEVICES[0], 5.0, input_shape="16"),  # kept
        _row(gpt, 2, DEVICES[0], 4.0, input_shape="16"),  # transformers' default for GPT-2: sdpa
        _row(f"{gpt}&attn_implementation=sdpa", 4, DEVICES[0], 6.0, input_shape="16"),
    ]
    _write_store(tmp_path / "store", rows)
    ds = PerfDataset(tmp_path / "root", [tmp_path / "store"], graph_cache=tmp_path / "graphs")
    assert list(ds.samples["iteration_time_ms"]) == [5.0]
    assert ds.memory_report()["dropped"] == {processing_module.SDPA_DROPPED: 2}


def test_samples_with_a_disturbed_median_are_dropped_and_counted(tmp_path) -> None:
    spread = {"time_p10_ms": 10.0, "time_p90_ms": 40.0}
    rows = [
        _row(REFS[0], 2, DEVICES[0], 12.0, **spread),  # median near the fastest decile: kept
        _row(REFS[0], 4, DEVICES[0], 30.0, **spread),  # median 3x the fastest decile: most steps slowed
        _row(REFS[0], 2, DEVICES[1], 50.0),  # a public row without a spread: kept
    ]
    _write_store(tmp_path / "store", rows)
    ds = PerfDataset(tmp_path / "root", [tmp_path / "store"], max_median_over_p10=2.0)
    assert sorted(ds.samples["iteration_time_ms"]) == [12.0, 50.0]
    assert ds.memory_report()["dropped"] == {"disturbed timing (median over 2x the fastest decile)": 1}
    assert len(PerfDataset(tmp_path / "root", [tmp_path / "store"])) == 3  # the limit is in the fingerprint


def test_rows_that_differ_only_in_software_are_refused_unless_pooled_on_purpose(tmp_path, caplog) -> None:
    """No feature holds the software: two runs of one workload on one device would be one input with two labels."""
    rows = [
        _row(REFS[0], 2, DEVICES[0], 5.0, software="torch=1.4"),
        _row(REFS[0], 2, DEVICES[0], 7.0, software="torch=unknown"),  # the same workload, another run
        _row(REFS[0], 4, DEVICES[0], 9.0, software="torch=unknown"),  # another batch: nothing to tell apart
        _row(REFS[0], 2, DEVICES[1], 3.0, software="torch=unknown"),  # another device
    ]
    _write_store(tmp_path / "store", rows)
    root, store = tmp_path / "root", [tmp_path / "store"]
    message = (
        "2 of 4 samples share graph, workload and device with rows of other software "
        r"\(rtx-3090: 'torch=1.4', 'torch=unknown'\)"
    )
    with pytest.raises(GnnperfError, match=f"{message}.*data.pool_software=true"):
        PerfDataset(root, store)
    with caplog.at_level(logging.WARNING, logger="gnnperf.data.processing"):
        pooled = PerfDataset(root, store, pool_software=True)  # the same processed files: checked on loading
    assert len(pooled) == 4 and "pooled as data.pool_software asks" in caplog.text
    with pytest.raises(GnnperfError, match=message):
        PerfDataset(root, store)  # loaded, not reprocessed, and still refused
    one_run = PerfDataset(tmp_path / "one", store, query="software == 'torch=unknown'")
    assert sorted(one_run.samples["iteration_time_ms"]) == [3.0, 7.0, 9.0]


def test_a_failed_processing_leaves_no_half_written_root(built) -> None:
    _, _, _, tmp = built
    root, store, cache = tmp / "failed_root", [tmp / "store"], tmp / "graphs"
    first = PerfDataset(root, store, graph_cache=cache)
    with pytest.raises(GnnperfError, match="no usable"):  # reprocesses the same root, and fails
        PerfDataset(root, store, graph_cache=cache, query="hardware == 'no-such-gpu'")
    again = PerfDataset(root, store, graph_cache=cache)  # the first settings: processed afresh, not half-read
    graph = again.graphs[int(again.samples.graph_idx[0])]
    assert len(again) == len(first) and again[0].x.shape[0] == len(graph.nodes)


def test_bad_query_is_a_user_error(built) -> None:
    _, _, _, tmp = built
    with pytest.raises(GnnperfError, match="bad sample query"):
        PerfDataset(tmp / "bad_root", [tmp / "store"], graph_cache=tmp / "graphs", query="no_such_column > 1")


def test_without_building_only_cached_graphs_are_used(built, monkeypatch) -> None:
    ds, _, _, tmp = built
    monkeypatch.setattr(processing_module, "build_graph", _no_export(processing_module.build_graph))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cached = PerfDataset(tmp / "c_root", [tmp / "store"], graph_cache=tmp / "graphs", build_graphs=False)
        empty = tmp / "empty_graphs"
        with pytest.raises(GnnperfError, match="no usable"):
            PerfDataset(tmp / "e_root", [tmp / "store"], graph_cache=empty, build_graphs=False)
    assert len(cached) == len(ds)  # the module's dataset filled the cache
    assert any("graph not in the cache" in str(w.message) for w in caught)


def _no_export(real):
    def guarded(ref, shape, **kw):
        assert kw.get("cached_only"), "the dataset asked for an export"
        return real(ref, shape, **kw)

    return guarded


def test_index_devices_looks_embeddings_up_by_name(built) -> None:
    import copy

    ds = copy.copy(built[0])  # the module's dataset stays as it is
    ds.index_devices([DEVICES[1], "some-other-gpu"])
    for i in range(len(ds)):
        data, hardware = ds[i], ds.samples["hardware"].iloc[i]
        assert int(data.hw_id) == (0 if hardware == DEVICES[1] else -1)
        assert torch.equal(data.hw, built[0][i].hw)  # the spec vector is still the sample's own device


def test_two_stores_with_different_machines_under_one_name_are_refused(tmp_path) -> None:
    from dataclasses import replace

    from gnnperf.apps.generate import save_hardware_record
    from gnnperf.data.processing import device_specs
    from gnnperf.hardware.probe import probe

    spec = probe("cpu", threads=1, measure=False)
    a, b = tmp_path / "a", tmp_path / "b"
    save_hardware_record(a, spec)
    save_hardware_record(b, replace(spec, peak_fp32_tflops=0.2))  # another measurement of the same machine
    assert device_specs([a, b], [spec.name])[spec.name] == spec
    save_hardware_record(tmp_path / "d", replace(spec, peak_fp32_tflops=0.23))  # within 25% of b
    assert device_specs([b, tmp_path / "d"], [spec.name])[spec.name].peak_fp32_tflops == 0.2
    # a faster host under one brand string
    save_hardware_record(tmp_path / "e", replace(spec, peak_fp32_tflops=0.3))
    with pytest.raises(GnnperfError, match="measured peak_fp32_tflops 0.2 vs 0.3"):
        device_specs([b, tmp_path / "e"], [spec.name])
    save_hardware_record(tmp_path / "c", replace(spec, sm_count=spec.sm_count + 2))
    with pytest.raises(GnnperfError, match=f"describe different machines under one name {spec.name}"):
        device_specs([a, tmp_path / "c"], [spec.name])


def test_a_broken_hardware_table_is_its_own_error_not_unknown_devices(monkeypatch) -> None:
    from gnnperf.data import processing

    def broken(*args, **kwargs):
        raise GnnperfError("specs.csv: row 4: more cells than columns (quote commas)")

    monkeypatch.setattr(processing, "load_table", broken)
    with pytest.raises(GnnperfError, match="more cells than columns"):
        processing.device_specs([], ["rtx-3090"])
