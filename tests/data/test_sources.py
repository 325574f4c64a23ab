"""Public-table adapters on the real shared files (read from ../shared/external, never copied in)."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from gnnperf.data.cli import SOURCE_NAMES
from gnnperf.data.schema import IDENTITY_FIELDS, make_sample
from gnnperf.data.sources import SOURCES, get_source, list_sources, read_source, register_source, timm_csv
from gnnperf.data.sources.timm_csv import parse_file_name, torch_version
from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError
from gnnperf.zoo.resolve import resolve

EXTERNAL = (Path(__file__).resolve().parents[2] / "../shared/external").resolve()
TIMM = EXTERNAL / "timm"
TV = EXTERNAL / "ryujaehun-pytorch-gpu-benchmark"
NEUSIGHT = EXTERNAL / "neusight"
TIMM_TRAIN = "benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv"
# timm/SOURCE.md: names of the pt112 train CSV that no longer exist in timm
GONE = (
    "convnext_nano_hnf",
    "convnext_tiny_hnfd",
    "densenet121d",
    "semobilevit_s",
    "regnety_040s_gn",
    "ese_vovnet99b_iabn",
    "resnetv2_50d_evob",
    "gluon_xception65",
    "densenet264",
    "densenet264d_iabn",
)
A100_TRAIN = "dgx-a100/A100-SXM4-40GB_1_gpus__float_model_train_benchmark.csv"

pytestmark = [
    pytest.mark.filterwarnings("ignore"),  # timm's deprecation warnings for aliased names
    pytest.mark.skipif(not EXTERNAL.is_dir(), reason=f"public tables not found at {EXTERNAL}"),
]


@pytest.fixture(scope="module")
def timm_train():
    with pytest.MonkeyPatch.context() as m:
        m.setattr(timm_csv, "CHECK_PARAMS", False)  # 0.2 s per model; its own test reads a few rows
        return read_source("timm-benchmark", TIMM / "head" / TIMM_TRAIN)


@pytest.fixture(scope="module")
def tv_all():
    return read_source("pytorch-gpu-benchmark", TV)


@pytest.fixture(scope="module")
def ns_all():
    return read_source("neusight", NEUSIGHT)


def by_ref(rows: list[dict], ref: str) -> dict:
    hits = [r for r in rows if r["source_ref"] == ref]
    assert len(hits) == 1, ref
    return hits[0]


def test_registry_lists_the_three_adapters_and_rejects_duplicates() -> None:
    assert list_sources() == sorted(SOURCE_NAMES)  # the CLI help names them without importing adapters
    for name in list_sources():
        assert get_source(name).name == name and get_source(name).description
    with pytest.raises(ValueError, match="registered twice"):
        register_source("neusight")(lambda path, limit=None: ([], None))
    assert SOURCES["neusight"].read.__module__.endswith("neusight")
    with pytest.raises(GnnperfError, match="unknown source 'timm'.*timm-benchmark"):
        get_source("timm")


@pytest.mark.parametrize("name", SOURCE_NAMES)
def test_missing_path_is_a_user_error(name: str, tmp_path: Path) -> None:
    with pytest.raises(GnnperfError, match="does not exist"):
        read_source(name, tmp_path / "nope")


def test_timm_train_rows_resolve_and_gone_names_are_reported(timm_train) -> None:
    rows, report = timm_train
    assert len(rows) > 800 and report.samples == len(rows)
    problems = [str(p) for p in report.problems]
    for name in GONE:
        hit = [p for p in problems if f"'{name}'" in p]
        assert len(hit) == 1 and hit[0].startswith(f"head/{TIMM_TRAIN}:"), name
        assert not any(r["model_ref"] == f"timm:{name}" for r in rows)
    assert all(r["model_ref"].startswith("timm:") and r["status"] == "ok" for r in rows)
    assert {(r["mode"], r["precision"], r["optimizer"], r["timed"], r["memory_format"]) for r in rows} == {
        ("train", "amp_fp16", "sgd", "fwd+bwd+opt", "contiguous")
    }
    assert {(r["hardware"], r["software"], r["n_iters"], r["num_devices"]) for r in rows} == {
        ("rtx-3090", "torch=1.12+cu113", 40, 1)
    }


def test_timm_rows_of_another_model_than_timm_builds_are_reported_not_imported(tmp_path: Path) -> None:
    lines = (TIMM / "head" / TIMM_TRAIN).read_text().splitlines()
    keep = ("resnet50", "ig_resnext101_32x8d", "ig_resnext101_32x48d", "ecaresnext50t_32x4d")
    cut = tmp_path / TIMM_TRAIN
    cut.write_text("\n".join([lines[0], *(x for x in lines[1:] if x.split(",")[0] in keep)]) + "\n")
    rows, report = read_source("timm-benchmark", cut)
    problems = [p.reason for p in report.problems]
    assert sorted(r["model_ref"] for r in rows) == ["timm:ig_resnext101_32x8d", "timm:resnet50"], problems
    assert len(problems) == 2
    # timm 1.0 maps all three ig_resnext101 widths to the 32x8d model; ecaresnext50t was redefined since
    assert any(
        "old name 'ig_resnext101_32x48d' to 'resnext101_32x8d" in p and "has 828.41 M" in p for p in problems
    )
    assert any(p.startswith("timm's 'ecaresnext50t_32x4d' is a model of 25.05 M") for p in problems)


def test_timm_tresnet_rows_timed_with_inplace_abn_are_left_out(tmp_path: Path) -> None:
    tables = {
        "head/" + TIMM_TRAIN: "torch 1.12",
        "head/benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv": "torch 2.4",
    }
    for table in tables:
        lines = (TIMM / table).read_text().splitlines()
        kept = [x for x in lines[1:] if x.split(",")[0] in ("resnet50", "tresnet_m")]
        (tmp_path / Path(table).name).write_text("\n".join([lines[0], *kept]) + "\n")
    rows, report = read_source("timm-benchmark", tmp_path)
    tresnet = {r["software"] for r in rows if r["family"] == "tresnet"}
    assert tresnet == {"torch=2.4.0+cu124"}  # the torch 2.x table timed today's BatchNorm + LeakyReLU TResNet
    assert {r["software"] for r in rows if r["model_ref"] == "timm:resnet50"} == {
        "torch=1.12+cu113",
        "torch=2.4.0+cu124",
    }
    (problem,) = report.problems
    assert "InplaceABN" in problem.reason and problem.file.endswith(TIMM_TRAIN)


def test_timm_known_row_matches_the_csv(timm_train) -> None:
    rows, _ = timm_train
    with open(TIMM / "head" / TIMM_TRAIN, newline="") as f:
        table = list(csv.DictReader(f))
    i, want = next((i, r) for i, r in enumerate(table, start=1) if r["model"] == "resnet50")
    got = by_ref(rows, f"head/{TIMM_TRAIN}#row{i}")
    assert got["model_ref"] == "timm:resnet50" and got["family"] == "resnet"
    assert got["batch_size"] == int(want["train_batch_size"]) == 512
    assert got["iteration_time_ms"] == float(want["train_step_time"])
    assert got["input_shape"] == f"3,{want['train_img_size']},{want['train_img_size']}"
    assert got["time_p10_ms"] is None and got["time_cv"] is None  # only a mean is published


def test_timm_file_names_fix_the_protocol() -> None:
    assert (
        torch_version("112") == "1.12" and torch_version("240") == "2.4.0" and torch_version("291") == "2.9.1"
    )
    nhwc = parse_file_name("benchmark-infer-amp-nhwc-pt240-cu124-rtx4090.csv")
    assert (nhwc["memory_format"], nhwc["hardware"], nhwc["timed"], nhwc["optimizer"]) == (
        "channels_last", "rtx-4090", "fwd", "none"
    )  # fmt: skip
    dyn = parse_file_name("benchmark-infer-amp-nchw-pt291-cu128-4090-dynamo.csv")
    assert dyn["software"] == "torch=2.9.1+cu128+compile" and dyn["hardware"] == "rtx-4090"
    cpu = parse_file_name("benchmark-infer-fp32-nchw-pt221-cpu-i9_10940x-dynamo.csv")
    assert (cpu["hardware"], cpu["precision"], cpu["software"]) == (
        "cpu-i9-10940x",
        "fp32",
        "torch=2.2.1+cpu+compile",
    )
    for bad in (
        "results.csv",
        "benchmark-train-int8-nchw-pt112-cu113-rtx3090.csv",
        "benchmark-infer-amp-nchw-pt240-cu124-tpu9.csv",
    ):
        with pytest.raises(ValueError):
            parse_file_name(bad)


def test_timm_cpu_import_writes_hardware_records_and_is_idempotent(tmp_path: Path, capsys) -> None:
    from gnnperf.cli import main
    from gnnperf.hardware.table import spec_from_dict

    file = TIMM / "head" / "benchmark-infer-fp32-nchw-pt240-cpu-i7_12700h-dynamo.csv"
    store = tmp_path / "store"
    argv = ["data", "import", "timm-benchmark", str(file), "--out", str(store), "--limit", "30", "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["samples"] == first["written"] == 30 and first["limit_reached"]
    record = spec_from_dict(json.loads((store / "hardware" / "cpu-i7-12700h.json").read_text()))
    assert record.kind == "cpu" and record.sm_count == 14 and "Intel ARK" in record.source
    assert record.peak_fp32_tflops == pytest.approx(0.659, abs=1e-3) and "avx512f" not in record.generation
    assert main(argv) == 0
    second = json.loads(capsys.readouterr().out)
    assert (second["written"], second["already_stored"]) == (0, 30)
    samples = SampleStore(store, readonly=True)
    assert len(samples.shards()) == 1 and len(samples.read(dedup=False)) == 30
    assert set(samples.read()["hardware"]) == {"cpu-i7-12700h"}
    assert all(r["mode"] == "infer" and r["precision"] == "fp32" for r in samples.read().to_dict("records"))
    # a corrected copy of the table: the rows stored with other times are named, and the store keeps its own
    table = pd.read_csv(file)
    table.loc[:4, "infer_step_time"] *= 2
    table.loc[:4, "infer_samples_per_sec"] /= 2
    edited = tmp_path / file.name
    table.to_csv(edited, index=False)
    before = samples.read()
    assert main([*argv[:3], str(edited), *argv[4:]]) == 0
    third = json.loads(capsys.readouterr().out)
    assert (third["written"], third["already_stored"], len(third["stored_differently"])) == (0, 30, 5)
    pd.testing.assert_frame_equal(samples.read(), before)
    assert main([*argv[:3], str(edited), *argv[4:-1]]) == 0
    assert "5 of those are stored with other measured values" in capsys.readouterr().out


def test_import_that_cannot_write_a_hardware_record_stores_no_samples(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from gnnperf.apps import generate
    from gnnperf.cli import main

    def refuse(root: Path, spec) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(generate, "save_hardware_record", refuse)
    file = TIMM / "head" / "benchmark-infer-fp32-nchw-pt240-cpu-i7_12700h-dynamo.csv"
    store = tmp_path / "store"
    assert main(["data", "import", "timm-benchmark", str(file), "--out", str(store), "--limit", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no samples stored" in err[0] and "No space left" in err[0]
    assert SampleStore(store, readonly=True).read().empty  # no samples whose hardware has no record


def test_import_that_cannot_write_its_shard_is_one_line_and_keeps_the_store(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from gnnperf.cli import main

    file = TIMM / "head" / "benchmark-infer-fp32-nchw-pt240-cpu-i7_12700h-dynamo.csv"
    store = tmp_path / "store"
    argv = ["data", "import", "timm-benchmark", str(file), "--out", str(store), "--limit", "3"]
    assert main(argv) == 0
    before = SampleStore(store, readonly=True).read()

    def full(self, rows):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(SampleStore, "write_shard", full)
    assert main([*argv[:-1], "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no samples stored" in err[0] and "No space left" in err[0]
    pd.testing.assert_frame_equal(SampleStore(store, readonly=True).read(), before)


def test_cli_bad_path_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    from gnnperf.cli import main

    assert main(["data", "import", "neusight", str(tmp_path / "missing"), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]
    assert not (tmp_path / "s").exists()


def test_torchvision_a100_resnet50_median_matches_source_md(tv_all) -> None:
    rows, report = tv_all
    assert report.problems == [] and report.files_skipped == 0
    r = by_ref(rows, f"{A100_TRAIN}#resnet50")
    assert r["iteration_time_ms"] == pytest.approx(36.0, abs=0.05)  # SOURCE.md: 36.0 ms
    assert r["time_p10_ms"] <= r["iteration_time_ms"] <= r["time_p90_ms"] and r["n_iters"] == 50
    assert (r["model_ref"], r["hardware"], r["batch_size"], r["num_devices"]) == (
        "torchvision:resnet50", "a100-sxm4-40gb", 12, 1
    )  # fmt: skip
    # PyTorch 1.7 (NGC 20.10) ran "float" as TF32 on the A100; the other GPUs have no TF32
    assert (r["mode"], r["precision"], r["timed"], r["optimizer"]) == ("train", "tf32", "h2d+fwd+bwd", "none")
    titan = by_ref(rows, "TitanRTX/TITAN RTX_1_gpus__float_model_train_benchmark.csv#resnet50")
    assert titan["precision"] == "fp32"
    with open(TV / "results" / A100_TRAIN, newline="") as f:
        assert r["n_iters"] == len(list(csv.reader(f))) - 1


def test_torchvision_precisions_devices_and_2018_files(tv_all) -> None:
    rows, _ = tv_all
    assert len(rows) == 4 * 24 * 32 + 4 * 32 + 12 * 15
    dp = by_ref(rows, "TitanRTX/TITAN RTX_4_gpus__half_model_inference_benchmark.csv#vgg16")
    assert (dp["num_devices"], dp["batch_size"], dp["precision"], dp["mode"], dp["timed"]) == (
        4, 12, "fp16", "infer", "h2d+fwd"
    )  # fmt: skip
    assert (
        by_ref(rows, "2080ti(2)/GeForce RTX 2080 Ti_1_gpus__double_model_train_benchmark.csv#vgg16")[
            "software"
        ]
        == "torch=1.4+cu10.0+cudnn7600"
    )
    old = [
        by_ref(rows, f"2080TI/GeForce RTX 2080 Ti_single_model_training_benchmark({k}).csv#resnet50")
        for k in (1, 2)
    ]
    assert [o["n_iters"] for o in old] == [20, 20] and old[0]["sample_id"] != old[1]["sample_id"]
    assert all(o["hardware"] == "rtx-2080-ti" and o["precision"] == "fp32" for o in old)


def test_neusight_label_maps_to_hardware_batch_seq_and_ms(ns_all) -> None:
    rows, report = ns_all
    ref = "label/NVIDIA_L4/gpt2_large-train-1024-1.json"
    r = by_ref(rows, ref)
    want = json.loads((NEUSIGHT / ref).read_text())["e2e_latency"]
    config = os.path.abspath(NEUSIGHT / "data" / "DLmodel_configs" / "gpt2_large.json")
    assert (r["hardware"], r["batch_size"], r["input_shape"], r["iteration_time_ms"]) == (
        "l4",
        1,
        "1024",
        want,
    )
    # NeuSight's transformers ran GPT-2's eager attention; the reference says so (transformers' default is sdpa now)
    assert (r["model_ref"], r["family"], r["n_iters"]) == (
        f"hf:{config}?attn_implementation=eager",
        "gpt2",
        5,
    )
    assert resolve(r["model_ref"]).attention == "eager"
    assert (r["mode"], r["timed"], r["optimizer"], r["precision"], r["num_devices"]) == (
        "train", "fwd+bwd", "none", "fp32", 1
    )  # fmt: skip
    mi250 = by_ref(rows, "label/AMD_Instinct_MI250/gpt2_large-inf-1024-8.json")
    assert (mi250["hardware"], mi250["mode"], mi250["timed"]) == ("mi250-gcd", "infer", "fwd")
    # the L4 switch4 label names a config NeuSight does not ship
    assert any("hf config not found" in str(p) and "switch4.json" in str(p) for p in report.problems)


def test_neusight_fusion_and_megatron_rows_are_marked(ns_all) -> None:
    rows, _ = ns_all
    fused = by_ref(rows, "label/NVIDIA_L4/gpt2_large-inf-1024-8-fusion.json")
    plain = by_ref(rows, "label/NVIDIA_L4/gpt2_large-inf-1024-8.json")
    assert fused["software"] == plain["software"] + "+compile" and fused["sample_id"] != plain["sample_id"]
    multi = [r for r in rows if r["num_devices"] > 1]
    assert {r["source_ref"].rsplit("-", 1)[-1] for r in multi} == {"dp4.json", "tp4.json", "pp4_1.json"}
    for r in multi:
        option = r["source_ref"].rsplit("-", 1)[-1].removesuffix(".json")
        assert r["num_devices"] == 4 and "megatron" in r["software"] and r["software"].endswith(option)
    assert all("megatron" not in r["software"] for r in rows if r["num_devices"] == 1)


def test_sample_ids_unique_across_all_sources(tv_all, ns_all, monkeypatch) -> None:
    monkeypatch.setattr(timm_csv, "CHECK_PARAMS", False)  # 0.2 s per model, 1,400 models
    timm_rows, _ = read_source("timm-benchmark", TIMM)
    rows = timm_rows + tv_all[0] + ns_all[0]
    ids = [r["sample_id"] for r in rows]
    assert len(ids) == len(set(ids)) > 30000
    # sources never share identity fields: model references differ by prefix, protocols by timed/software
    idents = {s: {tuple(r[k] for k in IDENTITY_FIELDS) for r in part} for s, part in
              (("timm", timm_rows), ("tv", tv_all[0]), ("ns", ns_all[0]))}  # fmt: skip
    assert not (idents["timm"] & idents["tv"]) and not (idents["tv"] & idents["ns"])
    assert all(
        make_sample(**{k: v for k, v in r.items()})["sample_id"] == r["sample_id"] for r in rows[::997]
    )


def test_malformed_timm_csvs_are_reported_and_the_rest_imported(tmp_path: Path) -> None:
    lines = (TIMM / "head" / TIMM_TRAIN).read_text().splitlines()
    cut = tmp_path / "head" / TIMM_TRAIN
    cut.parent.mkdir()
    body = "\n".join(lines[:41])
    cut.write_text(body + "\n" + lines[41][: len(lines[41]) // 2])  # 40 whole rows, the 41st cut mid-row
    renamed = tmp_path / "head" / TIMM_TRAIN.replace("nchw", "nhwc")
    renamed.write_text(body.replace("train_step_time", "step_ms", 1) + "\n")
    (tmp_path / "head" / "notes.csv").write_text("a,b\n1,2\n")  # not a benchmark file: not picked up
    (tmp_path / "head" / "benchmark-train-amp-nchw-pt112-cu113-abacus.csv").write_text(body + "\n")
    rows, report = read_source("timm-benchmark", tmp_path)
    problems = [str(p) for p in report.problems]
    assert len(rows) == 40 - sum(1 for line in lines[1:41] if line.split(",")[0] in GONE)
    assert any(p.startswith(f"head/{TIMM_TRAIN}:41: ") and "truncated" in p for p in problems)
    assert any(
        p.startswith(f"head/{renamed.name}:0: unknown column layout: no train_step_time") for p in problems
    )
    assert any("abacus.csv: unknown device 'abacus'" in p for p in problems)
    assert report.files == 3 and report.files_skipped == 2


def test_timm_csv_lines_are_rows_whatever_one_of_them_holds(tmp_path: Path, monkeypatch, capsys) -> None:
    from gnnperf.cli import main

    monkeypatch.setattr(timm_csv, "CHECK_PARAMS", False)
    lines = (TIMM / "head" / TIMM_TRAIN).read_text().splitlines()
    bad = {
        2: '"' + lines[2],  # a stray quote: only this line is lost, not every line after it
        4: lines[4].replace(",512,", ",9223372036854775808,"),  # a batch the store's int64 cannot hold
        6: "x" * 200_000 + ",1,1,1,1,1",  # a cell over the csv module's field limit
        # numbers float() takes but no table writes: an exponent for an integer, digit separators, nan, a
        # 10-gigapixel side
        9: lines[9].replace(",512,", ",1e3,"),
        10: lines[10].replace(",512,", ",1_000,"),
        11: lines[11].rsplit(",", 1)[0] + ",nan",
        12: lines[12].replace(",224,", ",10000000000,"),
    }
    table = tmp_path / "head" / TIMM_TRAIN
    table.parent.mkdir()
    text = "\n".join(bad.get(i, line) for i, line in enumerate(lines[:14]))
    table.write_text("\ufeff" + text[: text.rindex(",") + 2])  # the last row cut mid-number, no line end
    store = tmp_path / "store"
    assert main(["data", "import", "timm-benchmark", str(table.parent), "--out", str(store), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    problems = result["problems"]
    assert [p.split(":")[1] for p in problems] == ["2", "4", "6", "9", "10", "11", "12", "13"]  # line numbers
    assert "truncated or malformed" in problems[0] and "field limit" in problems[2]
    assert "train_batch_size='9223372036854775808'" in problems[1]
    assert "train_batch_size='1e3'" in problems[3] and "train_batch_size='1_000'" in problems[4]
    assert "param_count='nan'" in problems[5] and "train_img_size='10000000000'" in problems[6]
    assert "last row has no line end" in problems[7]
    assert result["written"] == 5 and len(SampleStore(store, readonly=True).read()) == 5  # the BOM is no cell
    # a column the import reads, twice: which one was measured is unknown, so the file is not imported
    table.write_text(lines[0] + ",train_step_time\n" + "\n".join(line + ",1.0" for line in lines[1:4]) + "\n")
    rows, report = read_source("timm-benchmark", table)
    assert not rows and [str(p) for p in report.problems] == [
        f"head/{TIMM_TRAIN}:0: unknown column layout: repeated column train_step_time"
    ]


def test_import_of_nothing_is_an_error_and_creates_no_store(tmp_path: Path, capsys) -> None:
    from gnnperf.cli import main

    (tmp_path / "empty").mkdir()
    store = tmp_path / "store"
    assert main(["data", "import", "timm-benchmark", str(tmp_path / "empty"), "--out", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no timm-benchmark tables found" in err[0]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / TIMM_TRAIN).write_bytes(b"\x00\xff\xfe garbage")
    assert main(["data", "import", "timm-benchmark", str(tmp_path / "bad"), "--out", str(store)]) == 2
    captured = capsys.readouterr()
    assert "cannot read" in captured.out and "nothing imported" in captured.err
    assert not store.exists()
    (tmp_path / "file").write_text("")
    argv = [
        "data",
        "import",
        "timm-benchmark",
        str(TIMM / "head" / TIMM_TRAIN),
        "--out",
        str(tmp_path / "file"),
    ]
    assert main(argv) == 2 and "is not a directory" in capsys.readouterr().err


def test_malformed_torchvision_csv_is_reported_cell_by_cell(tmp_path: Path) -> None:
    lines = (TV / "results" / A100_TRAIN).read_text().splitlines()
    header = lines[0].split(",")
    row3 = lines[3].split(",")
    row3[header.index("vgg16")] = "n/a"
    folder = tmp_path / "dgx-a100"
    folder.mkdir()
    # the last row cut mid-number: every cell there, but no line end
    text = "\n".join([lines[0], *lines[1:3], ",".join(row3), *lines[4:10], lines[10][:-2]])
    (folder / Path(A100_TRAIN).name).write_text(text)
    (folder / "A100-SXM4-40GB_1_gpus__float_model_train_benchmark_v2.csv").write_text(text)
    rows, report = read_source("pytorch-gpu-benchmark", tmp_path)
    problems = [str(p) for p in report.problems]
    ref = A100_TRAIN
    assert f"{ref}:3: column 'vgg16': 'n/a' is not a positive number; cell skipped" in problems
    assert (
        f"{ref}:10: last row has no line end (a truncated copy? if the file is whole, end it with a line break); left out"
        in problems
    )
    assert any("_v2.csv: file name does not match" in p for p in problems)
    assert len(rows) == 32
    assert by_ref(rows, f"{ref}#vgg16")["n_iters"] == 8 and by_ref(rows, f"{ref}#resnet50")["n_iters"] == 9


def test_malformed_neusight_labels_are_reported(tmp_path: Path) -> None:
    shutil.copytree(NEUSIGHT / "data" / "DLmodel_configs", tmp_path / "data" / "DLmodel_configs")
    device = tmp_path / "label" / "NVIDIA_L4"
    device.mkdir(parents=True)
    for name in ("gpt2_large-train-1024-1.json", "gpt2_large-inf-1024-8-fusion.json"):
        shutil.copy(NEUSIGHT / "label" / "NVIDIA_L4" / name, device / name)
    (device / "gpt2_large-inf-1024-4.json").write_text('{\n "num_layer": 36,\n "e2e_latency": 12')
    (device / "gpt2_large-inf-1024-8.json").write_text('{"num_layer": 36, "e2e_latency": "fast"}')
    (device / "gpt2_large-train-1024-2-zero3.json").write_text('{"e2e_latency": 5.0}')
    (device / "gpt2_large-train-1024-2.json").write_text(
        '\ufeff{"e2e_latency": 5.0}', encoding="utf-8"
    )  # BOM: fine
    (device / "gpt2_large-train-1024-4.json").write_text(
        '{"e2e_latency": 1' + "0" * 400 + "}"
    )  # past a float
    (device / "gpt2_large-train-1024-8.json").write_text('{"e2e_latency": 5, "n": 1' + "0" * 5000 + "}")
    (device / "gpt2_large-inf-1024-2.json").write_text('{"e2e_latency": 5.0, "e2e_latency": 7.0}')
    (tmp_path / "label" / "Quantum_Q1").mkdir()
    (tmp_path / "label" / "Quantum_Q1" / "bert_large-inf-512-8.json").write_text('{"e2e_latency": 5.0}')
    rows, report = read_source("neusight", tmp_path)
    problems = [str(p) for p in report.problems]
    assert sorted(r["source_ref"].rsplit("/", 1)[-1] for r in rows) == [
        "gpt2_large-inf-1024-8-fusion.json", "gpt2_large-train-1024-1.json", "gpt2_large-train-1024-2.json"
    ]  # fmt: skip
    assert any(p.startswith("label/NVIDIA_L4/gpt2_large-inf-1024-4.json:3: not valid JSON") for p in problems)
    assert any(
        p.startswith("label/NVIDIA_L4/gpt2_large-inf-1024-8.json: no positive e2e_latency") for p in problems
    )
    assert any("zero3.json: unknown option 'zero3'" in p for p in problems)
    assert any(
        p.startswith("label/NVIDIA_L4/gpt2_large-train-1024-4.json: no positive e2e_latency")
        for p in problems
    )
    assert any(
        p.startswith("label/NVIDIA_L4/gpt2_large-train-1024-8.json: not usable JSON") for p in problems
    )
    assert (
        "label/NVIDIA_L4/gpt2_large-inf-1024-2.json: not usable JSON: key 'e2e_latency' appears more than once"
        in problems
    )
    assert any("Quantum_Q1/bert_large-inf-512-8.json: unknown device" in p for p in problems)
    # a config transformers cannot build is reported as the other adapters report an unknown model
    (tmp_path / "data" / "DLmodel_configs" / "odd.json").write_text('{"model_type": "no_such_type"}')
    (device / "odd-inf-512-8.json").write_text('{"e2e_latency": 5.0}')
    _, report = read_source("neusight", tmp_path)
    odd = [str(p) for p in report.problems if "odd-inf" in str(p)]
    assert len(odd) == 1 and "cannot be used" in odd[0] and "Unrecognized model identifier" in odd[0]
    assert "Should contain one of" not in odd[0]  # not transformers' list of every model type
    # one device folder or one file works too, with the same references
    one, _ = read_source("neusight", device / "gpt2_large-train-1024-1.json")
    assert [r["sample_id"] for r in one] == [
        r["sample_id"] for r in rows if r["source_ref"].endswith("train-1024-1.json")
    ]


def test_collector_reports_a_second_row_with_the_same_identity() -> None:
    from gnnperf.data.sources.common import Collector, ImportReport

    report = ImportReport("test")
    out = Collector(report, limit=None)
    ident = dict(
        model_ref="torchvision:resnet18", family="resnet", input_shape="3,224,224", batch_size=12, mode="infer",
        precision="fp32", optimizer="none", timed="fwd", memory_format="contiguous", num_devices=1,
        hardware="t4", software="torch=2.1.0", status="ok", source="test",
    )  # fmt: skip
    out.add(make_sample(**ident, iteration_time_ms=5.0, source_ref="a.csv#row1"), "a.csv", 1)
    out.add(make_sample(**ident, iteration_time_ms=6.0, source_ref="b.csv#row7"), "b.csv", 7)
    assert len(out.rows) == 1 and out.rows[0]["iteration_time_ms"] == 5.0
    assert [str(p) for p in report.problems] == [
        "b.csv:7: same identity fields as a.csv#row1; not imported twice"
    ]
    with pytest.raises(GnnperfError, match="bad limit"):
        Collector(report, limit=0)


def test_csv_row_numbers_are_line_numbers_whatever_the_cells_hold(tmp_path: Path) -> None:
    from gnnperf.data.sources.common import ImportReport, csv_rows

    table = tmp_path / "t.csv"
    table.write_bytes(
        b"model,ms\r\na,1\r\nb,2\x0c5\r\nc,3\xe2\x80\xa8\r\n\r\nd,4\r\n"
    )  # a form feed, a U+2028
    header, rows = csv_rows(table, "t.csv", ImportReport("test"))
    assert header == ["model", "ms"]
    assert [(i, cells[0]) for i, cells in rows] == [(1, "a"), (2, "b"), (3, "c"), (5, "d")]


def test_neusight_bert_inference_names_the_class_it_timed(ns_all) -> None:
    rows, report = ns_all
    # trace.py::get_model: BERT inference ran BertForSequenceClassification, not the config's BertLMHeadModel
    bert = by_ref(rows, "label/NVIDIA_L4/bert_large-inf-512-8.json")
    assert bert["model_ref"].endswith(
        "/DLmodel_configs/bert_large.json?class=BertForSequenceClassification&attn_implementation=eager"
    )
    assert bert["family"] == "bert" and bert["mode"] == "infer"
    train = by_ref(rows, "label/NVIDIA_L4/bert_large-train-512-8.json")
    # trained as AutoModelForPreTraining: the config's BertLMHeadModel graph
    assert train["model_ref"].endswith("/DLmodel_configs/bert_large.json?attn_implementation=eager")
    assert not any("bert_large" in str(p) for p in report.problems)  # tests/graph builds the class it names


def test_neusight_latency_written_as_a_string_is_refused(tmp_path: Path) -> None:
    # a hand-edited label: trace.py writes numbers
    shutil.copytree(NEUSIGHT / "data" / "DLmodel_configs", tmp_path / "data" / "DLmodel_configs")
    device = tmp_path / "label" / "NVIDIA_L4"
    device.mkdir(parents=True)
    (device / "gpt2_large-inf-1024-4.json").write_text('{"e2e_latency": "5.0"}')
    rows, report = read_source("neusight", tmp_path)
    assert not rows and [str(p) for p in report.problems] == [
        "label/NVIDIA_L4/gpt2_large-inf-1024-4.json: no positive e2e_latency ('5.0')"
    ]


def test_a_byte_that_is_not_utf8_loses_its_row_only(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(timm_csv, "CHECK_PARAMS", False)
    lines = (TIMM / "head" / TIMM_TRAIN).read_bytes().splitlines()
    table = tmp_path / "head" / TIMM_TRAIN
    table.parent.mkdir()
    name = lines[3].split(b",")[0]
    table.write_bytes(
        b"\n".join([*lines[:3], lines[3].replace(name, name + b"\xe9", 1), *lines[4:8]]) + b"\n"
    )
    rows, report = read_source("timm-benchmark", tmp_path)
    assert [str(p) for p in report.problems] == [
        f"head/{TIMM_TRAIN}:3: row is not UTF-8 text (a damaged byte?); left out"
    ]
    assert len(rows) == 6 and report.rows == 7
    table.write_bytes("\n".join(x.decode() for x in lines[:4]).encode("utf-16") + b"\n")  # another encoding
    rows, report = read_source("timm-benchmark", tmp_path)
    assert not rows and [str(p) for p in report.problems] == [
        f"head/{TIMM_TRAIN}: cannot read: the header is not UTF-8 text (another encoding?)"
    ]


def test_folder_names_that_are_not_utf8_are_escaped_not_a_traceback(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from gnnperf.cli import main

    monkeypatch.setattr(timm_csv, "CHECK_PARAMS", False)
    lines = (TIMM / "head" / TIMM_TRAIN).read_text().splitlines()
    folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/h\xffd"))  # e.g. a Latin-1 name on a UTF-8 system
    folder.mkdir()
    (folder / TIMM_TRAIN).write_text("\n".join(lines[:4]) + "\n")
    (folder / TIMM_TRAIN.replace("rtx3090", "abacus")).write_text("\n".join(lines[:4]) + "\n")
    store = tmp_path / "store"
    assert main(["data", "import", "timm-benchmark", str(folder), "--out", str(store)]) == 0
    assert (
        "h\\xffd/benchmark-train-amp-nchw-pt112-cu113-abacus.csv: unknown device" in capsys.readouterr().out
    )
    refs = set(SampleStore(store, readonly=True).read()["source_ref"])
    assert refs == {f"h\\xffd/{TIMM_TRAIN}#row{i}" for i in (1, 2, 3)}
