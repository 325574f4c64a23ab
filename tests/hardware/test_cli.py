import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gnnperf import cli as gnnperf_cli
from gnnperf.hardware import cli as hw_cli

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
# While sibling sub-commands are still being written, gnnperf.cli cannot build its parser; then the same
# main() runs with only the hardware command registered.
_ONLY_HARDWARE = (
    "import sys; from gnnperf import cli; "
    "cli.COMMANDS = {'hardware': cli.COMMANDS['hardware']}; sys.exit(cli.main(sys.argv[1:]))"
)


def _gnnperf(*args: str) -> subprocess.CompletedProcess:
    python = str(PYTHON if PYTHON.exists() else sys.executable)
    ready = all(importlib.util.find_spec(m) for m, _ in gnnperf_cli.COMMANDS.values())
    entry = ["-m", "gnnperf.cli"] if ready else ["-c", _ONLY_HARDWARE]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [python, *entry, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )


def test_show_json_via_the_gnnperf_command():
    out = _gnnperf("hardware", "show", "rtx-3090", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (
        data["name"] == "rtx-3090" and data["peak_fp32_tflops"] == 35.6 and data["mem_bandwidth_gbs"] == 936
    )
    assert {"aliases", "source", "peak_fp16_tensor_tflops", "l2_cache_mb"} <= set(data)


def test_unknown_hardware_is_one_line_exit_2():
    out = _gnnperf("hardware", "show", "nosuchgpu")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown hardware 'nosuchgpu'" in lines[0]
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_show_a_device_in_no_table_from_the_predictor_trained_on_it(capsys):
    # the shipped predictor's CPUs are in no table; `gnnperf predict --hardware cpu-intel-xeon-1t` takes its record
    record = json.loads((ROOT / "datasets" / "cpu" / "hardware" / "cpu-intel-xeon-1t.json").read_text())
    shown = json.loads(_run(capsys, "show", "cpu-intel-xeon-1t", "--json"))
    assert (
        shown["threads"] == record["threads"] == 1 and shown["peak_fp32_tflops"] == record["peak_fp32_tflops"]
    )


def _run(capsys, *argv: str) -> str:
    parser = argparse.ArgumentParser()
    hw_cli.add_arguments(parser)
    assert hw_cli.run(parser.parse_args(list(argv))) == 0
    return capsys.readouterr().out


def test_list_json_and_table(capsys):
    names = [d["name"] for d in json.loads(_run(capsys, "list", "--json"))]
    assert len(names) >= 32 and "h100-sxm" in names
    text = _run(capsys, "list")
    assert "rtx-3090" in text and "FP16-tensor" in text


def test_show_by_alias_with_a_user_file(tmp_path, capsys):
    f = tmp_path / "lab.yaml"
    f.write_text("name: lab-gpu\nvendor: nvidia\npeak_fp32_tflops: 3\nmemory_gb: 4\nmem_bandwidth_gbs: 100\n")
    assert json.loads(_run(capsys, "show", "lab-gpu", "--json", "--hardware-file", str(f)))["memory_gb"] == 4
    assert "GeForce RTX 2080 Ti" in _run(capsys, "show", "2080ti")


def test_probe_no_measure_json_and_text(capsys):
    data = json.loads(_run(capsys, "probe", "--threads", "1", "--no-measure", "--json"))
    assert data["name"].endswith("-1t") and data["kind"] == "cpu" and data["threads"] == 1
    assert "vector" in _run(capsys, "probe", "--threads", "2", "--no-measure")


def test_probe_record_is_reusable_as_a_hardware_file(tmp_path, capsys):
    record = tmp_path / "cpu.json"
    record.write_text(_run(capsys, "probe", "--threads", "1", "--json"))
    name = json.loads(record.read_text())["name"]
    assert json.loads(_run(capsys, "show", name, "--json", "--hardware-file", str(record)))["threads"] == 1


@pytest.mark.parametrize("argv", [["show"], ["probe", "--threads", "x"], ["nope"]])
def test_bad_arguments_exit_2(argv):
    parser = argparse.ArgumentParser()
    hw_cli.add_arguments(parser)
    with pytest.raises(SystemExit) as e:
        parser.parse_args(argv)
    assert e.value.code == 2


@pytest.mark.parametrize(
    "argv", [["hardware", "show"], ["predict", "timm:resnet18", "--batch-size", "8"], ["nope"]]
)
def test_a_usage_error_of_the_gnnperf_command_is_one_line(argv, capsys):
    from gnnperf.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "error:" in err[0] and "--help" in err[0]
