"""What a checkpoint's training covered, and which queries leave it (gnnperf.predictor.coverage)."""

from __future__ import annotations

from dataclasses import replace

from gnnperf.hardware.table import get_spec, spec_to_dict
from gnnperf.predictor.coverage import hardware_outside_range


def test_a_device_beyond_the_training_devices_data_sheets_is_named_field_by_field() -> None:
    trained = [spec_to_dict(get_spec(name)) for name in ("t4", "a100-sxm4-40gb")]
    assert hardware_outside_range(trained, get_spec("v100-sxm2-16gb")) == []  # between the two on every field
    b200 = hardware_outside_range(trained, get_spec("b200"))
    assert "peak_fp16_tensor_tflops=2250 (trained 65..312)" in b200
    assert "mem_bandwidth_gbs=7700 (trained 320..1555)" in b200
    # below the range counts too
    p4 = hardware_outside_range(trained, get_spec("p4"))
    assert "peak_fp32_tflops=5.5 (trained 8.1..19.5)" in p4


def test_a_field_every_training_device_had_is_named_where_the_device_lacks_it() -> None:
    trained = [spec_to_dict(get_spec(name)) for name in ("t4", "a100-sxm4-40gb")]
    b200 = hardware_outside_range(trained, get_spec("b200"))  # the table has no L2 or clock for it
    assert "l2_cache_mb not given (every training GPU had it: 4..40)" in b200
    assert any(f.startswith("boost_clock_mhz not given") for f in b200)
    # the P4 has no tensor cores: a device without the figure is named only where every training device had one
    assert any(
        f.startswith("peak_fp16_tensor_tflops not given")
        for f in hardware_outside_range(trained, get_spec("p4"))
    )
    with_p100 = [*trained, spec_to_dict(get_spec("p100-pcie-16gb"))]
    assert not any(
        f.startswith("peak_fp16_tensor_tflops") for f in hardware_outside_range(with_p100, get_spec("p4"))
    )


def test_only_training_devices_of_the_same_kind_set_the_range() -> None:
    gpu = spec_to_dict(get_spec("a100-sxm4-40gb"))
    cpu = replace(get_spec("t4"), name="some-cpu", kind="cpu", peak_fp32_tflops=1.0)
    assert hardware_outside_range([gpu], cpu) == []  # no CPU in training: left to unseen_on_kind
    assert hardware_outside_range([gpu, spec_to_dict(cpu)], replace(cpu, peak_fp32_tflops=2.0)) == [
        "peak_fp32_tflops=2 (trained 1..1)"
    ]


def test_a_value_never_measured_on_a_training_device_is_named_with_what_it_had() -> None:
    import pandas as pd

    from gnnperf.predictor.coverage import coverage, unseen_on_device

    rows = pd.DataFrame(
        [  # the shipped predictor's RTX 4090: inference rows only; the RTX 3090 had training steps too
            ("rtx-4090", "infer", "amp_fp16", "fwd", "contiguous", "none"),
            ("rtx-3090", "infer", "amp_fp16", "fwd", "contiguous", "none"),
            ("rtx-3090", "train", "amp_fp16", "fwd+bwd+opt", "channels_last", "sgd"),
            ("t4", "train", "fp32", "fwd+bwd", "contiguous", "none"),
        ],
        columns=["hardware", "mode", "precision", "timed", "memory_format", "optimizer"],
    )
    frame = rows.assign(batch_size=8, num_devices=1, iteration_time_ms=10.0)
    trained_on = coverage(frame, {d: "gpu" for d in rows["hardware"]})
    query = {"mode": "train", "precision": "amp_fp16", "timed": "fwd+bwd+opt", "memory_format": "contiguous"}
    query["optimizer"] = "sgd"
    assert unseen_on_device(trained_on, {**query, "hardware": "rtx-4090"}, "gpu") == [
        "mode=train (rtx-4090 had only: infer)",
        "timed=fwd+bwd+opt (rtx-4090 had only: fwd)",
        "optimizer=sgd (rtx-4090 had only: none)",
    ]
    assert unseen_on_device(trained_on, {**query, "hardware": "rtx-3090"}, "gpu") == []
    # fp16 was never seen on any GPU: unseen_on_kind's or the network's to report, not this check's
    assert unseen_on_device(trained_on, {**query, "precision": "fp16", "hardware": "rtx-3090"}, "gpu") == []
    # a device without training rows (predicted from its specs), or an older checkpoint: nothing to say
    assert unseen_on_device(trained_on, {**query, "hardware": "h100-sxm"}, "gpu") == []
    assert unseen_on_device({}, {**query, "hardware": "rtx-4090"}, "gpu") == []


def _rows(*groups: tuple[int, str, str, str]):
    """A samples frame of ``(rows, device, precision, optimizer)`` groups of training steps."""
    import pandas as pd

    records = [
        {"hardware": hw, "mode": "train", "precision": prec, "timed": "fwd+bwd+opt", "memory_format": "contiguous",
         "optimizer": opt, "batch_size": 8, "num_devices": 1, "iteration_time_ms": 10.0}
        for n, hw, prec, opt in groups
        for _ in range(n)
    ]  # fmt: skip
    return pd.DataFrame(records)


KINDS = {"a100-sxm4-40gb": "gpu", "h200": "gpu", "cpu-intel-xeon-1t": "cpu"}


