"""The timing harness on CPU with tiny models. Timings are never asserted on, only their consistency."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from gnnperf.errors import GnnperfError
from gnnperf.measure import timing
from gnnperf.measure.harness import build_model, check_supported, measure, median_rel_ci
from gnnperf.measure.workload import MeasureSettings, Workload
from gnnperf.zoo.resolve import ModelSpec, resolve

FAST = MeasureSettings(warmup=1, min_iters=3, max_iters=6, max_time_s=5.0, target_rel_ci=0.0)
SHAPE = (3, 16, 16)


def tiny_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 10),
    )


class TinyLM(nn.Module):
    """Token ids -> (B, L, V) logits inside a dict, like an HF causal LM."""

    def __init__(self, vocab: int = 50) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, 16)
        self.head = nn.Linear(16, vocab)

    def forward(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.emb(ids)
        return {"hidden": h, "logits": self.head(h)}


class TupleOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> tuple[None, torch.Tensor]:
        return None, self.conv(x)  # 4-d output: mean-of-squares loss


class Raises(nn.Module):
    def __init__(self, exc: BaseException) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.exc = exc

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise self.exc


def assert_ok(res: dict, settings: MeasureSettings = FAST) -> None:
    assert res["status"] == "ok", res["error"]
    assert res["error"] is None
    assert settings.min_iters <= res["n_iters"] <= settings.max_iters
    assert 0 < res["time_p10_ms"] <= res["iteration_time_ms"] <= res["time_p90_ms"]
    assert res["time_cv"] >= 0
    assert res["peak_memory_mb"] is None  # CPU


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"timed": "fwd+bwd"},
        {"timed": "fwd"},
        {"mode": "infer"},
        {"optimizer": "adam"},
        {"optimizer": "adamw"},
        {"precision": "amp_bf16"},
        {"precision": "amp_bf16", "mode": "infer"},
        {"precision": "bf16"},
        {"precision": "fp64"},
        {"memory_format": "channels_last"},
        {"memory_format": "channels_last", "mode": "infer"},
    ],
    ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "default",
)
def test_tiny_cnn_workloads(kwargs: dict) -> None:
    res = measure(tiny_cnn(), Workload(batch_size=4, input_shape=SHAPE, **kwargs), FAST)
    assert_ok(res)


def test_amp_fp16_uses_grad_scaler_path() -> None:
    assert_ok(measure(tiny_cnn(), Workload(batch_size=2, input_shape=SHAPE, precision="amp_fp16"), FAST))


@pytest.mark.parametrize("timed", ["fwd+bwd+opt", "fwd+bwd", "fwd"])
def test_torchvision_resnet18_small_input(timed: str) -> None:
    spec = resolve("torchvision:resnet18")
    res = measure(spec, Workload(batch_size=2, input_shape=(3, 32, 32), timed=timed), FAST)
    assert_ok(res)


class Conv2d3d(nn.Module):
    """A 3-D and a 2-D convolution: one weight of each rank for channels_last."""

    def __init__(self) -> None:
        super().__init__()
        self.conv3d = nn.Conv3d(3, 4, 3, padding=1)
        self.conv2d = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(self.conv3d(x).mean(dim=2))


def test_channels_last_puts_each_weight_in_the_layout_of_its_rank() -> None:
    model = Conv2d3d()
    assert_ok(
        measure(model, Workload(batch_size=2, input_shape=(3, 4, 8, 8), memory_format="channels_last"), FAST)
    )
    assert model.conv3d.weight.is_contiguous(memory_format=torch.channels_last_3d)
    assert model.conv2d.weight.is_contiguous(memory_format=torch.channels_last)


def test_token_model_from_spec_with_lm_logits() -> None:
    spec = ModelSpec(
        ref="test:tiny-lm",
        family="lm",
        input_kind="tokens",
        default_input_shape=(8,),
        input_names=("input_ids",),
        builder=lambda _depth: TinyLM(),
        vocab_size=50,
    )
    assert_ok(measure(spec, Workload(batch_size=2), FAST))  # default input shape, (B, L, V) cross-entropy
    assert_ok(measure(spec, Workload(batch_size=2, input_shape=(4,), mode="infer"), FAST))


def test_tuple_output_mean_square_loss() -> None:
    assert_ok(measure(TupleOut(), Workload(batch_size=2, input_shape=(3, 8, 8)), FAST))


def test_stops_early_once_median_bound_is_tight(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter(range(0, 10**12, 1_000_000))  # a fake clock: every iteration takes exactly 1 ms
    monkeypatch.setattr(timing.time, "perf_counter_ns", lambda: next(ticks))
    settings = MeasureSettings(warmup=0, min_iters=10, max_iters=50, target_rel_ci=0.01)
    res = measure(tiny_cnn(), Workload(batch_size=1, input_shape=SHAPE, mode="infer"), settings)
    assert res["n_iters"] == 10
    assert res["iteration_time_ms"] == res["time_p10_ms"] == res["time_p90_ms"] == 1.0
    assert res["time_cv"] == 0.0


def test_runs_to_max_iters_without_target() -> None:
    settings = MeasureSettings(warmup=0, min_iters=2, max_iters=7, max_time_s=60.0, target_rel_ci=0.0)
    res = measure(tiny_cnn(), Workload(batch_size=1, input_shape=SHAPE, mode="infer"), settings)
    assert res["n_iters"] == 7


@pytest.mark.parametrize(
    "exc",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError("CPU: out of memory"),
    ],
)
def test_out_of_memory_is_status_oom(exc: BaseException) -> None:
    res = measure(Raises(exc), Workload(batch_size=2, input_shape=(3,)), FAST)
    assert res["status"] == "oom"
    assert "out of memory" in res["error"]
    assert res["iteration_time_ms"] is None and res["n_iters"] == 0


def test_exception_is_status_error_with_one_line() -> None:
    threads = torch.get_num_threads()
    res = measure(
        Raises(ValueError("bad shape\nsecond line")), Workload(batch_size=2, input_shape=(3,)), FAST
    )
    assert res["status"] == "error"
    assert res["error"] == "ValueError: bad shape"
    assert torch.get_num_threads() == threads  # restored even after a failure


def test_thread_count_is_restored() -> None:
    threads = torch.get_num_threads()
    settings = MeasureSettings(warmup=0, min_iters=1, max_iters=2, threads=2 if threads == 1 else 1)
    assert_ok(measure(tiny_cnn(), Workload(batch_size=1, input_shape=SHAPE), settings), settings)
    assert torch.get_num_threads() == threads


def test_unsupported_requests_raise() -> None:
    with pytest.raises(GnnperfError, match="h2d"):
        check_supported(Workload(batch_size=1, h2d=True), MeasureSettings())
    with pytest.raises(GnnperfError, match="one device"):
        check_supported(Workload(batch_size=1, num_devices=2), MeasureSettings())
    with pytest.raises(GnnperfError, match="on a CPU it runs fp32"):  # the same computation, another label
        check_supported(Workload(batch_size=1, precision="tf32"), MeasureSettings())
    if not torch.cuda.is_available():
        with pytest.raises(GnnperfError, match="CUDA is not available"):
            measure(tiny_cnn(), Workload(batch_size=1, input_shape=SHAPE), MeasureSettings(device="cuda"))
    with pytest.raises(GnnperfError, match="input_shape"):
        measure(tiny_cnn(), Workload(batch_size=1), FAST)


def test_median_rel_ci() -> None:
    assert median_rel_ci([1, 2, 3]) == math.inf  # too few for a 95% bound
    assert median_rel_ci([5] * 20) == 0.0
    values = sorted([100] * 10 + [90, 110] * 5)
    assert 0 <= median_rel_ci(values) <= 0.1


def test_workload_defaults_and_labels() -> None:
    assert Workload(batch_size=8).timed == "fwd+bwd+opt" and Workload(batch_size=8).optimizer == "sgd"
    infer = Workload(batch_size=8, mode="infer")
    assert (infer.timed, infer.optimizer) == ("fwd", "none")
    assert Workload(batch_size=8, optimizer="none").timed == "fwd+bwd"
    w = Workload(batch_size=8, input_shape=[3, 32, 32], timed="h2d+fwd+bwd")
    assert w.h2d and w.timed == "fwd+bwd" and w.timed_label == "h2d+fwd+bwd"
    assert w.input_shape == (3, 32, 32) and w.input_shape_str == "3,32,32"
    assert Workload.from_dict(w.to_dict()) == w
    s = MeasureSettings(threads=2, device="cuda:1")
    assert MeasureSettings.from_dict(s.to_dict()) == s


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "infer", "timed": "fwd+bwd+opt"}, "infer"),
        ({"optimizer": "none", "timed": "fwd+bwd+opt"}, "needs an optimizer"),
        ({"optimizer": "adam", "timed": "fwd+bwd"}, "not timed"),
        ({"precision": "fp33"}, "did you mean: fp32"),
        ({"timed": "bwd"}, "bad timed"),
        ({"memory_format": "nhwc"}, "memory_format"),
        ({"batch_size": 0}, "batch_size"),
        ({"input_shape": (3, 0)}, "input_shape"),
        ({"num_devices": 0}, "num_devices"),
    ],
)
def test_workload_validation(kwargs: dict, match: str) -> None:
    with pytest.raises(GnnperfError, match=match):
        Workload(**{"batch_size": 1, **kwargs})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_iters": 5, "max_iters": 4},
        {"device": "gpu"},
        {"target_rel_ci": 1.5},
        {"threads": 0},
        {"max_time_s": 0},
    ],
)
def test_settings_validation(kwargs: dict) -> None:
    with pytest.raises(GnnperfError):
        MeasureSettings(**kwargs)


def test_settings_from_dict_rejects_unknown_field() -> None:
    with pytest.raises(GnnperfError, match="did you mean: warmup"):
        MeasureSettings.from_dict({"warmpu": 3})


def test_models_are_built_from_seed_0_and_leave_the_random_state_alone() -> None:
    spec = resolve("zoo:mlp?depth=2&in_features=16&width=32")
    state = torch.random.get_rng_state()
    a, b = (build_model(spec, Workload(batch_size=1)) for _ in range(2))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(
        torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )
