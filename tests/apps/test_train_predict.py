"""gnnperf-train / gnnperf-eval / gnnperf predict end to end on a tiny handmade store (no timings asserted)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from gnnperf.apps import CONF_DIR
from gnnperf.apps.evaluate import evaluate
from gnnperf.apps.train import train
from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError
from gnnperf.eval.compare import read_predictions
from gnnperf.predict import Predictor, Query, epoch_estimate
from gnnperf.predictor.checkpoint import read_checkpoint
from gnnperf.predictor.interval import group_key
from gnnperf.zoo.resolve import resolve

ROOT = Path(CONF_DIR).parent
REFS = [
    ("zoo:mlp?depth=2&width=32&in_features=16", 1.0),
    ("zoo:mlp?depth=3&width=64&in_features=16", 2.0),
    ("zoo:resnet?depths=1,1&width=8&image_size=32&stem=cifar&num_classes=10", 4.0),
    ("zoo:resnet?depths=2,2&width=16&image_size=32&stem=cifar&num_classes=10", 9.0),
    ("zoo:vgg?depths=1,1&width=8&image_size=32&fc_width=16&num_classes=10", 3.0),
    ("zoo:vgg?depths=1,2&width=16&image_size=32&fc_width=16&num_classes=10", 6.0),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("store")
    rows = []
    for ref, scale in REFS:
        spec = resolve(ref)
        for batch in (2, 4, 8):
            for device, speed in (("rtx-3090", 1.0), ("a100-sxm4-40gb", 0.6)):
                rows.append(
                    {
                        "model_ref": spec.ref,
                        "family": spec.family,
                        "input_shape": ",".join(map(str, spec.input_shape(None))),
                        "batch_size": batch,
                        "mode": "train",
                        "precision": "fp32",
                        "optimizer": "sgd",
                        "timed": "fwd+bwd+opt",
                        "memory_format": "contiguous",
                        "num_devices": 1,
                        "hardware": device,
                        "software": "torch=test",
                        "iteration_time_ms": scale * speed * (1 + batch / 4),
                        "status": "ok",
                    }
                )
    SampleStore(root).write_shard(rows)
    return root


def cfg(name: str, store: Path, tmp: Path, *overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3", job_name="test"):
        return compose(
            config_name=name,
            overrides=[
                f"data.stores=[{store}]",
                f"data.root={tmp}/processed",
                f"data.graph_cache={tmp}/graphs",
                "data.batch_size=8",
                "trainer.max_epochs=2",
                *overrides,
            ],
            return_hydra_config=True,
        )


def _resolve_hydra_paths(c, out: Path):
    # outside @hydra.main there is no runtime output dir: point every ${hydra:runtime.output_dir} at tmp
    from omegaconf import open_dict

    with open_dict(c):
        c.hydra.runtime.output_dir = str(out)
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().set_config(c)
    return c


@pytest.fixture(scope="module")
def trained(store, tmp_path_factory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("train")
    c = _resolve_hydra_paths(
        cfg(
            "train",
            store,
            tmp,
            "experiment=quick",
            "trainer.max_epochs=2",
            "model.readout=additive",  # the readout with a per-op breakdown
            "split=holdout_model",
            "baselines=[flops,gbm]",
        ),
        tmp / "out",
    )
    metrics = train(c)
    return tmp / "out" / "predictor.ckpt", metrics


def test_train_returns_metrics_and_writes_a_predictor(trained):
    ckpt, metrics = trained
    assert ckpt.is_file()
    for key in ("val/mape", "test/mape", "test/spearman", "baseline/flops/mape", "baseline/gbm/mape"):
        assert key in metrics and metrics[key] == metrics[key]  # present and not NaN
    comparison = json.loads((ckpt.parent / "comparison.json").read_text())
    # this split tests a model with an op type no training model has: the network alone is reported beside
    assert set(comparison) == {"gnn", "gnn_no_fallback", "flops", "gbm"}
    assert read_checkpoint(ckpt)["gnnperf"]["metrics"] == json.loads(
        (ckpt.parent / "metrics.json").read_text()
    )
    preds = read_predictions(ckpt.parent)  # what the experiment scripts read back
    assert set(preds["predictor"]) == set(comparison)
    assert preds.groupby("predictor")["sample_id"].apply(frozenset).nunique() == 1  # same test rows for all
    assert (preds["pred_ms"] > 0).all() and (preds["true_ms"] > 0).all()
    with pytest.raises(GnnperfError, match="does not exist"):
        read_predictions(ckpt.parent / "missing")
    memory = json.loads((ckpt.parent / "memory.json").read_text())
    assert (
        memory["data_cache_entries"] > 0 and memory["data_cache_bytes"] > 0 and memory["peak_rss_bytes"] > 0
    )


def test_a_run_that_processes_the_dataset_trains_what_a_run_that_loads_it_does(store, tmp_path):
    """Processing exports the models (random weights, the global generators); training must not depend on it."""
    metrics = []
    for run in ("processes", "loads"):
        c = cfg(
            "train",
            store,
            tmp_path,
            "experiment=quick",
            "trainer.max_epochs=1",
            "baselines=[]",
            "plots=false",
        )
        metrics.append(train(_resolve_hydra_paths(c, tmp_path / run)))
    assert metrics[0]["test/mape"] == metrics[1]["test/mape"]


def test_opcost_readout_starts_from_the_opcost_baseline_fitted_on_the_train_split(store, tmp_path):
    """Its rates are the baseline's and stay so; with no correction it predicts what the baseline does."""
    import numpy as np
    import torch
    from hydra.utils import instantiate

    from gnnperf.baselines import get_baseline
    from gnnperf.eval.compare import baseline_data
    from gnnperf.predictor.module import PerfModule

    overrides = (
        "experiment=quick",
        "model.readout=opcost",
        "model.hardware_conditioning=false",
        "split=holdout_model",
    )
    c = _resolve_hydra_paths(
        cfg("train", store, tmp_path, *overrides, "baselines=[]", "plots=false"), tmp_path / "o"
    )
    train(c)
    dm = instantiate(c.data)
    dm.setup()
    baseline = get_baseline("opcost")().fit(baseline_data(dm, "train"))
    net = PerfModule.load(tmp_path / "o" / "predictor.ckpt").model.eval()
    readout = net.readout
    rates = torch.cat([readout.log_rates.flatten(), readout.log_overhead.view(1)]).exp().numpy()
    np.testing.assert_allclose(rates, np.maximum(baseline.coef, 1e-12), rtol=1e-4)
    # no correction: the readout is the op-class model alone
    torch.nn.init.zeros_(readout.pool.mlp[-1].weight)
    torch.nn.init.zeros_(readout.pool.mlp[-1].bias)
    test = dm.part("test")
    with torch.no_grad():
        pred = torch.cat([net(b)[0] for b in dm.test_dataloader()]).exp().numpy()
    np.testing.assert_allclose(pred, baseline.predict(baseline_data(dm, "test")), rtol=1e-3)
    assert len(pred) == len(test)
    # the checkpoint predicts an unseen model on a device only in the table, with a per-op breakdown
    (row,) = Predictor.from_checkpoint(tmp_path / "o" / "predictor.ckpt").predict(
        Query("zoo:mlp?depth=4&width=48&in_features=16", "h100-sxm", 4), breakdown=2
    )
    assert row["iteration_time_ms"] > 0 and len(row["breakdown"]) == 2