def test_values_in_few_rows_of_a_kind_are_named_with_their_count() -> None:
    from gnnperf.predictor.coverage import THIN_ROWS, coverage, thin_on_kind, unseen_on_kind

    trained_on = coverage(
        _rows(
            (THIN_ROWS, "a100-sxm4-40gb", "amp_fp16", "sgd"),
            (9, "h200", "amp_bf16", "adamw"),
            (THIN_ROWS, "cpu-intel-xeon-1t", "fp32", "adam"),
        ),
        KINDS,
    )
    assert trained_on["workload_counts_by_kind"]["gpu"]["optimizer"] == {"adamw": 9, "sgd": THIN_ROWS}
    step = {"mode": "train", "timed": "fwd+bwd+opt", "memory_format": "contiguous"}
    gpu_rows = f"of {THIN_ROWS + 9:,} gpu training rows"
    assert thin_on_kind(trained_on, {**step, "precision": "amp_bf16", "optimizer": "adamw"}, "gpu") == [
        f"precision=amp_bf16 (9 {gpu_rows})",
        f"optimizer=adamw (9 {gpu_rows})",
    ]
    assert thin_on_kind(trained_on, {**step, "precision": "amp_fp16", "optimizer": "sgd"}, "gpu") == []
    # a value no GPU had is unseen, not thin: the optimizer is recorded per kind like the other fields
    adam = {**step, "precision": "amp_fp16", "optimizer": "adam"}
    assert thin_on_kind(trained_on, adam, "gpu") == []
    assert unseen_on_kind(trained_on, adam, "gpu") == [
        "optimizer=adam (a gpu in training had only: adamw, sgd)"
    ]
    # checkpoints saved before the counts were recorded: nothing to say
    assert thin_on_kind({}, adam, "gpu") == []


def test_bf16_is_predicted_as_fp16_only_at_one_rate_and_when_training_barely_saw_it() -> None:
    from gnnperf.predictor.coverage import THIN_ROWS, coverage, same_rate_precision

    thin = coverage(
        _rows((THIN_ROWS, "a100-sxm4-40gb", "amp_fp16", "sgd"), (9, "h200", "amp_bf16", "sgd")), KINDS
    )
    assert same_rate_precision(thin, "amp_bf16", get_spec("h100-sxm")) == "amp_fp16"
    assert same_rate_precision(thin, "amp_fp16", get_spec("h100-sxm")) is None
    # the MI100 runs bf16 at half its fp16 rate; the V100 has no bf16 rate (priced at FP32, flagged elsewhere)
    assert same_rate_precision(thin, "amp_bf16", get_spec("mi100")) is None
    assert same_rate_precision(thin, "amp_bf16", get_spec("v100-sxm2-16gb")) is None
    # pure bf16: its twin fp16 was never seen, so the network's own bf16 it is
    assert same_rate_precision(thin, "bf16", get_spec("h100-sxm")) is None
    learned = coverage(
        _rows((THIN_ROWS, "a100-sxm4-40gb", "amp_fp16", "sgd"), (THIN_ROWS, "h200", "amp_bf16", "sgd")), KINDS
    )
    assert same_rate_precision(learned, "amp_bf16", get_spec("h100-sxm")) is None
    # a checkpoint without counts: the twin wherever it was seen on the kind
    old = {"workload_by_kind": {"gpu": {"precision": ["amp_bf16", "amp_fp16"]}}}
    assert same_rate_precision(old, "amp_bf16", get_spec("h100-sxm")) == "amp_fp16"
    assert same_rate_precision({}, "amp_bf16", get_spec("h100-sxm")) is None


def test_a_prediction_faster_than_every_training_row_of_its_step_is_named() -> None:
    import pandas as pd

    from gnnperf.predictor.coverage import coverage, faster_than_trained

    samples = _rows((3, "h200", "amp_fp16", "sgd"), (2, "a100-sxm4-40gb", "amp_fp16", "sgd"))
    samples["iteration_time_ms"] = [3.8, 5.0, 9.0, 40.0, 60.0]
    samples = pd.concat(
        [samples, _rows((1, "cpu-intel-xeon-1t", "fp32", "sgd")).assign(iteration_time_ms=1.4)]
    )
    trained_on = coverage(samples, KINDS)
    assert trained_on["fastest_ms"] == {
        "gpu": {"train": [3.8, "h200"]},
        "cpu": {"train": [1.4, "cpu-intel-xeon-1t"]},
    }
    step = {"mode": "train", "hardware": "a100-sxm4-40gb", "iteration_time_ms": 0.25}
    assert faster_than_trained(trained_on, step, "gpu") == (
        "0.25 ms, under the fastest train row of any gpu in training (3.8 ms, h200)"
    )
    # under the device's own fastest row (40 ms: larger models there) but not the kind's: inside what GPUs covered
    assert faster_than_trained(trained_on, {**step, "iteration_time_ms": 20.0}, "gpu") is None
    assert faster_than_trained(trained_on, {**step, "iteration_time_ms": 3.8}, "gpu") is None
    # no row of that mode on the kind, or a checkpoint from before the record: nothing to say
    assert faster_than_trained(trained_on, {**step, "mode": "infer"}, "gpu") is None
    assert faster_than_trained({}, step, "gpu") is None
