import csv
import json
from pathlib import Path

import pytest

from gnnperf.errors import GnnperfError
from gnnperf.hardware.table import (
    COLUMNS,
    HARDWARE_TABLE_VERSION,
    SPECS_CSV,
    canonical_name,
    get_spec,
    load_table,
    spec_from_dict,
    spec_to_dict,
)

BRIEF_NAMES = [
    "rtx-3090",
    "a100-sxm4-40gb",
    "a100-pcie-40gb",
    "a100-pcie-80gb",
    "v100-pcie-32gb",
    "v100-sxm2-16gb",
    "titan-rtx",
    "titan-xp",
    "rtx-2080-ti",
    "l4",
    "t4",
    "p100-pcie-16gb",
    "p4",
    "mi100",
    "mi210",
    "mi250",
    "rtx-4090",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "b200",
    "l40s",
    "a10",
    "rtx-a6000",
    "rtx-5090",
    "mi300x",
    "rtx-2070",
    "p4000",
    "rtx-a4000",
    "a40",
    "rtx-3080",
    "a30",
    "l40",
    "gh200",
]
EXTERNAL = Path(__file__).resolve().parents[3] / "shared" / "external"


@pytest.fixture(autouse=True)
def _no_env_file(monkeypatch):
    monkeypatch.delenv("GNNPERF_HARDWARE_FILE", raising=False)


def test_table_has_the_named_devices():
    table = load_table()
    assert len(table) >= 32
    assert set(BRIEF_NAMES) <= set(table)


def test_every_row_has_core_values_and_a_source():
    for spec in load_table().values():
        assert spec.kind in ("gpu", "cpu") and spec.vendor in ("nvidia", "amd", "intel"), spec.name
        assert spec.peak_fp32_tflops > 0 and spec.memory_gb > 0 and spec.mem_bandwidth_gbs > 0, spec.name
        assert len(spec.source) > 10 and spec.generation, spec.name


def test_header_is_exactly_the_columns():
    with SPECS_CSV.open(newline="") as f:
        assert tuple(next(csv.reader(f))) == COLUMNS


def test_missing_values_stay_empty():
    assert get_spec("v100-sxm2-16gb").peak_bf16_tflops is None  # Volta has no bf16
    assert get_spec("p100-pcie-16gb").peak_fp16_tensor_tflops is None  # Pascal has no tensor cores
    assert get_spec("b200").boost_clock_mhz is None  # not published


# CUDA cores per SM; GP100 and GA100 have 64, their siblings 128.
_CORES_PER_SM = {"pascal": 128, "volta": 64, "turing": 64, "ampere": 128, "ada": 128, "hopper": 128}
_CORES_64 = {"p100-pcie-16gb", "p100-sxm2-16gb", "a100-pcie-40gb", "a100-pcie-80gb", "a100-sxm4-40gb"}
_CORES_64 |= {"a100-sxm4-80gb", "a30"}


def test_nvidia_fp32_matches_sms_times_clock():
    """Catches typos: peak fp32 = SMs x cores/SM x 2 FLOP x boost clock, within 6%."""
    checked = 0
    for spec in load_table().values():
        per_sm = 64 if spec.name in _CORES_64 else _CORES_PER_SM.get(spec.generation)
        if spec.vendor != "nvidia" or per_sm is None or spec.boost_clock_mhz is None:
            continue
        expected = spec.sm_count * per_sm * 2 * spec.boost_clock_mhz / 1e6
        assert spec.peak_fp32_tflops == pytest.approx(expected, rel=0.06), spec.name
        checked += 1
    assert checked >= 25


@pytest.mark.parametrize(
    "text, name",
    [
        ("NVIDIA GeForce RTX 3090", "rtx-3090"),
        ("rtx3090", "rtx-3090"),
        ("2080ti", "rtx-2080-ti"),
        ("2080ti(2)", "rtx-2080-ti"),  # ryujaehun results folder
        ("NVIDIA_L4", "l4"),
        ("Tesla V100-PCIE-32GB", "v100-pcie-32gb"),
        ("TitanRTX", "titan-rtx"),
        ("TITANXP", "titan-xp"),
        ("dgx-a100", "a100-sxm4-40gb"),
        ("AMD Instinct MI210", "mi210"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA RTX 3090", "rtx-3090"),  # brand words dropped on a second try
        ("RTX-3090", "rtx-3090"),
    ],
)
def test_aliases_resolve(text, name):
    assert canonical_name(text) == name
    assert get_spec(text).name == name


def test_ambiguous_or_unknown_names_do_not_resolve():
    assert canonical_name("v100") is None  # four variants
    assert canonical_name("") is None


def test_unknown_name_lists_suggestions_and_how_to_add():
    with pytest.raises(GnnperfError) as e:
        get_spec("rtx 3900")
    msg = str(e.value)
    assert "unknown hardware 'rtx 3900'" in msg and "did you mean" in msg and "rtx-3090" in msg
    assert "known: a10," in msg and "--hardware-file" in msg and "\n" not in msg
    with pytest.raises(GnnperfError, match="v100-sxm2-16gb"):
        get_spec("v100")


def test_table_version_is_a_stable_short_hash():
    assert len(HARDWARE_TABLE_VERSION) == 12
    assert int(HARDWARE_TABLE_VERSION, 16) >= 0


def test_dict_round_trip():
    spec = get_spec("a100-sxm4-40gb")
    data = json.loads(json.dumps(spec_to_dict(spec)))
    assert spec_from_dict(data) == spec


def test_user_yaml_adds_devices(tmp_path):
    f = tmp_path / "my_gpu.yaml"
    f.write_text(
        "- name: my-gpu\n  vendor: nvidia\n  aliases: [My GPU 9000]\n  peak_fp32_tflops: 50\n"
        "  memory_gb: 32\n  mem_bandwidth_gbs: 1500\n"
        "- {name: my-gpu-2, vendor: amd, peak_fp32_tflops: 10, memory_gb: 8, mem_bandwidth_gbs: 400}\n"
    )
    spec = get_spec("My GPU 9000", extra=f)
    assert spec.name == "my-gpu" and spec.kind == "gpu" and spec.peak_bf16_tflops is None
    assert "my_gpu.yaml" in spec.source
    assert "my-gpu-2" in load_table(f) and "rtx-3090" in load_table(f)


def test_user_files_from_env_json_and_csv(tmp_path, monkeypatch):
    j = tmp_path / "a.json"
    j.write_text(
        json.dumps(
            {"gpu-a": {"vendor": "intel", "peak_fp32_tflops": 1, "memory_gb": 1, "mem_bandwidth_gbs": 1}}
        )
    )
    c = tmp_path / "b.csv"
    c.write_text("name,vendor,peak_fp32_tflops,memory_gb,mem_bandwidth_gbs,source\ngpu-b,amd,2,4,8,my lab\n")
    monkeypatch.setenv("GNNPERF_HARDWARE_FILE", f"{j}:{c}")
    assert get_spec("gpu-a").vendor == "intel"
    assert get_spec("GPU-B").source == "my lab"


@pytest.mark.parametrize(
    "name, text, where",
    [
        ("bad.yaml", "- name: x\n  peak_fp32_tflops: [oops\n", "cannot read"),
        (
            "bad.yaml",
            "- name: x\n  vendor: nvidia\n  peak_fp32_tflops: 5\n",
            "entry 1 (x): missing memory_gb",
        ),
        (
            "bad.json",
            '[{"name": "x", "vendor": "amd", "peak_fp32_tflops": -1, "memory_gb": 1, "mem_bandwidth_gbs": 1}]',
            "entry 1",
        ),
        ("bad.csv", "name,vendor,peak_fp32_tflops,memory_gb,mem_bandwidth_gbs\ny,amd,1,1,fast\n", "row 2"),
        ("bad.csv", "name,colour\ny,red\n", "unknown column"),
        (
            "huge.json",
            '[{"name": "x", "vendor": "amd", "peak_fp32_tflops": 1'
            + "0" * 400
            + ', "memory_gb": 1, "mem_bandwidth_gbs": 1}]',
            "is not a number",
        ),
        (
            "bool.json",
            '[{"name": "x", "vendor": "amd", "peak_fp32_tflops": true, "memory_gb": 1, "mem_bandwidth_gbs": 1}]',
            "peak_fp32_tflops=True is not a number",
        ),
        (
            "dict.yaml",
            "- {name: x, vendor: {maker: amd}, peak_fp32_tflops: 1, memory_gb: 1, mem_bandwidth_gbs: 1}\n",
            "vendor={'maker': 'amd'} must be text",
        ),
        (
            "bool.yaml",
            "- {name: x, aliases: [off], vendor: amd, peak_fp32_tflops: 1, memory_gb: 1, mem_bandwidth_gbs: 1}\n",
            "aliases=False must be text",
        ),
        (
            "bool.yaml",
            "- {name: yes, vendor: amd, peak_fp32_tflops: 1, memory_gb: 1, mem_bandwidth_gbs: 1}\n",
            "name=True must be text",
        ),
        ("bad.yaml", "- name: x\n  vendor: nvidia\n  speed: 9\n", "unknown column(s) speed"),
        ("bad.txt", "x", "must end in"),
        ("empty.csv", "name,vendor,peak_fp32_tflops,memory_gb,mem_bandwidth_gbs\n", "no hardware entries"),
        ("empty.json", "[]", "no hardware entries"),
        (
            "twice.csv",
            "name,vendor,peak_fp32_tflops,memory_gb,mem_bandwidth_gbs\ny,amd,1,1,1\ny,amd,2,1,1\n",
            "device 'y' is given twice",
        ),
    ],
)
def test_malformed_user_file_names_file_and_row(tmp_path, name, text, where):
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(GnnperfError) as e:
        load_table(f)
    assert str(f) in str(e.value) and where in str(e.value)


def test_missing_user_file(tmp_path):
    with pytest.raises(GnnperfError, match="not found"):
        load_table(tmp_path / "nope.yaml")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(GnnperfError, match="dir.json is a directory"):
        load_table(tmp_path / "dir.json")


@pytest.mark.skipif(not (EXTERNAL / "neusight").is_dir(), reason="shared external data not present")
def test_neusight_device_configs_match_the_table():
    """Every NeuSight device name resolves, and its bandwidth agrees with our row within 5%."""
    for path in sorted((EXTERNAL / "neusight" / "data" / "device_configs").glob("*.json")):
        if path.stem.endswith("_TP"):  # a 2-GPU tensor-parallel pseudo-device
            continue
        config = json.loads(path.read_text())
        name = canonical_name(path.stem)
        assert name is not None and canonical_name(config["Device"]) == name, path.name
        assert get_spec(name).mem_bandwidth_gbs == pytest.approx(config["Mem_Bw"], rel=0.05), path.name


def test_spec_files_with_a_byte_order_mark_or_not_utf8(tmp_path):
    row = {"name": "my-gpu", "vendor": "nvidia", "kind": "gpu", "peak_fp32_tflops": "10", "memory_gb": "16"}
    row["mem_bandwidth_gbs"] = "500"
    path = tmp_path / "gpus.csv"
    path.write_text("\ufeff" + ",".join(row) + "\n" + ",".join(row.values()) + "\n", encoding="utf-8")
    assert get_spec("my-gpu", path).memory_gb == 16  # the mark is no part of the first column's name
    for suffix in (".csv", ".json", ".yaml"):
        bad = tmp_path / f"bad{suffix}"
        bad.write_bytes(b"\xff\xfe\x00garbage")
        with pytest.raises(GnnperfError, match="not UTF-8 text"):
            load_table(bad)