def test_predictor_from_checkpoint_predicts_unseen_model_and_device(trained):
    predictor = Predictor.from_checkpoint(trained[0])
    assert set(predictor.devices) == {"rtx-3090", "a100-sxm4-40gb"}
    rows = predictor.predict(
        [
            Query("zoo:resnet?depths=1,2&width=12&image_size=32&stem=cifar&num_classes=10", "rtx-3090", 16),
            Query("zoo:mlp?depth=4&width=48&in_features=16", "h100-sxm", 4),  # a device only in the table
        ],
        breakdown=3,
    )
    assert [r["hardware_seen_in_training"] for r in rows] == [True, False]
    # trained on batches 2-8 of one device: batch 16 is extrapolated and named, batch 4 is not
    assert predictor.info["trained_on"]["workload_range"] == {"batch_size": [2, 8], "num_devices": [1, 1]}
    assert [r["outside_training_range"] for r in rows] == [["batch_size=16 (trained 2..8)"], []]
    by_group = predictor.info["interval_log_ratio_by_group"]  # device, mode, precision with enough val rows
    for r in rows:
        # split-conformal quantiles of log(measured/predicted): the group's own, else every row's
        group = group_key(r["hardware"], r["mode"], r["precision"])
        q_lo, q_hi = by_group.get(group, predictor.info["interval_log_ratio"])
        assert r["interval_scope"] == ("group" if group in by_group else "pooled")
        lo, hi = r["interval_ms"]
        # the interval is the prediction scaled by the validation residual quantiles (it need not contain the
        # prediction when the model is biased)
        assert r["iteration_time_ms"] > 0 and 0 < lo <= hi
        assert lo == pytest.approx(r["iteration_time_ms"] * math.exp(q_lo), rel=1e-4)
        assert hi == pytest.approx(r["iteration_time_ms"] * math.exp(q_hi), rel=1e-4)
        assert len(r["breakdown"]) == 3
        # the listed ops, then every op, then the readout's per-iteration overhead make up the time
        assert sum(op["ms"] for op in r["breakdown"]) <= r["breakdown_all_ops_ms"] <= r["iteration_time_ms"]


def test_a_device_and_step_with_their_own_interval_print_it(trained, capsys):
    from gnnperf.predictor.report import print_row

    predictor = Predictor.from_checkpoint(trained[0])
    # this small run validates on too few rows per device: give one device's fp32 training steps their own
    predictor.info["interval_log_ratio_by_group"] = {"rtx-3090 train fp32": [-0.1, 0.2]}
    query = Query("zoo:mlp?depth=4&width=48&in_features=16", "rtx-3090", 4)
    own, *others = predictor.predict(
        [query, replace(query, hardware="a100-sxm4-40gb"), replace(query, precision="amp_fp16")]
    )
    assert own["interval_scope"] == "group" and [r["interval_scope"] for r in others] == ["pooled"] * 2
    other = others[0]
    ms = own["iteration_time_ms"]
    assert own["interval_ms"] == pytest.approx([ms * math.exp(-0.1), ms * math.exp(0.2)])
    assert other["interval_ms"] == pytest.approx([other["iteration_time_ms"] * math.exp(b)
                                                  for b in predictor.info["interval_log_ratio"]])  # fmt: skip
    print_row(own | {"memory": None})  # the CLI adds the memory estimate
    assert "ms, of rtx-3090's train fp32 rows)" in capsys.readouterr().out


