"""The shipped predictor: used when no checkpoint is given, documented by its model card."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import gnnperf.predict as predict_module
from gnnperf.errors import GnnperfError
from gnnperf.graph.features import FEATURE_VERSION, GRAPH_FEATURES
from gnnperf.predict import SHIPPED_CHECKPOINT, Predictor, Query
from gnnperf.zoo.hf import SDPA_CAUSAL, SDPA_TIME

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_checkpoint_loads_and_has_a_model_card():
    predictor = Predictor.from_checkpoint(SHIPPED_CHECKPOINT)
    card = (SHIPPED_CHECKPOINT.parent / "MODEL_CARD.md").read_text()
    assert f"FEATURE_VERSION {FEATURE_VERSION}" in card
    assert all(device in card for device in predictor.devices)  # the card lists every device it has seen


def test_predict_without_checkpoint_uses_the_shipped_one():
    env = {k: v for k, v in os.environ.items() if k != predict_module.DEFAULT_CHECKPOINT_ENV}
    cmd = [sys.executable, "-m", "gnnperf.cli", "predict", "timm:resnet50", "--hardware", "a100-sxm4-40gb"]
    res = subprocess.run(
        [*cmd, "--batch-size", "64", "--precision", "amp_fp16", "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    row = json.loads(res.stdout)
    lo, hi = row["interval_ms"]
    assert math.isfinite(row["iteration_time_ms"]) and 0 < lo <= row["iteration_time_ms"] <= hi
    assert row["checkpoint"] == str(SHIPPED_CHECKPOINT)


def test_a_device_only_in_the_table_is_predicted_from_its_specs(capsys):
    from gnnperf.cli import main

    predictor = Predictor.from_checkpoint(None)
    unseen = next(d for d in ("h100-sxm", "h100-pcie", "l40s") if d not in predictor.devices)
    (row,) = predictor.predict(Query("torchvision:resnet18", unseen, 32, precision="amp_fp16"))
    assert not row["hardware_seen_in_training"] and row["iteration_time_ms"] > 0
    # the printed interval is the seen devices': the CLI says it does not cover a device predicted from its specs
    for device, says in ((unseen, True), ("rtx-3090", False)):
        assert main(["predict", "torchvision:resnet18", "--hardware", device, "--batch-size", "32"]) == 0
        assert ("the interval is that of the devices seen in training" in capsys.readouterr().out) == says


def test_a_video_clip_is_named_as_an_input_rank_it_never_saw():
    """3-D convolutions are op type Conv, as the images' are: only the input's rank tells a video model apart."""
    predictor = Predictor.from_checkpoint(None)
    clip, image = predictor.predict(
        [
            Query("tests.graph.factories:tiny_video", "a100-sxm4-40gb", 2, input_shape=(3, 4, 16, 16)),
            Query("tests.graph.factories:tiny_cnn", "a100-sxm4-40gb", 2, input_shape=(3, 16, 16)),
        ]
    )
    assert clip["unseen_input_rank"] == "5-D input (trained on 2-D, 3-D, 4-D)"
    assert image["unseen_input_rank"] is None


def test_a_device_beyond_every_training_device_says_which_specs_it_extrapolates():
    predictor = Predictor.from_checkpoint(None)
    query = Query("torchvision:resnet18", "b200", 32, precision="amp_fp16")
    b200, rtx3090 = predictor.predict([query, replace(query, hardware="rtx-3090")])
    assert "b200" not in predictor.devices and "rtx-3090" in predictor.devices
    assert any(
        f.startswith("peak_fp16_tensor_tflops=2250 (trained ")
        for f in b200["hardware_outside_training_range"]
    )
    assert rtx3090["hardware_outside_training_range"] == []


def test_the_unseen_device_error_it_quotes_is_the_studys():
    from gnnperf.predictor import report

    results = json.loads((ROOT / report.UNSEEN_DEVICE_STUDY / "results.json").read_text())
    assert round(results["predictors"]["gnn"]["all"]["mape"]) == report.UNSEEN_DEVICE_MAPE


def test_every_device_it_was_trained_on_is_named_without_a_spec_file():
    """The CPUs of its data are in no table: the checkpoint's records resolve them."""
    env = {k: v for k, v in os.environ.items() if k != predict_module.DEFAULT_CHECKPOINT_ENV}
    cmd = [sys.executable, "-m", "gnnperf.cli", "predict", "timm:resnet18", "--batch-size", "8", "--json"]
    predictor = Predictor.from_checkpoint(None)
    cpus = [d for d in predictor.devices if d.startswith("cpu-")]
    assert "cpu-intel-xeon-1t" in cpus and "cpu-i9-10940x" in cpus
    for device in cpus:
        assert predictor.spec(device).name == device
    res = subprocess.run(
        [*cmd, "--hardware", "cpu-intel-xeon-1t", "--precision", "fp32"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    row = json.loads(res.stdout)
    assert row["hardware_seen_in_training"] and row["iteration_time_ms"] > 0 and row["memory"] is None


def test_no_checkpoint_at_all_is_a_user_error(monkeypatch, tmp_path):
    monkeypatch.delenv(predict_module.DEFAULT_CHECKPOINT_ENV, raising=False)
    monkeypatch.setattr(predict_module, "SHIPPED_CHECKPOINT", tmp_path / "none.ckpt")
    with pytest.raises(GnnperfError, match="no checkpoint"):
        Predictor.from_checkpoint(None)


def test_a_file_that_is_no_predictor_checkpoint_is_a_user_error(tmp_path):
    import torch

    text, other = tmp_path / "notes.ckpt", tmp_path / "weights.ckpt"
    text.write_text("not a checkpoint\n")
    torch.save({"weights": torch.zeros(2)}, other)  # a PyTorch file, but not what gnnperf-train writes
    with pytest.raises(GnnperfError, match="not a PyTorch checkpoint or truncated"):
        Predictor.from_checkpoint(text)
    with pytest.raises(GnnperfError, match="is not a gnnperf predictor checkpoint"):
        Predictor.from_checkpoint(other)
    truncated = tmp_path / "cut.ckpt"
    truncated.write_bytes(SHIPPED_CHECKPOINT.read_bytes()[:4096])
    with pytest.raises(GnnperfError, match="not a PyTorch checkpoint or truncated"):
        Predictor.from_checkpoint(truncated)


def test_a_workload_it_never_learned_is_named():
    predictor = Predictor.from_checkpoint(None)  # its data has no fp64 rows (MODEL_CARD.md)
    queries = [Query("torchvision:resnet18", "t4", 8, precision=p, num_devices=2) for p in ("fp16", "fp64")]
    fp16, fp64 = predictor.predict(queries)
    assert fp16["unlearned_workload"] == []  # two devices: learned from the DataParallel rows
    assert fp64["unlearned_workload"] == ["precision=fp64"]
    (eight,) = predictor.predict(Query("torchvision:resnet18", "t4", 8, precision="fp16", num_devices=8))
    assert eight["outside_training_range"] == [
        "num_devices=8 (trained 1..4)"
    ]  # DataParallel rows had 1-4 GPUs
    assert fp16["outside_training_range"] == []
    # its CPU rows are all NCHW fp32: channels-last on a CPU is named, on a GPU it is not
    cpu_file = ROOT / "datasets" / "cpu" / "hardware" / "cpu-intel-xeon-1t.json"
    nhwc = Query("torchvision:resnet18", "cpu-intel-xeon-1t", 8, memory_format="channels_last")
    (cpu,) = predictor.predict(nhwc, hardware_file=cpu_file)
    assert cpu["unseen_on_device_kind"] == [
        "memory_format=channels_last (a cpu in training had only: contiguous)"
    ]
    nhwc = replace(nhwc, hardware="t4", precision="amp_fp16")  # as timm's channels-last training rows
    gpu, fp32, infer = predictor.predict([nhwc, replace(nhwc, precision="fp32"), replace(nhwc, mode="infer")])
    assert gpu["unseen_on_device_kind"] == [] and gpu["unseen_combination"] == []
    # ... but its GPU rows had channels-last only in AMP fp16 training steps
    assert fp32["unseen_combination"] == ["precision=fp32 + memory_format=channels_last"]
    assert "mode=infer + memory_format=channels_last" in infer["unseen_combination"]


def test_a_workload_never_measured_on_a_training_device_is_named():
    predictor = Predictor.from_checkpoint(None)
    step = Query(
        "timm:resnet50", "rtx-4090", 64, precision="amp_fp16"
    )  # its RTX 4090 rows are inference only
    rtx4090, rtx3090, fp32 = predictor.predict(
        [step, replace(step, hardware="rtx-3090"), replace(step, hardware="rtx-3090", precision="fp32")]
    )
    assert rtx4090["hardware_seen_in_training"] and rtx4090["unseen_on_device"] == [
        "mode=train (rtx-4090 had only: infer)",
        "timed=fwd+bwd+opt (rtx-4090 had only: fwd)",
        "optimizer=sgd (rtx-4090 had only: none)",
    ]
    assert rtx3090["unseen_on_device"] == []  # timm's training table
    assert fp32["unseen_on_device"] == ["precision=fp32 (rtx-3090 had only: amp_fp16)"]


def test_a_precision_the_device_has_no_rate_for_is_named(capsys):
    from gnnperf.cli import main

    predictor = Predictor.from_checkpoint(None)
    query = Query("torchvision:resnet18", "titan-xp", 8, precision="amp_fp16")
    rows = predictor.predict(
        [query, replace(query, precision="fp32"), replace(query, hardware="a100-sxm4-40gb")]
    )
    assert [r["priced_at_fp32_peak"] for r in rows] == [True, False, False]
    (bf16,) = predictor.predict(replace(query, hardware="t4", precision="amp_bf16"))  # Turing: no BF16 rate
    assert bf16["priced_at_fp32_peak"]
    argv = [
        "predict",
        "torchvision:resnet18",
        "--hardware",
        "titan-xp",
        "--precision",
        "fp16",
        "--batch-size",
        "8",
    ]
    assert main(argv) == 0
    assert (
        "titan-xp has no fp16 rate of its own in the hardware table: priced at its FP32 peak"
        in capsys.readouterr().out
    )


def test_bf16_at_the_fp16_rate_and_optimizers_few_or_no_gpu_rows_had_are_named(capsys):
    from gnnperf.cli import main

    predictor = Predictor.from_checkpoint(None)
    step = Query("timm:resnet50", "h100-sxm", 64, precision="amp_fp16")
    fp16, bf16, adam, adamw = predictor.predict(
        [
            step,
            replace(step, precision="amp_bf16"),
            replace(step, optimizer="adam"),
            replace(step, optimizer="adamw"),
        ]
    )
    # a handful of bf16 training rows, all on the H200: predicted as the AMP fp16 step, as asked in the row
    assert (bf16["precision"], bf16["precision_predicted_as"]) == ("amp_bf16", "amp_fp16")
    assert bf16["iteration_time_ms"] == fp16["iteration_time_ms"]
    assert adam["unseen_on_device_kind"] == ["optimizer=adam (a gpu in training had only: adamw, none, sgd)"]
    assert [f.split(" (")[0] for f in adamw["thin_on_device_kind"]] == ["optimizer=adamw"]
    argv = [
        "predict",
        "timm:resnet50",
        "--hardware",
        "h100-sxm",
        "--batch-size",
        "64",
        "--precision",
        "amp_bf16",
    ]
    assert main(argv) == 0
    assert "amp_bf16: bf16 at the device's fp16 rate, and barely seen in training" in capsys.readouterr().out


def test_predict_says_whether_the_training_step_fits_in_the_device_memory():
    cmd = [sys.executable, "-m", "gnnperf.cli", "predict", "timm:resnet50", "--hardware", "rtx-3090"]
    fits = subprocess.run(
        [*cmd, "--batch-size", "64", "--precision", "amp_fp16", "--max-batch", "--json"],
        capture_output=True,
        text=True,
    )
    assert fits.returncode == 0, fits.stderr
    memory = json.loads(fits.stdout)["memory"]
    assert memory["fits"] and memory["device_memory_gb"] == 24
    assert memory["activations_mb"] > memory["weights_mb"] > 0
    assert memory["largest_batch"] > 64  # the step at 64 fits
    too_big = subprocess.run(
        [*cmd, "--batch-size", "4096", "--precision", "amp_fp16"], capture_output=True, text=True
    )
    assert too_big.returncode == 0, too_big.stderr  # still predicted, and the user is told
    assert "does NOT fit" in too_big.stdout
    infer = subprocess.run(
        [*cmd, "--batch-size", "64", "--mode", "infer", "--max-batch", "--json"],
        capture_output=True,
        text=True,
    )
    memory = json.loads(infer.stdout)["memory"]  # an inference step: the weights and the forward pass's peak
    assert memory["peak_at"] == "forward" and memory["fits"] and memory["largest_batch"] > 64
    infer = subprocess.run([*cmd, "--batch-size", "64", "--mode", "infer"], capture_output=True, text=True)
    assert "per device in the forward pass (tensors" in infer.stdout
    cpu = subprocess.run(  # no memory size of a CPU's to check against: asked for, and told why not
        [*cmd[:-1], "cpu-intel-xeon-1t", "--batch-size", "8", "--max-batch", "--json"],
        capture_output=True,
        text=True,
    )
    row = json.loads(cpu.stdout)
    assert row["memory"] is None and "a GPU whose memory size is known" in row["memory_note"]


def test_a_step_with_more_weights_than_activations_peaks_after_the_backward_pass(capsys):
    from gnnperf.cli import main

    mlp = "zoo:mlp?activation=relu&depth=6&dropout=0.0&in_features=256&norm=layer&num_classes=100&width=4096"
    args = ["predict", mlp, "--hardware", "t4", "--batch-size", "8", "--input-shape", "256"]
    assert main([*args, "--optimizer", "adamw"]) == 0
    assert (
        "at the optimizer update (the gradients 0.3 and the update's temporaries 0.3;"
        in capsys.readouterr().out
    )
    assert main([*args, "--optimizer", "sgd", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memory"]["peak_at"] == "backward"
    gpt = "hf:gpt2?class=GPT2LMHeadModel&n_layer=1&n_embd=64&n_head=2&vocab_size=20000"  # its head is its embedding
    assert main(["predict", gpt, "--hardware", "t4", "--batch-size", "1", "--input-shape", "8"]) == 0
    assert (
        "at the end of the backward pass (the gradients 0.0 and a tied weight's two more 0.0;"
        in capsys.readouterr().out
    )


def test_an_hf_models_attention_is_named_and_fused_attention_keeps_no_attention_matrix(capsys):
    from gnnperf.cli import main
    from gnnperf.predictor.notes import EAGER_ATTENTION_NOTE

    gpt = "hf:gpt2?class=GPT2LMHeadModel&n_layer=2&n_embd=64&n_head=4&n_positions=1024&vocab_size=500"
    args = ["--hardware", "t4", "--batch-size", "4", "--seq-len", "1024"]
    rows = {}
    for attention in ("eager", "sdpa"):
        assert main(["predict", f"{gpt}&attn_implementation={attention}", *args, "--json"]) == 0
        rows[attention] = json.loads(capsys.readouterr().out)
    eager, sdpa = rows["eager"]["memory"], rows["sdpa"]["memory"]
    assert (eager["attention"], sdpa["attention"]) == ("eager", "sdpa")
    # eager attention keeps at least each layer's softmax output: 4 samples x 4 heads x 1024^2 tokens x 4 bytes
    assert eager["activations_mb"] - sdpa["activations_mb"] > 2 * 64
    assert rows["eager"]["assumptions"] == []
    # one time graph; the sdpa model's attention ops priced as the fused kernel in place of the eager ops
    fused = rows["sdpa"]["fused_attention"]
    # composed from the network's eager step, before the update floor the eager row's SGD step may get
    eager_row = rows["eager"]  # unfloored_ms is there only when the update floor applied
    network_eager = eager_row.get("unfloored_ms", eager_row["iteration_time_ms"])
    assert fused["eager_step_ms"] == network_eager and fused["causal"]
    assert 0 < fused["fused_ms"] < fused["eager_ms"] < fused["eager_step_ms"]
    saved = fused["eager_ms"] - fused["fused_ms"]
    assert rows["sdpa"]["iteration_time_ms"] == pytest.approx(fused["eager_step_ms"] - saved)
    assert "fused_attention" not in rows["eager"]
    assert main(["predict", f"{gpt}&attn_implementation=eager", *args]) == 0
    assert EAGER_ATTENTION_NOTE in capsys.readouterr().out
    # the reference without the option: transformers' default, sdpa (GPT-2's class has it)
    assert main(["predict", gpt, *args, "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["memory"] == rows["sdpa"]["memory"] and default["fused_attention"] == fused
    assert default["iteration_time_ms"] == rows["sdpa"]["iteration_time_ms"]
    assert main(["predict", f"{gpt}&attn_implementation=sdpa", *args, "--breakdown", "3"]) == 0
    out = capsys.readouterr().out
    assert "attention as sdpa's fused kernel: " in out and "causal)" in out


def test_a_mixture_of_experts_is_predicted_and_what_it_assumes_is_said(capsys):
    from gnnperf.cli import main

    mixtral = (
        "hf:mixtral?num_hidden_layers=2&hidden_size=128&intermediate_size=256&num_attention_heads=4"
        "&num_key_value_heads=2&vocab_size=1000&num_local_experts=8"
    )
    args = ["predict", mixtral, "--hardware", "t4", "--batch-size", "2", "--seq-len", "64"]
    assert main([*args, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["iteration_time_ms"] > 0 and row["memory"]["fits"]  # the routed experts traced, fp32 included
    # transformers' default attention for Mixtral, sdpa (causal), then what the reference itself assumes
    time, causal, experts, headless = row["assumptions"]
    assert (time, causal) == (SDPA_TIME, SDPA_CAUSAL)
    assert experts.startswith(
        "a mixture of 8 experts, 2 per token: traced with each expert taking an equal share"
    )
    # no class in the reference: the base model, and the class with the language-model head named
    assert headless.startswith("built as MixtralModel, the base model without a language-model head")
    assert headless.endswith("add class=MixtralForCausalLM for a language model's training step")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"  assumed: {experts}" in out and f"  assumed: {headless}" in out


def test_the_memory_estimate_from_python_is_the_clis():
    predictor = Predictor.from_checkpoint(None)
    query = Query("timm:resnet50", "rtx-3090", 64, precision="amp_fp16")
    memory = predictor.memory(query, max_batch=True)
    assert memory["fits"] and memory["largest_batch"] > 64
    cli = subprocess.run(
        [sys.executable, "-m", "gnnperf.cli", "predict", "timm:resnet50", "--hardware", "rtx-3090"]
        + ["--batch-size", "64", "--precision", "amp_fp16", "--max-batch", "--json"],
        capture_output=True,
        text=True,
    )
    assert json.loads(cli.stdout)["memory"] == memory
    # an inference step holds far less than a training step; no estimate for a CPU: None, not an error
    assert predictor.memory(replace(query, mode="infer"))["total_mb"] < memory["total_mb"]
    assert predictor.memory(replace(query, hardware="cpu-intel-xeon-1t", precision="fp32")) is None


def test_one_command_compares_devices_and_batch_sizes(capsys):
    from gnnperf.cli import main
    from gnnperf.hardware.table import load_table

    args = ["predict", "torchvision:resnet18", "--precision", "amp_fp16"]
    assert main([*args, "--hardware", "rtx-3090,h100-sxm", "--batch-size", "8,16", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["hardware"], r["batch_size"]) for r in rows] == [
        ("rtx-3090", 8), ("rtx-3090", 16), ("h100-sxm", 8), ("h100-sxm", 16)
    ]  # fmt: skip
    alone = Predictor.from_checkpoint(None).predict(
        Query("torchvision:resnet18", "h100-sxm", 16, precision="amp_fp16")
    )
    assert rows[3]["iteration_time_ms"] == pytest.approx(alone[0]["iteration_time_ms"])  # as if asked alone
    assert (
        rows[0]["memory"]["total_mb"] < rows[1]["memory"]["total_mb"]
    )  # the estimate follows the batch size

    assert (
        main(
            [
                "predict",
                "torchvision:resnet18",
                "timm:resnet18",
                "--hardware",
                "t4",
                "--batch-size",
                "8",
                "--json",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["model"] for r in rows] == [
        "torchvision:resnet18",
        "timm:resnet18",
    ]  # several models, one per line
    assert main([*args, "--hardware", "t4", "--batch-size", "8", "--num-devices", "1,2,4", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["num_devices"] for r in rows] == [1, 2, 4]  # and several device counts

    gpus = sorted(name for name, spec in load_table().items() if spec.kind == "gpu")
    assert main([*args, "--hardware", "all", "--batch-size", "8"]) == 0
    text = capsys.readouterr().out
    listed = [line.split() for line in text.splitlines() if line.split() and line.split()[0] in gpus]
    assert sorted(cells[0] for cells in listed) == gpus  # every GPU of the table, one line each
    ms = [float((cells[2] if cells[1] == "*" else cells[1]).replace(",", "")) for cells in listed]
    assert ms == sorted(ms)  # the fastest first
    assert "* no training rows: predicted from the data sheet" in text and "h100-sxm *" in text
    # 'all' in any case, beside other names (a trained-on CPU here), each device once
    assert main([*args, "--hardware", "t4,ALL,cpu-intel-xeon-1t", "--batch-size", "8", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r["hardware"] for r in rows) == sorted([*gpus, "cpu-intel-xeon-1t"])
    ms = [r["iteration_time_ms"] for r in rows]
    assert ms == sorted(ms)  # the JSON lines of a ranking in the table's order: the fastest first


@pytest.mark.parametrize(
    "bad, says",
    [
        (
            ["--hardware", "t4,l4", "--batch-size", "8", "--calibrate", "torchvision:resnet50", "8", "20"],
            "--calibrate",
        ),
        (["--hardware", "t4", "--batch-size", "8,16", "--breakdown", "3"], "--breakdown"),
        (
            ["timm:resnet18", "--hardware", "t4", "--batch-size", "8", "--measured-on", "l4", "20"],
            "one model",
        ),
        (["--hardware", "t4", "--batch-size", "8,16", "--measured-on", "l4", "20"], "one batch size"),
        (["--hardware", "t4", "--batch-size", "8,x"], "--batch-size '8,x'"),
        (["--hardware", "t4", "--batch-size", "8,0"], "between 1 and"),
        (["--hardware", "t4", "--batch-size", str(10**21)], "between 1 and"),
        (
            ["--hardware", "t4", "--batch-size", "8", "--num-devices", "1,2"]
            + ["--calibrate", "torchvision:resnet50", "8", "20"],
            "one --num-devices",
        ),
        (["--hardware", "t4", "--batch-size", "8", "--breakdown", "-3"], "--breakdown must be"),
        (["--hardware", "t4", "--batch-size", "8", "--seq-len", "0"], "--seq-len must be at least 1"),
        (["--hardware", "t4", "--batch-size", "8", "--checkpoint", ""], "--checkpoint is empty"),
        (
            ["--hardware", "cpu-i7-12700h", "--batch-size", "8", "--num-devices", "2"],
            "data-parallel devices are GPUs",
        ),
        (["--hardware", "t4", "--batch-size", "8", "--num-devices", "1,x"], "--num-devices '1,x'"),
        (["--hardware", "t4,nosuchgpu", "--batch-size", "8"], "unknown hardware 'nosuchgpu'"),
        # an empty item is a typo, not a value to skip
        (["--hardware", "t4", "--batch-size", "32,"], "--batch-size '32,'"),
        (["--hardware", "t4", "--batch-size", "32,,64"], "--batch-size '32,,64'"),
        (["--hardware", "t4,", "--batch-size", "8"], "--hardware 't4,'"),
        (["--hardware", "t4", "--batch-size", "8", "--input-shape="], "--input-shape is empty"),
        (["--hardware", "t4", "--batch-size", "8", "--epochs", "90"], "--epochs 90 needs --epoch-samples"),
        (
            ["--hardware", "t4", "--batch-size", "8", "--seq-len", "128"],
            "takes images: its input shape is 3 dims (channels, height, width)",
        ),
    ],
)
def test_a_comparison_that_cannot_be_made_is_one_error_line(bad, says, capsys):
    from gnnperf.cli import main

    assert main(["predict", "torchvision:resnet18", *bad]) == 2
    captured = capsys.readouterr()
    assert says in captured.err and len(captured.err.strip().splitlines()) == 1 and captured.out == ""


def test_channels_last_without_4d_tensors_is_predicted_as_the_contiguous_step(capsys):
    from gnnperf.cli import main

    predictor = Predictor.from_checkpoint(None)
    mlp, cnn = "zoo:mlp?depth=2&width=32&in_features=16", "torchvision:resnet18"
    rows = predictor.predict(
        [Query(m, "rtx-3090", 32, precision="amp_fp16", memory_format=f) for m in (mlp, cnn) for f in
         ("contiguous", "channels_last")]
    )  # fmt: skip
    mlp_nchw, mlp_nhwc, cnn_nchw, cnn_nhwc = rows
    # the harness converts 4-D/5-D inputs and weights only: an MLP's step is the same in both layouts
    assert mlp_nhwc["iteration_time_ms"] == mlp_nchw["iteration_time_ms"] and mlp_nhwc["channels_last_moot"]
    assert mlp_nhwc["memory_format"] == "channels_last"  # the row says what was asked
    assert (
        not cnn_nhwc["channels_last_moot"] and cnn_nhwc["iteration_time_ms"] != cnn_nchw["iteration_time_ms"]
    )
    assert (
        main(
            [
                "predict",
                mlp,
                "--hardware",
                "rtx-3090",
                "--batch-size",
                "32",
                "--memory-format",
                "channels_last",
            ]
        )
        == 0
    )
    assert "channels_last: no 4-D or 5-D input and no convolution" in capsys.readouterr().out


def test_a_timed_copy_never_timed_with_that_region_on_the_device_kind_is_named():
    predictor = Predictor.from_checkpoint(None)
    # the GPU rows timed the copy only without an optimizer step (the torchvision benchmark); CPUs never
    gpu, cpu = predictor.predict(
        [Query("torchvision:resnet18", hw, 8, h2d=True) for hw in ("t4", "cpu-i7-12700h")]
    )
    assert gpu["timed"] == "h2d+fwd+bwd+opt"
    assert [f.split(" ")[0] for f in gpu["unseen_on_device_kind"]] == ["timed=h2d+fwd+bwd+opt"]
    assert any(f.startswith("timed=h2d+fwd+bwd+opt") for f in cpu["unseen_on_device_kind"])


def test_predict_edge_cases_of_the_python_api(tmp_path):
    import torch

    predictor = Predictor.from_checkpoint(None)
    assert predictor.predict([]) == []
    with pytest.raises(GnnperfError, match="breakdown must be"):
        predictor.predict(Query("torchvision:resnet18", "t4", 8), breakdown=-2)
    with pytest.raises(GnnperfError, match="positive number of ms"):
        predictor.transfer(Query("torchvision:resnet18", "t4", 8), "l4", True)
    # a Lightning checkpoint of a training run has no interval or training record: not a predictor
    raw = torch.load(SHIPPED_CHECKPOINT, map_location="cpu", weights_only=True)
    del raw["gnnperf"]
    torch.save(raw, tmp_path / "best.ckpt")
    with pytest.raises(GnnperfError, match="Lightning checkpoint of a training run"):
        Predictor.from_checkpoint(tmp_path / "best.ckpt")


def test_aliases_of_one_device_are_one_row(capsys):
    from gnnperf.cli import main

    argv = ["predict", "torchvision:resnet18", "--hardware", "P4,p4,Tesla P4", "--batch-size", "8", "--json"]
    assert main(argv) == 0
    assert [json.loads(line)["hardware"] for line in capsys.readouterr().out.splitlines()] == ["p4"]


def test_fsdp_shards_the_memory_and_adds_the_collectives_its_passes_do_not_hide(capsys):
    from gnnperf.cli import main

    predictor = Predictor.from_checkpoint(None)
    ref = "hf:gpt2?class=GPT2LMHeadModel&n_layer=4&n_embd=256&n_head=4&vocab_size=8000"
    one = Query(ref, "a100-sxm4-80gb", 8, input_shape=(128,), precision="amp_bf16", optimizer="adamw")
    fsdp = replace(one, num_devices=4, parallel="fsdp")
    (alone, row) = predictor.predict([one, fsdp])
    assert row["fsdp"]["step_ms"] == pytest.approx(alone["iteration_time_ms"])  # the network saw one device
    f = row["fsdp"]  # AdamW's update on a quarter of the weights: at least 3/4 of its least time saved
    assert row["iteration_time_ms"] == pytest.approx(
        alone["iteration_time_ms"] - f["sharded_update_saves_ms"] + f["exposed_ms"]
    )
    assert f["all_gather_ms"] > 0 and f["exposed_ms"] >= 0 and f["sharded_update_saves_ms"] > 0
    memory, single = predictor.memory(fsdp), predictor.memory(one)
    # a quarter of the weights (buffers aside), gradients and optimizer state; the root's weights gathered whole
    assert memory["optimizer_mb"] == pytest.approx(single["optimizer_mb"] / 4)
    assert memory["gradients_mb"] == pytest.approx(single["gradients_mb"] / 4)
    assert memory["fsdp"]["units"] == 4 and memory["fsdp"]["root_mb"] > memory["fsdp"]["largest_unit_mb"] > 0
    assert memory["total_mb"] < single["total_mb"]

    args = ["predict", ref, "--batch-size", "8", "--seq-len", "128", "--hardware", "a100-sxm4-80gb"]
    assert main([*args, "--num-devices", "4", "--parallel", "fsdp"]) == 0
    out = capsys.readouterr().out
    assert "fully sharded (FSDP2, each repeated block a unit)" in out and "nvlink3-600gbs" in out
    assert "sharded over 4 devices: weights, gradients and optimizer state a shard each" in out


def test_fsdp_mixed_precision_gathers_in_the_passes_type_over_fp32_shards(capsys):
    from gnnperf.cli import main

    predictor = Predictor.from_checkpoint(None)
    ref = "hf:gpt2?class=GPT2LMHeadModel&n_layer=4&n_embd=256&n_head=4&vocab_size=8000"
    fp32 = Query(
        ref, "a100-sxm4-80gb", 8, input_shape=(128,), optimizer="adamw", num_devices=4, parallel="fsdp"
    )
    mixed = replace(fp32, fsdp_param_dtype="bf16")
    (whole, row) = predictor.predict([fp32, mixed])
    (bf16_step,) = predictor.predict(replace(mixed, fsdp_param_dtype=None, precision="bf16", num_devices=1))
    assert row["fsdp"]["step_ms"] == pytest.approx(bf16_step["iteration_time_ms"])  # the passes in bf16
    assert row["precision"] == "fp32" and row["fsdp_param_dtype"] == "bf16"
    # the weights gathered in bf16, the gradients reduce-scattered in fp32
    assert row["fsdp"]["all_gather_ms"] == pytest.approx(whole["fsdp"]["all_gather_ms"] / 2)
    assert row["fsdp"]["reduce_scatter_ms"] == pytest.approx(whole["fsdp"]["reduce_scatter_ms"])
    memory, sharded = predictor.memory(mixed), predictor.memory(fp32)
    for held in ("weights_mb", "gradients_mb", "optimizer_mb"):  # fp32 shards either way (buffers aside)
        assert memory[held] == pytest.approx(sharded[held], rel=0.01)
    assert memory["activations_mb"] < sharded["activations_mb"]
    assert memory["fsdp"]["root_mb"] == pytest.approx(sharded["fsdp"]["root_mb"] / 2)
    with pytest.raises(GnnperfError, match="needs --parallel fsdp, --precision fp32"):
        replace(mixed, precision="amp_bf16")
    # the blocks' weights kept from the forward pass to the backward pass: one all-gather, more memory
    kept = replace(fp32, fsdp_reshard_after_forward=False)
    (row,) = predictor.predict(kept)
    assert not row["fsdp"]["reshard_after_forward"] and whole["fsdp"]["reshard_after_forward"]
    assert row["fsdp"]["exposed_ms"] <= whole["fsdp"]["exposed_ms"]
    assert predictor.memory(kept)["total_mb"] > sharded["total_mb"]
    with pytest.raises(GnnperfError, match="--parallel fsdp"):
        replace(kept, parallel="ddp")

    args = ["predict", ref, "--batch-size", "8", "--seq-len", "128", "--hardware", "a100-sxm4-80gb"]
    assert main([*args, "--num-devices", "4", "--parallel", "fsdp", "--fsdp-param-dtype", "bf16"]) == 0
    assert "mixed precision: the passes and the gathers in bf16, fp32 shards" in capsys.readouterr().out
    assert main([*args, "--num-devices", "4", "--parallel", "fsdp", "--fsdp-no-reshard"]) == 0
    assert (
        "the blocks' weights kept from the forward pass to the backward pass (one all-gather)"
        in capsys.readouterr().out
    )


def test_a_reference_calibrates_at_the_input_size_given_when_it_takes_that_kind_of_input(capsys):
    from gnnperf.cli import main

    args = ["predict", "timm:resnet18", "--hardware", "t4", "--batch-size", "8", "--input-shape", "3,160,160"]
    # the model timed at this very workload: the prediction is the measurement
    assert main([*args, "--calibrate", "timm:resnet18", "8", "5.0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["iteration_time_ms"] == pytest.approx(5.0, rel=1e-4)
    # a reference of another input kind (vectors) is predicted at its own default size, not at 3,160,160
    assert main([*args, "--calibrate", "zoo:mlp?depth=2&width=32&in_features=16", "8", "5.0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["calibration_factor"] > 0


def test_ddp_is_one_devices_predicted_step_plus_the_all_reduce_it_does_not_hide(capsys):
    from gnnperf.cli import main

    predictor = Predictor.from_checkpoint(None)
    one = Query("timm:resnet50", "a100-pcie-80gb", 64, precision="amp_fp16")
    ddp = replace(one, num_devices=8, parallel="ddp")
    (alone, row) = predictor.predict([one, ddp])
    assert alone["parallel"] == "dp" and "ddp" not in alone
    assert row["parallel"] == "ddp" and row["num_devices"] == 8
    assert row["ddp"]["step_ms"] == pytest.approx(alone["iteration_time_ms"])  # the network saw one device
    exposed = row["ddp"]["exposed_allreduce_ms"]
    assert 0 < exposed <= row["ddp"]["allreduce_ms"]
    assert row["iteration_time_ms"] == pytest.approx(alone["iteration_time_ms"] + exposed)
    assert row["interval_ms"] == pytest.approx([v + exposed for v in alone["interval_ms"]])
    assert not row["outside_training_range"]  # one device's step: no device count beyond the trained 1..4
    (sixteen,) = predictor.predict(
        replace(ddp, num_devices=16)
    )  # two 8-GPU machines: the network is not priced
    assert sixteen["ddp"]["beyond_one_machine"] and not row["ddp"]["beyond_one_machine"]
    # DDP's buckets are a second copy of the gradients on each device
    memory, single = predictor.memory(ddp), predictor.memory(one)
    assert memory["ddp_buckets_mb"] == single["gradients_mb"] > 0 and single["ddp_buckets_mb"] == 0
    assert memory["total_mb"] == pytest.approx(single["total_mb"] + single["gradients_mb"])
    # as views into the buckets (gradient_as_bucket_view=True): no copy, every gradient held from the start
    views = predictor.memory(replace(ddp, ddp_bucket_view=True))
    assert views["ddp_buckets_mb"] == 0 and single["total_mb"] <= views["total_mb"] < memory["total_mb"]

    args = ["predict", "timm:resnet50", "--batch-size", "64", "--precision", "amp_fp16", "--num-devices", "4"]
    assert main([*args, "--hardware", "a100-pcie-80gb"]) == 0
    assert "torch.nn.DataParallel (one process scattering each batch)" in capsys.readouterr().out
    assert main([*args, "--hardware", "a100-pcie-80gb", "--parallel", "ddp"]) == 0
    out = capsys.readouterr().out
    assert "DistributedDataParallel: one device's predicted step" in out and "pcie4x16" in out
    assert "weights + DDP buckets + optimizer" in out
    assert main([*args, "--hardware", "a100-pcie-80gb", "--parallel", "ddp", "--ddp-bucket-view"]) == 0
    assert "DDP buckets" not in capsys.readouterr().out
    # a device whose entry gives no GPU-to-GPU bandwidth: one error line; left out of a ranking of every GPU
    assert main([*args, "--hardware", "gh200", "--parallel", "ddp"]) == 2
    assert "gh200: interconnect 'nvlink-c2c-900gbs' gives no GPU-to-GPU bandwidth" in capsys.readouterr().err
    (gh200,) = predictor.predict(replace(ddp, hardware="gh200", num_devices=1))  # one GPU all-reduces nothing
    assert "ddp" not in gh200 and gh200["num_devices"] == 1
    assert main([*args, "--hardware", "all", "--parallel", "ddp", "--json"]) == 0
    out, err = capsys.readouterr()
    ranked = {json.loads(line)["hardware"] for line in out.splitlines()}
    assert "h100-sxm" in ranked and not {"gh200", "mi250"} & ranked
    assert "left out: gh200, intel-max-1550, mi250, mi250-gcd" in err


def test_across_machines_the_collectives_run_at_the_slower_of_the_gpus_link_and_the_network(capsys):
    from gnnperf.cli import main

    predictor = Predictor.from_checkpoint(None)
    one = Query("timm:resnet50", "a100-sxm4-80gb", 64, precision="amp_fp16", optimizer="sgd", parallel="ddp")
    inside, unpriced, slow, fast = predictor.predict(
        [
            replace(one, num_devices=8),
            replace(one, num_devices=64),
            replace(one, num_devices=64, network="1x100gbit"),
            replace(one, num_devices=64, network="8x400gbit"),
        ]
    )
    assert (inside["ddp"]["machines"], inside["ddp"]["beyond_one_machine"], inside["ddp"]["network"]) == (
        1,
        False,
        None,
    )
    assert unpriced["ddp"]["machines"] == 8 and unpriced["ddp"]["network"] is None  # the link alone, said so
    assert unpriced["ddp"]["allreduce_gbs"] == fast["ddp"]["allreduce_gbs"] == inside["ddp"]["allreduce_gbs"]
    assert fast["ddp"]["bandwidth_bound"] == "link" and slow["ddp"]["bandwidth_bound"] == "network"
    assert slow["ddp"]["allreduce_gbs"] == pytest.approx(11.25)
    assert slow["ddp"]["allreduce_ms"] > 20 * fast["ddp"]["allreduce_ms"]
    assert slow["iteration_time_ms"] > fast["iteration_time_ms"] >= inside["iteration_time_ms"]
    # FSDP's gathers and reduce-scatter cross the same network
    gpt2 = Query("hf:gpt2", "h100-sxm", 8, input_shape=(512,), precision="amp_bf16", optimizer="adamw")
    sharded = replace(gpt2, parallel="fsdp", num_devices=16, gpus_per_machine=4, network="25gbs")
    (row,) = predictor.predict(sharded)
    assert (row["fsdp"]["machines"], row["fsdp"]["link_gbs"], row["fsdp"]["bandwidth_bound"]) == (
        4,
        25.0,
        "network",
    )

    # hybrid: sharded inside each machine, the gradient shards all-reduced across them over the network
    (hybrid,) = predictor.predict(replace(sharded, fsdp_shard_devices=4))
    h = hybrid["fsdp"]
    assert (h["shard_devices"], h["replicas"], h["bandwidth_bound"], h["replicate_bound"]) == (
        4,
        4,
        "link",
        "network",
    )
    assert h["replicate_gbs"] == pytest.approx(25.0 / 4) and h["replicate_allreduce_ms"] > 0
    assert predictor.memory(replace(sharded, fsdp_shard_devices=4))["fsdp"]["devices"] == 4

    args = ["predict", "timm:resnet50", "--hardware", "a100-sxm4-80gb", "--batch-size", "64", "--precision"]
    args += ["amp_fp16", "--parallel", "ddp", "--num-devices", "64"]
    assert main(args) == 0
    assert "the GPUs span 8 machines of 8, whose network is not priced" in capsys.readouterr().out
    assert main([*args, "--network", "1x100gbit", "--gpus-per-machine", "4"]) == 0
    out = capsys.readouterr().out
    assert "span 16 machines of 4, over a network of 1x100gbit (which bounds the rings)" in out
    assert "nvlink3-600gbs and 1x100gbit at 11 GB/s" in out
    assert main([*args, "--network", "fast"]) == 2
    assert capsys.readouterr().err.count("bad network 'fast'") == 1
    fsdp = [*args[:-4], "--parallel", "fsdp", "--num-devices", "64", "--fsdp-shard-devices", "8"]
    assert main([*fsdp, "--network", "8x400gbit"]) == 0
    out = capsys.readouterr().out
    assert "hybrid: sharded over groups of 8, replicated 8 times" in out
    assert (
        "over a network of 8x400gbit (which bounds the rings)" in out
    )  # the replicas' 45 GB/s, not NVLink's
    assert main([*fsdp[:-1], "12"]) == 2
    assert "bad fsdp_shard_devices 12" in capsys.readouterr().err
    # one GPU a machine (GH200 nodes, whose NVLink-C2C is no peer link): the network alone
    gh200 = ["--hardware", "gh200", "--gpus-per-machine", "1", "--network", "1x400gbit"]
    assert main([*args[:2], *args[4:], *gh200]) == 0
    assert "a ring over 1x400gbit at 45 GB/s" in capsys.readouterr().out
    assert main(args[:-4] + ["--num-devices", "16"]) == 2  # DataParallel, one process: one machine's GPUs
    assert "DataParallel runs in one process on one machine" in capsys.readouterr().err


def test_a_step_with_an_optimizer_update_is_never_predicted_faster_than_without(capsys, monkeypatch):
    """A GPU step with an update is floored at the same step without one plus the update's least time.

    Whether the shipped network needs the floor for a given step depends on the checkpoint (v23 put GPT-2's SGD step on
    an A100 under the step without an update, v28 does not), so the least time is scaled up here until it binds. On a
    CPU, whose training rows all had an update, the step without one is the network's guess, so there is no floor.
    """
    import gnnperf.predictor.floors as floors_module
    from gnnperf.cli import main

    scale, least = 1000.0, floors_module.update_floor_ms
    monkeypatch.setattr(floors_module, "update_floor_ms", lambda *args: scale * least(*args))
    predictor = Predictor.from_checkpoint(None)
    step = Query("hf:gpt2?class=GPT2LMHeadModel", "a100-sxm4-40gb", 8, input_shape=(512,))
    bare = replace(step, optimizer="none", timed="fwd+bwd")
    raw, plain = predictor.predict([step, bare], update_floor=False)
    row, bare_row = predictor.predict([step, bare])
    assert not raw["floored_at_update"] and row["unfloored_ms"] == pytest.approx(raw["iteration_time_ms"])
    # GPT-2's 124M weights, 8 fp32 tensors' worth each, at the A100's 1,555 GB/s: 2.56 ms
    assert row["floored_at_update"] and row["update_least_ms"] / scale == pytest.approx(2.56, abs=0.01)
    assert row["iteration_time_ms"] == pytest.approx(bare_row["iteration_time_ms"] + row["update_least_ms"])
    assert not bare_row["floored_at_update"]
    assert bare_row["iteration_time_ms"] == pytest.approx(plain["iteration_time_ms"])
    on_cpu = [
        replace(q, hardware="cpu-intel-xeon-1t", batch_size=1)
        for q in (step, replace(step, optimizer="adamw"))
    ]
    assert predictor.predict(on_cpu) == predictor.predict(on_cpu, update_floor=False)
    argv = ["predict", "hf:gpt2?class=GPT2LMHeadModel", "--seq-len", "512", "--hardware", "a100-sxm4-40gb"]
    assert main([*argv, "--batch-size", "8"]) == 0
    assert "predicted faster with the optimizer update than without one" in capsys.readouterr().out


def test_a_dataparallel_step_is_never_predicted_faster_than_on_one_gpu(capsys, monkeypatch):
    """A DataParallel step on several GPUs is floored at the same step on one.

    Whether the shipped network puts a step on two GPUs under the step on one depends on the checkpoint (v23 did for
    GPT-2 on V100s, having learned device counts from CNNs only; v28 does not), so here the network's time of every
    multi-GPU step is halved until the floor binds.
    """
    import torch

    import gnnperf.predictor.model as model_module
    from gnnperf.cli import main

    devices = [name for name, _ in GRAPH_FEATURES].index("log2_devices")
    network = model_module.predict_samples

    def halved(model, items):
        ms, node_ms = network(model, items)
        several = torch.tensor([float(item.u[0, devices]) > 0 for item in items])
        return torch.where(several, ms / 2, ms), node_ms

    monkeypatch.setattr(model_module, "predict_samples", halved)
    predictor = Predictor.from_checkpoint(None)
    one = Query("hf:gpt2?class=GPT2LMHeadModel", "v100-pcie-32gb", 64, input_shape=(512,))
    two = replace(one, num_devices=2)
    (alone,) = predictor.predict(one)
    (raw,) = predictor.predict(two, device_floor=False, update_floor=False)
    (row,) = predictor.predict(two)  # at the one-GPU step as floored itself
    assert raw["iteration_time_ms"] < alone["iteration_time_ms"] and not raw["floored_at_one_device"]
    assert row["floored_at_one_device"] and row["iteration_time_ms"] == pytest.approx(
        alone["iteration_time_ms"]
    )
    assert row["unfloored_ms"] == pytest.approx(raw["iteration_time_ms"])
    assert not alone["floored_at_one_device"]
    args = ["predict", "hf:gpt2?class=GPT2LMHeadModel", "--seq-len", "512", "--hardware", "v100-pcie-32gb"]
    assert main([*args, "--batch-size", "64", "--num-devices", "2"]) == 0
    assert "predicted faster on several GPUs than on one" in capsys.readouterr().out


def test_gradient_accumulation_is_one_update_after_its_micro_batches_passes(capsys):
    from gnnperf.cli import main
    from gnnperf.predictor.optimizer_step import update_floor_ms
    from gnnperf.zoo.resolve import resolve

    predictor = Predictor.from_checkpoint(None)
    ref = "hf:gpt2?class=GPT2LMHeadModel&n_layer=4&n_embd=256&n_head=4&vocab_size=8000"
    one = Query(ref, "a100-sxm4-80gb", 8, input_shape=(128,), precision="amp_bf16", optimizer="adamw")
    bare = replace(one, optimizer="none", timed="fwd+bwd")
    accumulated = replace(one, grad_accum=4)
    alone, without, row = predictor.predict([one, bare, accumulated])
    acc = row["grad_accumulation"]
    assert acc["micro_batches"] == 4 and acc["one_pass_ms"] == pytest.approx(alone["iteration_time_ms"])
    # a pass without the update: the network's, at most the step less the update's least time
    weights = sum(p.numel() for p in resolve(ref).build().parameters())
    least = update_floor_ms(weights, "adamw", "amp_bf16", predictor.spec("a100-sxm4-80gb").mem_bandwidth_gbs)
    assert acc["pass_ms"] == pytest.approx(
        min(without["iteration_time_ms"], alone["iteration_time_ms"] - least)
    )
    assert acc["gradient_sum_ms"] > 0 and acc["recompute_ms"] == 0
    expected = alone["iteration_time_ms"] + 3 * (acc["pass_ms"] + acc["gradient_sum_ms"])
    assert row["iteration_time_ms"] == pytest.approx(expected)
    assert row["interval_ms"][1] / row["iteration_time_ms"] == pytest.approx(
        alone["interval_ms"][1] / alone["iteration_time_ms"]
    )
    # DDP all-reduces once, in the last pass
    (ddp,) = predictor.predict(replace(accumulated, num_devices=8, parallel="ddp"))
    assert ddp["iteration_time_ms"] == pytest.approx(
        row["iteration_time_ms"] + ddp["ddp"]["exposed_allreduce_ms"]
    )
    # every pass after the first holds all the gradients from its start: more memory, never less (and GPT-2's tied
    # embedding's two new gradients are summed beside the one held)
    memory, single = predictor.memory(accumulated), predictor.memory(one)
    most = single["total_mb"] + single["gradients_mb"] + single["tied_gradients_mb"] / 2
    assert single["total_mb"] < memory["total_mb"] <= most
    # fully sharded: every pass gathers the weights and reduce-scatters its gradients
    (fsdp,) = predictor.predict(replace(accumulated, num_devices=4, parallel="fsdp"))
    passes = fsdp["grad_accumulation"]
    assert passes["collectives_ms"] == pytest.approx(fsdp["fsdp"]["exposed_ms"])
    assert passes["gradient_sum_ms"] == pytest.approx(acc["gradient_sum_ms"] / 4)
    # the passes before the last unsynced: gathers alone, the whole gradients summed, every one held whole
    unsynced = replace(accumulated, num_devices=4, parallel="fsdp", fsdp_sync_every_pass=False)
    (no_sync,) = predictor.predict(unsynced)
    f = no_sync["fsdp"]
    assert not f["sync_every_pass"] and f["unsynced_pass_exposed_ms"] <= f["exposed_ms"]
    assert no_sync["grad_accumulation"]["collectives_ms"] == pytest.approx(f["unsynced_pass_exposed_ms"])
    assert no_sync["grad_accumulation"]["gradient_sum_ms"] == pytest.approx(acc["gradient_sum_ms"])
    # what a pass saves of the reduce-scatter not hidden, it spends summing whole gradients rather than shards
    saved = passes["collectives_ms"] - f["unsynced_pass_exposed_ms"]
    spent = acc["gradient_sum_ms"] - passes["gradient_sum_ms"]
    assert no_sync["iteration_time_ms"] == pytest.approx(fsdp["iteration_time_ms"] + 3 * (spent - saved))
    sharded, whole = (
        predictor.memory(replace(unsynced, fsdp_sync_every_pass=True)),
        predictor.memory(unsynced),
    )
    assert whole["total_mb"] > sharded["total_mb"]
    with pytest.raises(GnnperfError, match="--parallel fsdp and --grad-accum K > 1"):
        replace(unsynced, grad_accum=1)
    with pytest.raises(GnnperfError, match="needs a training step"):
        replace(accumulated, mode="infer", optimizer=None)

    # the ops are one pass's: the accumulated passes are composed on the network's step, not unattributed time
    (broken,) = predictor.predict(accumulated, breakdown=2)
    assert broken["breakdown_step_ms"] == pytest.approx(acc["one_pass_ms"])
    assert broken["breakdown_all_ops_ms"] <= broken["breakdown_step_ms"] < broken["iteration_time_ms"]

    args = ["predict", ref, "--batch-size", "8", "--seq-len", "128", "--hardware", "a100-sxm4-80gb"]
    assert main([*args, "--grad-accum", "4", "--breakdown", "2"]) == 0
    assert "composed on the network's step of" in capsys.readouterr().out
    no_sync = ["--grad-accum", "4", "--num-devices", "4", "--parallel", "fsdp", "--fsdp-no-sync"]
    assert main([*args, *no_sync]) == 0
    assert "the micro-batches before the last keep the gradients whole" in capsys.readouterr().out
    assert main([*args, "--fsdp-no-sync"]) == 2
    assert "--parallel fsdp and --grad-accum K > 1" in capsys.readouterr().err
    assert main([*args, "--grad-accum", "4", "--epoch-samples", "320"]) == 0
    out = capsys.readouterr().out
    assert (
        "batch 8 x 4 accumulated" in out and "gradients of 4 micro-batches summed before each update" in out
    )
    assert "epoch of 320 samples: 10 iterations" in out
    assert main([*args, "--grad-accum", "0"]) == 2
    assert "--grad-accum must be at least 1 micro-batch, got 0" in capsys.readouterr().err


def test_selective_checkpointing_recomputes_less_than_full_and_is_said(capsys):
    from gnnperf.cli import main

    llama = (
        "hf:llama?num_hidden_layers=2&hidden_size=64&intermediate_size=128&num_attention_heads=4"
        "&num_key_value_heads=2&vocab_size=100&attn_implementation=sdpa"
    )
    args = [
        "predict",
        llama,
        "--hardware",
        "a100-sxm4-40gb",
        "--batch-size",
        "2",
        "--seq-len",
        "64",
        "--json",
    ]
    rows = {}
    for policy in ("full", "selective"):
        assert main([*args, "--activation-checkpointing", policy]) == 0
        rows[policy] = json.loads(capsys.readouterr().out)
    full, selective = (rows[p]["activation_checkpointing"] for p in ("full", "selective"))
    assert selective["selective"] and not full["selective"]
    assert 0 < selective["recompute_ms"] < full["recompute_ms"]
    assert rows["full"]["memory"]["activations_mb"] < rows["selective"]["memory"]["activations_mb"]
    assert main(args[:-1] + ["--activation-checkpointing", "selective"]) == 0
    assert "selective activation checkpointing (by op) of 2 blocks: +" in capsys.readouterr().out
    with pytest.raises(GnnperfError, match="activation_checkpointing must be True, False or 'selective'"):
        Query(llama, "a100-sxm4-40gb", 2, activation_checkpointing="sometimes")
