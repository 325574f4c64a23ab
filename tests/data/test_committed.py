"""The committed measurement stores (`datasets/`): every row reads back valid, and every device has its record."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnnperf.data.processing import device_specs
from gnnperf.data.schema import make_sample
from gnnperf.data.store import SampleStore

DATASETS = Path(__file__).resolve().parents[2] / "datasets"
STORES = sorted({p.parent.name for p in DATASETS.glob("*/shard-*.parquet")})
MEASURED_TWICE = {"cpu_m167": 39}  # steps its two parts both timed (data card); the store reads the first


def test_every_committed_store_is_tested_and_in_the_shipped_predictors_data():
    from omegaconf import OmegaConf

    assert set(STORES) >= {"cpu", "cpu_m167", "cpu_optimizers", "h200"}
    shipped = OmegaConf.load(DATASETS.parent / "conf" / "data" / "all.yaml").stores
    assert {f"datasets/{name}" for name in STORES} <= set(shipped)


@pytest.mark.parametrize("name", STORES)
def test_committed_store_is_valid_and_described(name):
    store = DATASETS / name
    df = SampleStore(store).read(dedup=False)
    assert len(df) and df.sample_id.duplicated().sum() == MEASURED_TWICE.get(name, 0)
    assert set(df.status) == {"ok"} and (df.iteration_time_ms > 0).all()
    for row in df.head(50).to_dict("records"):  # the schema's own validation
        make_sample(**row)
    names = sorted(set(df.hardware))
    specs = device_specs([store], names)
    assert sorted(specs) == names
    assert all(
        (store / "hardware" / f"{n}.json").exists() for n in names
    )  # the probe's record, not the table
    assert f"## `{name}/`" in (DATASETS / "README.md").read_text()  # the data card has its section


def test_h200_timm_rows_match_their_zoo_config():
    from hydra import compose, initialize_config_dir

    from gnnperf.apps import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        zoo = compose(config_name="generate", overrides=["zoo=timm_rtx3090_train"]).zoo
    batch_of = {m.ref: list(m.batch_sizes) for m in zoo.models}
    df = SampleStore(DATASETS / "h200").read()
    timm = df[df.model_ref.str.startswith("timm:")]
    assert len(timm) == 27
    assert all(b in batch_of[r] for r, b in zip(timm.model_ref, timm.batch_size, strict=True))
    assert set(timm.precision) == {"amp_fp16"} and set(timm.timed) == {"fwd+bwd+opt"}


def test_paired_optimizer_store_times_every_optimizer_on_each_step():
    df = SampleStore(DATASETS / "cpu_optimizers").read()
    steps = df.groupby(["model_ref", "batch_size", "precision", "hardware", "software"])
    assert len(steps) == 45  # 13 families x 3 configurations, 6 named models
    assert all(sorted(g.optimizer) == ["adam", "adamw", "none", "sgd"] for _, g in steps)
    assert set(df[df.optimizer == "none"].timed) == {"fwd+bwd"}
    assert set(df[df.optimizer != "none"].timed) == {"fwd+bwd+opt"}


@pytest.mark.parametrize(
    "path, says", [("empty", "holds no samples"), ("file.txt", "is a file"), ("missing", "does not exist")]
)
def test_summary_of_what_is_not_a_store_is_one_error_line(tmp_path, capsys, path, says):
    from gnnperf.cli import main

    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("not a store")
    assert main(["data", "summary", str(tmp_path / path), "--json"]) == 2
    captured = capsys.readouterr()
    assert says in captured.err and len(captured.err.strip().splitlines()) == 1 and captured.out == ""


def test_summary_of_a_store_without_an_ok_sample_is_valid_json(tmp_path, capsys):
    import json

    from gnnperf.cli import main

    row = SampleStore(DATASETS / "h200", readonly=True).read().iloc[0].to_dict()
    results = ("iteration_time_ms", "time_p10_ms", "time_p90_ms", "time_cv", "n_iters", "peak_memory_mb")
    row.update(dict.fromkeys(results), status="oom", error="CUDA out of memory", sample_id=None)
    SampleStore(tmp_path / "failed").write_shard([make_sample(**row)])
    assert main(["data", "summary", str(tmp_path / "failed"), "--json"]) == 0
    # strict JSON: null, not NaN, for the statistics of no rows (Python's json would read NaN)
    s = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert s["status"] == {"oom": 1} and s["iteration_time_ms_range"] == [None, None]
    assert s["time_cv_per_hardware_median"] == {} and set(s["time_cv_quantiles"].values()) == {None}
    assert main(["data", "summary", str(tmp_path / "failed")]) == 0
    assert "no sample of this store has status ok" in capsys.readouterr().out


def test_summary_of_the_cpu_store(capsys):
    import json

    from gnnperf.cli import main
    from gnnperf.data.cli import _family_hardware_table

    assert main(["data", "summary", str(DATASETS / "cpu"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    df = SampleStore(DATASETS / "cpu", readonly=True).read()
    assert s["samples"] == len(df) and s["models"] == df.model_ref.nunique()
    assert s["hardware"] == df.hardware.value_counts().to_dict()
    assert sum(sum(row.values()) for row in s["per_family_hardware"].values()) == len(df)
    assert main(["data", "summary", str(DATASETS / "cpu")]) == 0
    text = capsys.readouterr().out
    assert "cpu-intel-xeon-1t" in text and "time CV p10" in text  # device names whole, not cut
    # more devices than families: the devices go down the rows, so each name stays whole
    table = _family_hardware_table(
        {"bert": {"a100-pcie-40gb": 2, "a100-sxm4-40gb": 1}}, ["a100-pcie-40gb", "a100-sxm4-40gb"]
    )
    assert table.columns[0].header == "hardware" and table.row_count == 2