def test_workload_values_seen_only_on_gpus_are_named_on_a_cpu(trained):
    predictor = Predictor.from_checkpoint(trained[0])
    seen = predictor.info["trained_on"]["workload_by_kind"]
    assert set(seen) == {"gpu"} and seen["gpu"]["mode"] == ["train"]
    query = Query("zoo:mlp?depth=4&width=48&in_features=16", "rtx-3090", 4)
    # a CPU record of this project's data
    cpu_spec = ROOT / "datasets" / "cpu" / "hardware" / "cpu-intel-xeon-1t.json"
    gpu, cpu = predictor.predict(
        [query, replace(query, hardware="cpu-intel-xeon-1t")], hardware_file=cpu_spec
    )
    assert gpu["unseen_on_device_kind"] == []
    assert cpu["unseen_on_device_kind"] == [
        f"{name}={cpu[name]} (no cpu in training)"
        for name in ("mode", "precision", "timed", "memory_format", "optimizer")
    ]
    # the fastest GPU row of the mode is recorded, and a faster prediction names it
    fastest = predictor.info["trained_on"]["fastest_ms"]["gpu"][gpu["mode"]][0]
    assert (gpu["faster_than_trained"] is not None) == (gpu["iteration_time_ms"] < fastest)
    assert cpu["faster_than_trained"] is None  # no CPU row to be faster than


def test_bf16_at_the_fp16_rate_is_predicted_as_the_fp16_step_and_reported_as_asked(trained):
    predictor = Predictor.from_checkpoint(trained[0])
    counts = predictor.info["trained_on"]["workload_counts_by_kind"]
    assert counts["gpu"]["precision"] == {"fp32": counts["gpu"]["mode"]["train"]}
    counts["gpu"]["precision"] |= {"amp_fp16": 500, "amp_bf16": 9}  # as the shipped predictor's GPU rows
    query = Query("zoo:mlp?depth=4&width=48&in_features=16", "a100-sxm4-40gb", 4, precision="amp_bf16")
    bf16, fp16 = predictor.predict([query, replace(query, precision="amp_fp16")])
    assert (bf16["precision"], bf16["precision_predicted_as"]) == ("amp_bf16", "amp_fp16")
    assert bf16["iteration_time_ms"] == fp16["iteration_time_ms"] and fp16["precision_predicted_as"] is None
    # the V100 has no bf16 rate: predicted as asked (priced at its FP32 peak, and flagged so)
    (v100,) = predictor.predict(replace(query, hardware="v100-sxm2-16gb"))
    assert v100["precision_predicted_as"] is None and v100["priced_at_fp32_peak"]


def test_a_hardware_file_that_gives_a_training_device_other_specs_is_refused(trained, tmp_path):
    predictor = Predictor.from_checkpoint(trained[0])
    record = dict(predictor.info["trained_on"]["hardware_specs"]["rtx-3090"])
    same, other = tmp_path / "same.json", tmp_path / "other.json"
    same.write_text(json.dumps(record))
    other.write_text(json.dumps({**record, "mem_bandwidth_gbs": 500.0}))
    query = Query("zoo:mlp?depth=4&width=48&in_features=16", "rtx-3090", 4)
    assert predictor.predict(query, hardware_file=same)[0]["hardware_seen_in_training"]
    # its learned embedding would be paired with the file's figures and the row would say "seen in training"
    with pytest.raises(GnnperfError, match=r"other specs \(mem_bandwidth_gbs 500.0 \(trained 936.0\)\)"):
        predictor.predict(query, hardware_file=other)


def test_a_training_step_of_a_model_without_parameters_is_refused(trained):
    predictor = Predictor.from_checkpoint(trained[0])
    query = Query("tests.graph.factories:parameter_free", "rtx-3090", 4, input_shape=(3, 8, 8))
    with pytest.raises(GnnperfError, match="no trainable parameters: a training step has nothing to learn"):
        predictor.predict(query)
    assert predictor.predict(replace(query, mode="infer"))[0]["iteration_time_ms"] > 0


def test_a_device_in_no_table_resolves_from_the_checkpoints_records(trained):
    predictor = Predictor.from_checkpoint(trained[0])
    records = predictor.info["trained_on"]["hardware_specs"]
    assert set(records) == set(predictor.devices)  # the spec each training device was trained with
    query = Query("zoo:mlp?depth=4&width=48&in_features=16", "cpu-intel-xeon-1t", 4)
    with pytest.raises(GnnperfError, match="unknown hardware 'cpu-intel-xeon-1t'"):
        predictor.predict(query)
    # as a checkpoint trained on this project's CPU store records it (the CPUs are in no table)
    cpu_spec = ROOT / "datasets" / "cpu" / "hardware" / "cpu-intel-xeon-1t.json"
    records["cpu-intel-xeon-1t"] = json.loads(cpu_spec.read_text())
    (row,) = predictor.predict(query)
    (from_file,) = predictor.predict(query, hardware_file=cpu_spec)
    assert row["hardware"] == "cpu-intel-xeon-1t"
    assert row["iteration_time_ms"] == from_file["iteration_time_ms"]


def test_a_device_of_the_data_without_training_rows_is_predicted_from_its_specs(trained):
    """As the held-out GPU of a leave-one-device-out checkpoint: in its device list, with no training rows."""
    predictor = Predictor.from_checkpoint(trained[0])
    trained_on = predictor.info["trained_on"]
    assert trained_on["devices"] == ["a100-sxm4-40gb", "rtx-3090"]  # holdout_model: both have training rows
    query = Query("zoo:mlp?depth=4&width=48&in_features=16", "a100-sxm4-40gb", 4)
    (seen,) = predictor.predict(query)
    assert seen["hardware_seen_in_training"] and predictor.device_index("a100-sxm4-40gb") >= 0
    trained_on["devices"] = ["rtx-3090"]
    (held_out,) = predictor.predict(query)
    assert not held_out["hardware_seen_in_training"] and predictor.device_index("a100-sxm4-40gb") == -1
    assert predictor.device_index("rtx-3090") == predictor.hparams["devices"].index("rtx-3090")
    # the A100's data sheet is beyond the one training device's on every rate it has
    assert "peak_fp16_tensor_tflops=312 (trained 71..71)" in held_out["hardware_outside_training_range"]


def test_values_seen_on_a_device_kind_but_never_together_are_named(trained):
    predictor = Predictor.from_checkpoint(trained[0])
    trained_on = predictor.info["trained_on"]
    assert trained_on["workload_combinations_by_kind"] == {
        "gpu": [["train", "fp32", "fwd+bwd+opt", "contiguous"]]
    }
    # as the shipped predictor's GPU rows: channels-last only in training steps, inference only NCHW
    trained_on["workload_by_kind"]["gpu"] = {
        "mode": ["infer", "train"],
        "precision": ["fp32"],
        "timed": ["fwd", "fwd+bwd+opt"],
        "memory_format": ["channels_last", "contiguous"],
    }
    trained_on["workload_combinations_by_kind"]["gpu"] = [
        ["train", "fp32", "fwd+bwd+opt", "contiguous"],
        ["train", "fp32", "fwd+bwd+opt", "channels_last"],
        ["infer", "fp32", "fwd", "contiguous"],
    ]
    # a convolution: channels_last changes its step (for an MLP it would be moot, predicted as contiguous)
    cnn = "tests.graph.factories:tiny_cnn"
    query = Query(cnn, "rtx-3090", 4, input_shape=(3, 8, 8), memory_format="channels_last")
    train_nhwc, infer_nhwc = predictor.predict([query, replace(query, mode="infer")])
    assert train_nhwc["unseen_combination"] == []
    # the smallest sets only: the two pairs, not the triple or all four that hold them
    assert infer_nhwc["unseen_combination"] == [
        "mode=infer + memory_format=channels_last",
        "timed=fwd + memory_format=channels_last",
    ]


def test_a_model_input_of_a_rank_no_training_graph_had_is_named(trained, capsys):
    from gnnperf.cli import main

    predictor = Predictor.from_checkpoint(trained[0])
    assert predictor.info["trained_on"]["input_ranks"] == [2, 4]  # the MLPs' vectors, the CNNs' images
    # an LSTM's (batch, time, features) sequences: 3-D
    mlp, lstm = predictor.predict(
        [
            Query("zoo:mlp?depth=4&width=48&in_features=16", "rtx-3090", 4),
            Query("zoo:lstm?seq_len=16&input_size=8&hidden_size=32&num_layers=1", "rtx-3090", 4),
        ]
    )
    assert mlp["unseen_input_rank"] is None
    assert lstm["unseen_input_rank"] == "3-D input (trained on 2-D, 4-D)"
    ref = "zoo:lstm?seq_len=16&input_size=8&hidden_size=32&num_layers=1"
    assert (
        main(["predict", ref, "--hardware", "rtx-3090", "--batch-size", "4", "--checkpoint", str(trained[0])])
        == 0
    )
    assert (
        "a model input of a rank no training graph had: 3-D input (trained on 2-D, 4-D)"
        in capsys.readouterr().out
    )


def test_op_types_unseen_in_training_lean_on_the_fallback_baseline(trained):
    predictor = Predictor.from_checkpoint(trained[0])
    assert predictor.fallback.name == "opcost"  # conf/train.yaml: unseen_op_fallback
    seen, lstm = predictor.predict(
        [
            Query("zoo:mlp?depth=4&width=48&in_features=16", "rtx-3090", 4),
            Query("zoo:lstm?seq_len=16&input_size=8&hidden_size=32&num_layers=1", "rtx-3090", 4),
        ]
    )
    assert seen["unseen_op_types"] == [] and "unseen_op_share" not in seen
    assert "LSTM" in lstm["unseen_op_types"]
    w, gnn_ms = lstm["unseen_op_share"], lstm["gnn_iteration_time_ms"]
    assert 0.5 < w <= 1.0  # the recurrent op carries most of the graph's work
    assert gnn_ms > 0 and lstm["iteration_time_ms"] != pytest.approx(gnn_ms)  # the blend (tests/predictor)


