"""The sample schema and the Parquet sample store."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest

from gnnperf.data.schema import IDENTITY_FIELDS, SCHEMA, make_sample, sample_from_measurement, sample_id
from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError
from gnnperf.measure.workload import Workload

IDENT = {
    "model_ref": "timm:resnet18",
    "family": "resnet",
    "input_shape": "3,224,224",
    "batch_size": 32,
    "mode": "train",
    "precision": "fp32",
    "optimizer": "sgd",
    "timed": "fwd+bwd+opt",
    "memory_format": "contiguous",
    "num_devices": 1,
    "hardware": "nvidia-a100-sxm4-40gb",
    "software": "torch=2.14.1",
}
TIMES = {"iteration_time_ms": 12.5, "time_p10_ms": 12.0, "time_p90_ms": 13.0, "time_cv": 0.02, "n_iters": 40}


def ok_row(**changes) -> dict:
    return {**IDENT, **TIMES, "status": "ok", **changes}


def error_row(status: str = "error", **changes) -> dict:
    return {**IDENT, "status": status, "error": f"{status} happened", **changes}


def test_sample_id_is_stable_and_canonical() -> None:
    # A fixed value: changing the recipe would orphan every stored sample (resume and merge rely on it).
    assert sample_id(IDENT) == "a91237912bfe222d"
    same = {**IDENT, "input_shape": (3, 224, 224), "batch_size": 32.0, "num_devices": "1"}
    assert sample_id(same) == sample_id(dict(reversed(list(IDENT.items()))))
    assert sample_id(same) == sample_id(IDENT)
    assert sample_id({**IDENT, **TIMES, "status": "ok", "created_at": "x"}) == sample_id(IDENT)


@pytest.mark.parametrize("field", IDENTITY_FIELDS)
def test_sample_id_changes_with_each_identity_field(field: str) -> None:
    changed = {"input_shape": "3,32,32", "batch_size": 64, "num_devices": 2, "mode": "infer", "timed": "fwd"}
    assert sample_id({**IDENT, field: changed.get(field, "other")}) != sample_id(IDENT)


def test_make_sample_fills_and_validates() -> None:
    row = make_sample(**ok_row())
    assert row["sample_id"] == sample_id(IDENT) and row["source"] == "gnnperf"
    assert row["created_at"].endswith("+00:00") and row["peak_memory_mb"] is None
    assert list(row) == SCHEMA.names
    with pytest.raises(GnnperfError, match="precision"):
        make_sample(**ok_row(precision="fp8"))
    with pytest.raises(GnnperfError, match="missing identity"):
        make_sample(**{k: v for k, v in ok_row().items() if k != "hardware"})
    with pytest.raises(GnnperfError, match="iteration_time_ms"):
        make_sample(**ok_row(iteration_time_ms=None))
    with pytest.raises(GnnperfError, match="no error message"):
        make_sample(**ok_row(status="oom"))
    with pytest.raises(GnnperfError, match="unknown sample field"):
        make_sample(**ok_row(colour="red"))
    with pytest.raises(GnnperfError, match="does not match"):
        make_sample(**ok_row(sample_id="0" * 16))
    with pytest.raises(GnnperfError, match="batch_size .* below 2\\*\\*63"):  # int64 in the store
        make_sample(**ok_row(batch_size=2**63))


def test_sample_from_measurement() -> None:
    workload = Workload(batch_size=4, input_shape=(3, 32, 32), precision="amp_bf16", timed="fwd+bwd")
    result = {**TIMES, "peak_memory_mb": None, "status": "ok", "error": None}
    row = sample_from_measurement("timm:resnet18", "resnet", workload, "cpu-x", "torch=2", result)
    assert (row["timed"], row["optimizer"], row["input_shape"]) == ("fwd+bwd", "none", "3,32,32")
    with pytest.raises(GnnperfError, match="default input shape"):
        sample_from_measurement("timm:resnet18", "resnet", Workload(batch_size=4), "cpu-x", "torch=2", result)


def test_round_trip(tmp_path) -> None:
    store = SampleStore(tmp_path / "store")
    path = store.write_shard([ok_row(), error_row(batch_size=64), ok_row(batch_size=8, peak_memory_mb=512.0)])
    assert path.name.startswith("shard-") and path.suffix == ".parquet"
    assert pq.read_schema(path).names == SCHEMA.names
    df = store.read()
    assert list(df.columns) == SCHEMA.names and len(df) == 3
    first = df[df["batch_size"] == 32].iloc[0]
    assert first["iteration_time_ms"] == 12.5 and first["sample_id"] == sample_id(IDENT)
    assert df[df["batch_size"] == 8].iloc[0]["peak_memory_mb"] == 512.0
    assert set(store.read(status="ok")["batch_size"]) == {8, 32}
    assert store.existing_ids() == set(df["sample_id"])
    assert len(store.existing_ids(status=("oom", "error"))) == 1


def test_libraries_are_kept_outside_the_identity_and_older_shards_read_them_as_null(tmp_path) -> None:
    row = make_sample(**ok_row(libraries="timm=1.0.31;torchvision=0.29.1"))
    assert row["sample_id"] == sample_id(IDENT) and row["libraries"] == "timm=1.0.31;torchvision=0.29.1"
    store = SampleStore(tmp_path)
    old = store.write_shard([ok_row(batch_size=8)])
    pq.write_table(pq.read_table(old).drop_columns(["libraries"]), old)  # a shard written before the field
    store.write_shard([row])
    df = store.read().set_index("batch_size")
    assert df.loc[32, "libraries"] == row["libraries"] and pd.isna(df.loc[8, "libraries"])


def test_empty_store_reads_empty_frame_with_columns(tmp_path) -> None:
    df = SampleStore(tmp_path).read()
    assert df.empty and list(df.columns) == SCHEMA.names


def test_dedup_keeps_first_ok_else_latest(tmp_path) -> None:
    store = SampleStore(tmp_path)
    store.write_shard([error_row(created_at="2025-01-01T00:00:00+00:00")])
    store.write_shard([error_row("oom", created_at="2025-01-02T00:00:00+00:00")])
    assert store.read().iloc[0]["status"] == "oom"  # the latest failure
    store.write_shard([ok_row(created_at="2025-01-03T00:00:00+00:00")])
    store.write_shard([ok_row(iteration_time_ms=99.0, created_at="2025-01-04T00:00:00+00:00")])
    store.write_shard([error_row(created_at="2025-01-05T00:00:00+00:00")])
    df = store.read()
    assert len(df) == 1 and df.iloc[0]["iteration_time_ms"] == 12.5  # the first ok row wins
    assert len(store.read(dedup=False)) == 5


def test_corrupt_shard_is_skipped_with_warning(tmp_path) -> None:
    store = SampleStore(tmp_path)
    good = store.write_shard([ok_row()])
    bad = tmp_path / "shard-00000000T000000000000Z-1-deadbeef.parquet"
    bad.write_bytes(b"this is not parquet at all")
    truncated = tmp_path / "shard-00000000T000000000001Z-1-deadbeef.parquet"
    truncated.write_bytes(good.read_bytes()[:-20])
    with pytest.warns(UserWarning, match="unreadable sample shard") as record:
        df = store.read()
    messages = " ".join(str(w.message) for w in record)
    assert bad.name in messages and truncated.name in messages and good.name not in messages
    assert len(df) == 1


def test_a_shard_whose_columns_do_not_fit_is_skipped_and_kept(tmp_path) -> None:
    store = SampleStore(tmp_path)
    good = store.write_shard([ok_row()])
    typed = pq.read_table(good).to_pandas().assign(iteration_time_ms="abc", sample_id="other")
    bad = tmp_path / "shard-00000000T000000000000Z-1-deadbeef.parquet"
    typed.to_parquet(bad)  # a string where a time belongs
    foreign = tmp_path / "shard-00000000T000000000001Z-1-deadbeef.parquet"
    pd.DataFrame({"x": [1]}).to_parquet(foreign)  # not a sample shard at all
    with pytest.warns(UserWarning, match="unreadable sample shard") as record:
        assert list(store.read()["sample_id"]) == [sample_id(IDENT)]
        assert store.existing_ids() == {sample_id(IDENT)}  # what a read returns: "other" is not stored
    messages = " ".join(str(w.message) for w in record)
    assert bad.name in messages and foreign.name in messages and "not a sample shard" in messages
    with pytest.warns(UserWarning):
        store.compact()
    assert bad.exists() and foreign.exists()  # left for the user, not deleted with the merged shards


def test_cli_prints_a_skipped_shard_as_one_warning_line(tmp_path) -> None:
    store = SampleStore(tmp_path)
    store.write_shard([ok_row()])
    (tmp_path / "shard-00000000T000000000000Z-1-deadbeef.parquet").write_bytes(b"not parquet")
    code = f"from gnnperf.cli import main; raise SystemExit(main(['data', 'summary', {str(tmp_path)!r}]))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "shard" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: skipping unreadable sample shard"), done.stderr
    assert "UserWarning" not in done.stderr


def test_leftover_tmp_is_ignored_and_cleaned_up(tmp_path) -> None:
    store = SampleStore(tmp_path)
    store.write_shard([ok_row()])
    tmp = tmp_path / "shard-20250101T000000000000Z-1-abcdef12.parquet.tmp"
    tmp.write_bytes(b"half a shard from a killed writer")
    assert len(store.read()) == 1
    os.utime(tmp, (0, 0))  # old enough to belong to a dead writer
    store.compact()
    assert not tmp.exists()


def test_merge_is_idempotent(tmp_path) -> None:
    a, b, c = SampleStore(tmp_path / "a"), SampleStore(tmp_path / "b"), SampleStore(tmp_path / "c")
    a.write_shard([ok_row(), error_row(batch_size=64)])
    b.write_shard([ok_row(batch_size=8), error_row(batch_size=64, status="oom")])
    assert c.merge([tmp_path / "a", tmp_path / "b"]) == 4
    before = c.read()
    assert c.merge([tmp_path / "a", tmp_path / "b"]) == 0
    assert a.merge([tmp_path / "b"]) == 2 and a.merge([tmp_path / "b"]) == 0
    assert c.read().equals(before)
    assert set(a.read()["sample_id"]) == set(c.read()["sample_id"])
    assert len(before) == 3


def test_compact_combines_shards(tmp_path) -> None:
    store = SampleStore(tmp_path)
    for batch in (1, 2, 4):
        store.write_shard([ok_row(batch_size=batch)])
    store.write_shard([ok_row(batch_size=4, iteration_time_ms=50.0)])
    before = store.read()
    new = store.compact()
    assert store.shards() == [new]
    assert store.read().equals(before)
    assert store.compact() is not None and len(store.read()) == 3


def test_unwritable_root_raises_and_touches_nothing(tmp_path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    with pytest.raises(GnnperfError, match="not writable"):
        SampleStore(afile / "sub")
    assert afile.read_text() == "keep me"
    with pytest.raises(GnnperfError, match="does not exist"):
        SampleStore(tmp_path / "missing", readonly=True)


def test_readonly_store_refuses_writes(tmp_path) -> None:
    SampleStore(tmp_path).write_shard([ok_row()])
    ro = SampleStore(tmp_path, readonly=True)
    assert len(ro.read()) == 1
    with pytest.raises(GnnperfError, match="read-only"):
        ro.write_shard([ok_row(batch_size=2)])
