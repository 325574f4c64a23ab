"""Graphs built ahead of the dataset, in worker processes, into a cache the dataset then only reads."""

from __future__ import annotations

import json

import pytest

from gnnperf.cli import main
from gnnperf.data.dataset import PerfDataset
from gnnperf.data.prebuild import graph_keys, iter_prebuild, prebuild_graphs
from tests.data.prebuild_jobs import KILLED, fake_build
from tests.data.test_dataset import BROKEN, DEVICES, REFS, _row, _write_store


def _store(tmp_path):
    rows = [_row(ref, b, DEVICES[0], 1.0 + b + i) for i, ref in enumerate(REFS[:2]) for b in (2, 4)]
    rows.append(_row(BROKEN, 2, DEVICES[0], 3.0))
    rows.append(_row(REFS[2], 2, DEVICES[0], 2.0, mode="infer", timed="fwd", optimizer="none"))
    _write_store(tmp_path / "store", rows)
    return tmp_path / "store"


def test_keys_are_distinct_graphs_after_the_query(tmp_path):
    store = _store(tmp_path)
    keys = graph_keys([store])
    assert len(keys) == 4 and keys == sorted(keys)
    assert len(graph_keys([store], "mode == 'infer'")) == 1


def test_prebuilt_cache_serves_a_dataset_that_does_not_build(tmp_path):
    store = _store(tmp_path)
    rows = prebuild_graphs(graph_keys([store], "mode == 'train'"), tmp_path / "graphs", workers=2)
    by_ref = {r["model_ref"]: r for r in rows}
    assert not by_ref[BROKEN]["ok"] and by_ref[BROKEN]["reason"]
    assert sum(r["ok"] for r in rows) == 2
    ds = PerfDataset(tmp_path / "root", [store], graph_cache=tmp_path / "graphs", build_graphs=False)
    assert len(ds) == 4 and ds.meta["dropped"] == {"graph not in the cache": 2}  # broken + infer
    prebuild_graphs(graph_keys([store], "mode == 'infer'"), tmp_path / "graphs")
    ds = PerfDataset(tmp_path / "root", [store], graph_cache=tmp_path / "graphs", build_graphs=False)
    assert len(ds) == 5  # the cache gained a graph: reprocessed


def test_cli_reports_failures_and_exits_1(tmp_path, capsys):
    store = _store(tmp_path)
    rc = main(["data", "graphs", str(store), "--cache", str(tmp_path / "g"), "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rc == 1 and len(rows) == 4 and [r["model_ref"] for r in rows if not r["ok"]] == [BROKEN]
    rc = main(["data", "graphs", str(store), "--cache", str(tmp_path / "g"), "--query", "mode == 'infer'"])
    assert rc == 0 and "graphs: 1 of 1" in capsys.readouterr().out
    (tmp_path / "a_file").write_text("not a cache")
    assert main(["data", "graphs", str(store), "--cache", str(tmp_path / "a_file")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gnnperf data: error: graph cache {tmp_path / 'a_file'} is a file, not a directory"]
    for bad in (["--workers", "-1"], ["--limit-s", "0"]):  # -1 ran in-process, 0 meant no limit
        assert main(["data", "graphs", str(store), "--cache", str(tmp_path / "g"), *bad]) == 2
        assert capsys.readouterr().err.strip().startswith(f"gnnperf data: error: {' '.join(bad)}:")
    assert main(["data", "import", "timm-benchmark", ""]) == 2  # Path("") would be the current directory
    assert "no path given" in capsys.readouterr().err


@pytest.mark.parametrize("workers", [1, 2])
def test_a_killed_worker_fails_its_own_model_and_the_rest_are_built(tmp_path, workers):
    keys = (
        [(f"zoo:m{i}", "3,8,8") for i in range(3)]
        + [(KILLED, "3,8,8")]
        + [(f"zoo:n{i}", "3,8,8") for i in range(3)]
    )
    rows = list(iter_prebuild(keys, tmp_path / "g", workers=workers, build=fake_build))
    assert sorted(r["model_ref"] for r in rows) == sorted(k[0] for k in keys)  # each model once
    failed = [r for r in rows if not r["ok"]]
    assert [r["model_ref"] for r in failed] == [KILLED] and "worker process died" in failed[0]["reason"]


def test_more_models_than_one_pool_takes_are_all_built_once(tmp_path, monkeypatch):
    # pools are recycled every TASKS_PER_WORKER models per worker; a pool that retired workers itself
    # (max_tasks_per_child) could hang with work queued (CPython gh-115634), so this runs under a deadline
    import threading

    import gnnperf.data.prebuild as prebuild

    monkeypatch.setattr(prebuild, "TASKS_PER_WORKER", 2)
    keys = [(f"zoo:m{i}", "3,8,8") for i in range(9)]
    rows: list = []
    worker = threading.Thread(
        target=lambda: rows.extend(iter_prebuild(keys, tmp_path / "g", workers=2, build=fake_build)),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=300)
    assert not worker.is_alive(), "prebuild hung"
    assert sorted(r["model_ref"] for r in rows) == sorted(k for k, _ in keys) and all(r["ok"] for r in rows)