def test_predict_cli_json_and_errors(trained):
    ckpt = str(trained[0])
    run = [sys.executable, "-m", "gnnperf.cli", "predict", "zoo:mlp?depth=2&width=32&in_features=16"]
    workload = ["--num-devices", "2", "--h2d", "--memory-format", "channels_last", "--epoch-samples", "100"]
    ok = subprocess.run(
        [*run, "--hardware", "t4", "--batch-size", "8", "--checkpoint", ckpt, *workload, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert ok.returncode == 0, ok.stderr
    row = json.loads(ok.stdout)
    assert {"model", "hardware", "batch_size", "iteration_time_ms", "interval_ms"} <= set(row)
    assert (row["num_devices"], row["timed"], row["memory_format"]) == (2, "h2d+fwd+bwd+opt", "channels_last")
    # the training rows had one device and no timed copy: neither was learned; an MLP has no tensor for
    # channels_last to change, so it is predicted as the contiguous step (and the row says so)
    assert set(row["unlearned_workload"]) == {"h2d", "log2_devices"} and row["channels_last_moot"]
    assert row["outside_training_range"] == []  # one device in training: named by unlearned_workload alone
    assert row["epoch"]["iterations"] == 7  # ceil(100 / (8 x 2))
    assert row["epoch"]["time_s"] == pytest.approx(7 * row["iteration_time_ms"] / 1e3)
    assert row["epoch"]["epochs"] == 1 and row["epoch"]["run_time_s"] == row["epoch"]["time_s"]
    text = subprocess.run(
        [*run, "--hardware", "t4", "--batch-size", "64", "--checkpoint", ckpt, "--epoch-samples", "10000"]
        + ["--epochs", "90"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert text.returncode == 0, text.stderr
    assert "  run of 90 epochs: " in text.stdout
    assert (
        "outside this checkpoint's training range, extrapolated: batch_size=64 (trained 2..8)" in text.stdout
    )
    for bad in (
        ["--hardware", "nosuchgpu", "--checkpoint", ckpt],
        ["--hardware", "t4", "--checkpoint", "/no/such.ckpt"],
        ["--hardware", "t4", "--checkpoint", ckpt, "--num-devices", "0"],
        ["--hardware", "t4", "--checkpoint", ckpt, "--epoch-samples", "0"],
        ["--hardware", "t4", "--checkpoint", ckpt, "--epochs", "3"],  # without --epoch-samples
        ["--hardware", "t4", "--checkpoint", ckpt, "--epoch-samples", "100", "--epochs", "0"],
    ):
        res = subprocess.run([*run, "--batch-size", "8", *bad], capture_output=True, text=True, cwd=ROOT)
        assert (
            res.returncode == 2
            and "Traceback" not in res.stderr
            and len(res.stderr.strip().splitlines()) == 1
        )


def test_calibration_scales_its_device_and_workload_only(trained):
    predictor = Predictor.from_checkpoint(trained[0])
    ref = Query("zoo:mlp?depth=2&width=32&in_features=16", "t4", 8)
    other = Query("zoo:mlp?depth=4&width=48&in_features=16", "t4", 4)
    other_fp16 = Query(other.model, "t4", 4, precision="amp_fp16")
    other_2dev = Query(other.model, "t4", 4, num_devices=2)
    before = predictor.predict([ref, other, other_fp16, other_2dev], breakdown=2)
    measured = before[0]["iteration_time_ms"] * 3.0  # the device is 3x slower than predicted
    (factor,) = predictor.calibrate([(ref, measured)]).values()
    assert factor == pytest.approx(3.0, rel=1e-4)
    after = predictor.predict([ref, other, other_fp16, other_2dev], breakdown=2)
    assert after[0]["iteration_time_ms"] == pytest.approx(measured, rel=1e-4)
    assert after[1]["iteration_time_ms"] == pytest.approx(3.0 * before[1]["iteration_time_ms"], rel=1e-4)
    assert after[1]["interval_ms"][1] == pytest.approx(3.0 * before[1]["interval_ms"][1], rel=1e-4)
    assert after[1]["breakdown"][0]["ms"] == pytest.approx(3.0 * before[1]["breakdown"][0]["ms"], rel=1e-4)
    assert after[2] == before[2] and "calibration_factor" not in after[2]  # another precision: untouched
    assert after[3] == before[3]  # data-parallel on two devices: another workload, untouched
    # trained on one device only: the device count was never learned, and the prediction says so
    assert before[3]["unlearned_workload"] == ["log2_devices"] and before[1]["unlearned_workload"] == []
    for bad in ([], [(ref, 0.0)], [(ref, float("nan"))]):
        with pytest.raises(GnnperfError, match="calibration needs measured times"):
            predictor.calibrate(bad)


def test_transfer_scales_the_target_by_the_measured_over_predicted_ratio_on_the_reference(trained):
    predictor = Predictor.from_checkpoint(trained[0])
    query = Query("zoo:mlp?depth=4&width=48&in_features=16", "a100-sxm4-40gb", 4)
    target, there = predictor.predict([query, Query(query.model, "t4", 4)], breakdown=2)
    measured = there["iteration_time_ms"] * 2.0  # the model runs 2x slower on the t4 than predicted
    row = predictor.transfer(query, "t4", measured, breakdown=2)
    assert row["transfer_factor"] == pytest.approx(2.0, rel=1e-4)
    assert row["iteration_time_ms"] == pytest.approx(2.0 * target["iteration_time_ms"], rel=1e-4)
    assert row["interval_ms"][0] == pytest.approx(2.0 * target["interval_ms"][0], rel=1e-4)
    assert row["breakdown"][0]["ms"] == pytest.approx(2.0 * target["breakdown"][0]["ms"], rel=1e-4)
    flags = row["measured_on"].pop("flags")
    assert row["measured_on"] == {
        "hardware": "t4",
        "ms": measured,
        "predicted_ms": there["iteration_time_ms"],
    }
    # the factor divides by the prediction on the reference: what that one extrapolated is named with it (the T4's
    # data sheet is below the training GPUs'; the device count was never learned)
    assert flags["hardware_outside_training_range"] == there["hardware_outside_training_range"] != []
    assert "unlearned_workload" not in flags
    two = predictor.transfer(replace(query, num_devices=2), "t4", measured)
    assert two["measured_on"]["flags"]["unlearned_workload"] == ["log2_devices"]
    same = predictor.transfer(Query(query.model, "t4", 4), "t4", 7.5)  # measured on the device asked about
    assert same["iteration_time_ms"] == pytest.approx(7.5, rel=1e-6)
    later = predictor.predict(query)[0]  # nothing is kept for later predictions
    assert "transfer_factor" not in later
    assert later["iteration_time_ms"] == pytest.approx(target["iteration_time_ms"], rel=1e-5)
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(GnnperfError, match="positive number of ms"):
            predictor.transfer(query, "t4", bad)


def test_predict_cli_transfers_from_a_measurement_on_another_device(trained):
    run = [sys.executable, "-m", "gnnperf.cli", "predict", "zoo:mlp?depth=4&width=48&in_features=16"]
    run += ["--hardware", "a100-sxm4-40gb", "--batch-size", "4", "--checkpoint", str(trained[0])]
    ok = subprocess.run(
        [*run, "--measured-on", "t4", "5.0", "--json"], capture_output=True, text=True, cwd=ROOT
    )
    assert ok.returncode == 0, ok.stderr
    row = json.loads(ok.stdout)
    assert row["measured_on"]["hardware"] == "t4" and row["measured_on"]["ms"] == 5.0
    python = Predictor.from_checkpoint(trained[0]).transfer(
        Query(row["model"], "a100-sxm4-40gb", 4), "t4", 5.0
    )
    assert row["iteration_time_ms"] == pytest.approx(python["iteration_time_ms"], rel=1e-5)
    calibrate = ["--calibrate", "zoo:mlp?depth=2&width=32&in_features=16", "8", "3.0"]
    for bad in (
        ["--measured-on", "t4", "fast"],
        ["--measured-on", "t5", "5"],
        ["--measured-on", "t4", "5", *calibrate],
    ):
        res = subprocess.run([*run, *bad], capture_output=True, text=True, cwd=ROOT)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_epoch_estimate_counts_iterations_over_every_device():
    row = {"batch_size": 32, "num_devices": 4, "iteration_time_ms": 250.0, "interval_ms": [200.0, 400.0]}
    epoch = epoch_estimate(row, 1000, epochs=90)  # 7.8 iterations of 128 samples: the last one counts as full
    assert epoch == {
        "samples": 1000,
        "iterations": 8,
        "time_s": 2.0,
        "interval_s": [1.6, 3.2],
        "epochs": 90,
        "run_time_s": 180.0,
        "run_interval_s": [pytest.approx(144.0), pytest.approx(288.0)],
    }
    assert epoch_estimate(row, 1000)["run_time_s"] == 2.0  # one epoch by default
    for bad in (0, -5, 2.5, True):
        with pytest.raises(GnnperfError, match="positive integer"):
            epoch_estimate(row, bad)
        with pytest.raises(GnnperfError, match="epochs must be a positive integer"):
            epoch_estimate(row, 1000, epochs=bad)


def test_predict_cli_calibrates_on_a_reference_measurement(trained):
    ckpt = str(trained[0])
    run = [sys.executable, "-m", "gnnperf.cli", "predict", "zoo:mlp?depth=4&width=48&in_features=16"]
    run += ["--hardware", "t4", "--batch-size", "4", "--checkpoint", ckpt, "--json"]
    ref = ["--calibrate", "zoo:mlp?depth=2&width=32&in_features=16", "8"]
    ok = subprocess.run([*run, *ref, "5.0"], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr
    row = json.loads(ok.stdout)
    assert row["calibration_factor"] > 0 and row["iteration_time_ms"] > 0
    for bad in ("fast", "-1"):
        res = subprocess.run([*run, *ref, bad], capture_output=True, text=True, cwd=ROOT)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_breakdown_needs_the_additive_readout(trained):
    from gnnperf.predictor.checkpoint import build_model

    additive = Predictor.from_checkpoint(trained[0])
    hparams = {**additive.hparams, "readout": "pooled"}
    pooled = Predictor(build_model(hparams).eval(), hparams, additive.info, additive.path)
    q = Query("zoo:mlp?depth=2&width=32&in_features=16", "t4", 4)
    assert pooled.predict(q)[0]["iteration_time_ms"] > 0
    with pytest.raises(GnnperfError, match="a readout with per-op terms"):
        pooled.predict(q, breakdown=2)


def test_mismatched_checkpoint_is_refused(trained, tmp_path):
    import torch

    ckpt = torch.load(trained[0], weights_only=True)
    ckpt["hyper_parameters"]["feature_version"] = 999
    bad = tmp_path / "bad.ckpt"
    torch.save(ckpt, bad)
    with pytest.raises(GnnperfError, match="FEATURE_VERSION"):
        Predictor.from_checkpoint(bad)
    from gnnperf.predictor.module import PerfModule  # what gnnperf-eval loads with

    with pytest.raises(GnnperfError, match="FEATURE_VERSION"):
        PerfModule.load(bad)
    text = tmp_path / "notes.ckpt"
    text.write_text("not a checkpoint\n")
    with pytest.raises(GnnperfError, match="not a PyTorch checkpoint or truncated") as info:
        PerfModule.load(text)
    assert "\n" not in str(info.value)  # one line, not torch's advice to load untrusted pickles


def test_evaluate_scores_the_checkpoint_beside_baselines(trained, store, tmp_path):
    c = _resolve_hydra_paths(
        cfg(
            "eval",
            store,
            tmp_path,
            f"checkpoint={trained[0]}",
            "split=holdout_model",
            "baselines=[flops]",
            "plots=false",
        ),
        tmp_path / "out",
    )
    metrics = evaluate(c)
    assert "gnn/mape" in metrics and "flops/mape" in metrics
    assert metrics["test_rows_seen_in_training"] == 0  # the split it was trained on: held out
    # the split it was trained on, so its interval's coverage is the one training recorded
    recorded = read_checkpoint(trained[0])["gnnperf"]["metrics"]["test/interval_coverage"]
    assert metrics["gnn/interval_coverage"] == pytest.approx(recorded)
    from gnnperf.predictor.module import PerfModule

    extras = PerfModule.load(trained[0]).extras  # evaluate applies the fallback stored there
    assert extras["unseen_op_fallback"]["name"] == "opcost"


def test_evaluate_says_when_its_test_rows_were_training_rows(trained, store, tmp_path, capsys):
    overrides = (
        f"checkpoint={trained[0]}",
        "split=holdout_model",
        "split.fold=2",
        "baselines=[]",
        "plots=false",
    )
    c = _resolve_hydra_paths(cfg("eval", store, tmp_path, *overrides), tmp_path / "out")
    # trained on fold 0: fold 2's test models were in its training part (fold 1's one model was its val model)
    metrics = evaluate(c)
    assert metrics["test_rows_seen_in_training"] > 0
    assert "test rows were training rows of this checkpoint" in capsys.readouterr().err
    # the same rows in a store of another name: counted by the sample ids the checkpoint lists
    import shutil

    import torch

    copy = tmp_path / "elsewhere"
    shutil.copytree(store, copy)
    c = _resolve_hydra_paths(cfg("eval", copy, tmp_path, *overrides), tmp_path / "out_copy")
    assert evaluate(c)["test_rows_seen_in_training"] == metrics["test_rows_seen_in_training"]
    # a checkpoint from before they were listed, on another store: not known, and said so
    old = torch.load(trained[0], weights_only=True)
    old["gnnperf"].pop("train_sample_ids")
    torch.save(old, tmp_path / "old.ckpt")
    capsys.readouterr()
    c = _resolve_hydra_paths(
        cfg("eval", copy, tmp_path, f"checkpoint={tmp_path / 'old.ckpt'}", *overrides[1:]),
        tmp_path / "out_old",
    )
    assert evaluate(c)["test_rows_seen_in_training"] is None
    assert "cannot tell which of the" in capsys.readouterr().err


def test_evaluate_refuses_lightnings_own_checkpoint(trained, store, tmp_path):
    import torch

    raw = torch.load(trained[0], map_location="cpu", weights_only=True)
    del raw["gnnperf"]  # what Lightning's ModelCheckpoint writes (checkpoints/best.ckpt)
    torch.save(raw, tmp_path / "best.ckpt")
    c = _resolve_hydra_paths(
        cfg(
            "eval",
            store,
            tmp_path,
            f"checkpoint={tmp_path / 'best.ckpt'}",
            "split=holdout_model",
            "baselines=[]",
        ),
        tmp_path / "out",
    )
    with pytest.raises(GnnperfError, match="Lightning checkpoint of a training run"):
        evaluate(c)


@pytest.mark.parametrize(
    "override, says",
    [
        ("trainer.max_epochs=0", "trainer.max_epochs: expected an integer of at least 1"),
        ("trainer.max_epochs=abc", "trainer.max_epochs: expected an integer"),
        ("model.optimizer.lr=-0.01", "positive learning rate"),
        ("baselines=[nope]", "unknown baseline 'nope'"),
        ("data.batch_size=0", "data.batch_size: expected an integer of at least 1"),
        ("model.hidden=abc", "model.hidden: expected an integer"),
        ("model.layers=0", "model.layers: expected an integer of at least 1"),
        ("model.dropout=abc", "model.dropout: expected a number"),
        ("model.dropout=1.5", "model.dropout: expected a rate in [0, 1)"),
    ],
)
def test_bad_training_values_fail_before_anything_is_fitted(store, tmp_path, override, says, capsys):
    from gnnperf.apps import user_errors

    c = _resolve_hydra_paths(cfg("train", store, tmp_path, "experiment=quick", override), tmp_path / "o")
    with pytest.raises(SystemExit) as ended, user_errors("gnnperf-train"):  # as the command runs it
        train(c)
    err = capsys.readouterr().err.strip().splitlines()
    assert ended.value.code == 2 and len(err) == 1 and says in err[0]
    assert not any(tmp_path.rglob("*.ckpt"))


def test_a_split_file_of_another_fold_is_refused(store, tmp_path):
    split_file = tmp_path / "split.json"
    for fold in (0, 1):
        c = _resolve_hydra_paths(
            cfg("train", store, tmp_path, "experiment=quick", "split=holdout_model", f"split.fold={fold}",
                f"data.split_file={split_file}", "trainer.max_epochs=1", "baselines=[]", "plots=false"),
            tmp_path / f"o{fold}",
        )  # fmt: skip
        if fold == 0:
            train(c)
        else:
            with pytest.raises(GnnperfError, match="saved for another split: fold 0 \\(this run: 1\\)"):
                train(c)


def test_empty_split_is_a_user_error(store, tmp_path):
    c = _resolve_hydra_paths(
        cfg("train", store, tmp_path, "experiment=quick", "split=holdout_hardware", "split.fold=5"),
        tmp_path / "o",
    )
    with pytest.raises(GnnperfError):
        train(c)


def test_bad_fallback_name_fails_before_training(store, tmp_path):
    c = _resolve_hydra_paths(
        cfg("train", store, tmp_path, "experiment=quick", "unseen_op_fallback=gbm"), tmp_path / "o"
    )
    with pytest.raises(GnnperfError, match="cannot be the fallback"):
        train(c)
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").rglob("*.ckpt"))


def test_a_smaller_batch_is_never_predicted_slower_than_the_powers_of_two_above_it(trained):
    from gnnperf.predictor.batch_cap import LARGEST

    predictor = Predictor.from_checkpoint(trained[0])
    model = "zoo:mlp?depth=4&width=48&in_features=16"
    batches = [1, 2, 3, 8, 12, LARGEST, 2 * LARGEST]
    # a network that predicts 1/batch ms: every larger batch faster, so each step is capped at LARGEST's time,
    # or, asked together with a larger batch of the same step, at that one's
    predictor.model.forward = lambda batch: (-batch["batch_size"].double().log(), None)
    (row,) = predictor.predict([Query(model, "t4", 3)])
    assert row["iteration_time_ms"] == pytest.approx(1 / LARGEST) and row["capped_at_batch"] == LARGEST
    rows = predictor.predict([Query(model, "t4", b) for b in batches])
    assert [r["iteration_time_ms"] for r in rows] == pytest.approx([1 / (2 * LARGEST)] * 7)
    assert [r["capped_at_batch"] for r in rows] == [2 * LARGEST] * 6 + [None]
    assert [r["uncapped_ms"] for r in rows[:6]] == pytest.approx([1 / b for b in batches[:6]])
    assert rows[0]["interval_ms"] == pytest.approx(rows[6]["interval_ms"])
    raw = predictor.predict([Query(model, "t4", b) for b in batches], batch_cap=False)
    assert [r["iteration_time_ms"] for r in raw] == pytest.approx([1 / b for b in batches])
    assert all(r["capped_at_batch"] is None and "uncapped_ms" not in r for r in raw)
    # a capped step's per-op times are scaled as its total is
    predictor.model.forward = lambda batch: (-batch["batch_size"].double().log(), torch.ones(batch.num_nodes))
    (row,) = predictor.predict(Query(model, "t4", 8), breakdown=1)
    (top,) = row["breakdown"]  # the MLP's 4 ReLUs, one group of ops at one place in repeated blocks
    assert top["count"] == 4 and top["ms"] == pytest.approx(4 * 8 / LARGEST)
    # a network that predicts more time at every larger batch: nothing to cap
    predictor.model.forward = lambda batch: (batch["batch_size"].double().log(), None)
    rows = predictor.predict([Query(model, "t4", b) for b in batches])
    assert [r["iteration_time_ms"] for r in rows] == pytest.approx(batches)
    assert all(r["capped_at_batch"] is None for r in rows)


def test_asked_batches_between_the_same_powers_of_two_are_capped_against_each_other(trained):
    predictor = Predictor.from_checkpoint(trained[0])
    model = "zoo:mlp?depth=4&width=48&in_features=16"

    def forward(batch):  # 1 ms at every power of two, 1/batch ms elsewhere: only the asked 12 can cap the 10
        b = batch["batch_size"].long()
        return torch.where((b & (b - 1)) == 0, 0.0, -b.double().log()), None

    predictor.model.forward = forward
    rows = predictor.predict(
        [Query(model, "t4", 10), Query(model, "t4", 12), Query(model, "a100-sxm4-40gb", 12)]
    )
    assert [r["iteration_time_ms"] for r in rows] == pytest.approx([1 / 12, 1 / 12, 1 / 12])
    assert [r["capped_at_batch"] for r in rows] == [12, None, None]
    # another device's 12 is another step: the 10 alone is not capped
    (alone,) = predictor.predict([Query(model, "a100-sxm4-40gb", 10)])
    assert alone["iteration_time_ms"] == pytest.approx(1 / 10) and alone["capped_at_batch"] is None


def test_predictions_do_not_depend_on_how_many_graphs_share_a_forward_pass(trained, monkeypatch):
    import gnnperf.predictor.model as model_module

    predictor = Predictor.from_checkpoint(trained[0])
    queries = [
        Query("zoo:mlp?depth=4&width=48&in_features=16", d, b)
        for d in ("t4", "a100-sxm4-40gb")
        for b in (3, 8)
    ]
    together = predictor.predict(queries, breakdown=2)
    monkeypatch.setattr(model_module, "NODES_PER_PASS", 1)  # one graph per pass
    alone = predictor.predict(queries, breakdown=2)
    for a, b in zip(together, alone, strict=True):
        assert a["iteration_time_ms"] == pytest.approx(b["iteration_time_ms"], rel=1e-5)
        assert [op["ms"] for op in a["breakdown"]] == pytest.approx(
            [op["ms"] for op in b["breakdown"]], rel=1e-5
        )


def test_one_model_at_two_input_sizes_in_one_call_is_predicted_as_each_alone(trained):
    # node and edge features are shared across a call's workloads of one graph: keyed by its input size too
    predictor = Predictor.from_checkpoint(trained[0])
    cnn = "tests.graph.factories:tiny_cnn"
    queries = [Query(cnn, "t4", 4, input_shape=(3, side, side)) for side in (8, 32)]
    together = predictor.predict(queries, batch_cap=False)
    alone = [predictor.predict(q, batch_cap=False)[0] for q in queries]
    assert together[0]["iteration_time_ms"] != pytest.approx(together[1]["iteration_time_ms"], rel=1e-3)
    for a, b in zip(together, alone, strict=True):
        assert a["iteration_time_ms"] == pytest.approx(b["iteration_time_ms"], rel=1e-5)


def test_activation_checkpointing_adds_the_blocks_forward_pass_and_cuts_the_memory(trained, capsys):
    from gnnperf.predictor.recompute import FORWARD_SHARE
    from gnnperf.predictor.report import print_row

    predictor = Predictor.from_checkpoint(trained[0])
    model = "zoo:resnet?depths=1,2&width=12&image_size=32&stem=cifar&num_classes=10"
    plain, checked = predictor.predict(
        [Query(model, "t4", 8), Query(model, "t4", 8, activation_checkpointing=True)]
    )
    ck = checked["activation_checkpointing"]
    assert ck["blocks"] == 3 and 0 < ck["recompute_share"] < 1
    assert ck["step_without_ms"] == pytest.approx(plain["iteration_time_ms"])
    factor = 1 + FORWARD_SHARE * ck["recompute_share"]
    assert checked["iteration_time_ms"] == pytest.approx(factor * plain["iteration_time_ms"])
    assert checked["interval_ms"] == pytest.approx([factor * v for v in plain["interval_ms"]])
    memory = predictor.memory(Query(model, "t4", 8, activation_checkpointing=True), max_batch=True)
    assert memory["activations_mb"] < predictor.memory(Query(model, "t4", 8))["activations_mb"]
    checked["memory"] = memory
    print_row(checked)
    assert "activation checkpointing of 3 blocks: +" in capsys.readouterr().out
    with pytest.raises(GnnperfError, match="needs a training step"):
        predictor.predict(Query(model, "t4", 8, mode="infer", activation_checkpointing=True))
