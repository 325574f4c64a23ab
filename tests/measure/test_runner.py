"""The runner: in-process from a reference, and isolated in a child that may crash.

The factories below are referenced as ``<this module>:<factory>``; the child imports this module through the
parent's ``sys.path``.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

import pytest
from torch import nn

from gnnperf.errors import GnnperfError
from gnnperf.measure.runner import measure_ref, run_isolated, run_measurement
from gnnperf.measure.workload import MeasureSettings, Workload

FAST = MeasureSettings(warmup=1, min_iters=3, max_iters=5, target_rel_ci=0.0)
WORKLOAD = Workload(batch_size=2, input_shape=(12,))
TIMEOUT_S = 120.0


def tiny_mlp() -> nn.Module:
    print("a model that prints to stdout")  # must not corrupt the child's result line
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4))


def exit_139() -> nn.Module:
    os._exit(139)


def kill_self() -> nn.Module:
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")


def hang() -> nn.Module:
    time.sleep(600)
    raise AssertionError("unreachable")


def fail_build() -> nn.Module:
    raise RuntimeError("cannot build this one")


def not_a_module() -> int:
    return 3


def ref(factory: str) -> str:
    return f"{__name__}:{factory}"


def test_measure_ref_in_process() -> None:
    res = measure_ref(ref("tiny_mlp"), WORKLOAD, FAST)
    assert res["status"] == "ok" and res["n_iters"] >= FAST.min_iters


@pytest.mark.parametrize(
    ("factory", "match"),
    [
        ("fail_build", "RuntimeError: cannot build this one"),
        ("not_a_module", "not a torch.nn.Module"),
        ("no_such_factory", "has no 'no_such_factory'"),
    ],
)
def test_measure_ref_build_failures_are_status_error(factory: str, match: str) -> None:
    res = measure_ref(ref(factory), WORKLOAD, FAST)
    assert res["status"] == "error"
    assert match in res["error"]


def test_isolated_ok_matches_in_process_fields() -> None:
    res = run_isolated(ref("tiny_mlp"), WORKLOAD, FAST, TIMEOUT_S)
    assert res["status"] == "ok", res["error"]
    assert set(res) == set(measure_ref(ref("tiny_mlp"), WORKLOAD, FAST))
    assert FAST.min_iters <= res["n_iters"] <= FAST.max_iters
    assert res["time_p10_ms"] <= res["iteration_time_ms"] <= res["time_p90_ms"]


@pytest.mark.parametrize(
    ("factory", "match"), [("exit_139", "exited with code 139"), ("kill_self", "killed by SIGKILL")]
)
def test_isolated_crash_costs_one_sample(factory: str, match: str) -> None:
    res = run_isolated(ref(factory), WORKLOAD, FAST, TIMEOUT_S)
    assert res["status"] == "error"
    assert match in res["error"]
    assert res["iteration_time_ms"] is None


def test_isolated_timeout() -> None:
    res = run_isolated(ref("hang"), WORKLOAD, FAST, timeout_s=3)
    assert res == {**res, "status": "error", "error": "timeout after 3 s"}


def test_isolated_user_error_raises_in_parent() -> None:
    with pytest.raises(GnnperfError, match="h2d"):
        run_isolated(ref("tiny_mlp"), Workload(batch_size=2, input_shape=(12,), h2d=True), FAST, TIMEOUT_S)


def test_run_measurement_follows_isolate_setting() -> None:
    res = run_measurement(ref("exit_139"), WORKLOAD, replace(FAST, isolate=True), TIMEOUT_S)
    assert res["status"] == "error" and "139" in res["error"]
    assert run_measurement(ref("tiny_mlp"), WORKLOAD, FAST)["status"] == "ok"
