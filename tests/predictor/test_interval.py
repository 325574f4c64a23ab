import numpy as np
import pytest

from gnnperf.errors import GnnperfError
from gnnperf.predictor.interval import (
    conformal_bounds,
    covered,
    group_intervals,
    group_key,
    interval_for,
    rows_needed,
)


def test_bounds_are_the_split_conformal_order_statistics():
    x = np.random.default_rng(0).permutation(np.arange(1.0, 101.0))  # 1..100, shuffled
    # n = 100, 90%: the floor(101 * 0.05) = 5th and ceil(101 * 0.95) = 96th smallest
    assert conformal_bounds(x, 0.9) == [5.0, 96.0]
    # the smallest sample with bounds of their own: the 1st and the 19th of 19
    assert rows_needed(0.9) == 19 and conformal_bounds(np.arange(19.0), 0.9) == [0.0, 18.0]
    # fewer: the extremes (coverage not guaranteed; training warns)
    assert conformal_bounds(np.arange(5.0), 0.9) == [0.0, 4.0]
    with pytest.raises(GnnperfError, match="got none"):
        conformal_bounds(np.array([]), 0.9)


def test_bounds_hold_their_coverage_on_new_exchangeable_rows():
    rng = np.random.default_rng(1)
    hits = []
    for _ in range(2000):
        x = rng.normal(size=41)
        lo, hi = conformal_bounds(x[:40], 0.9)
        hits.append(lo <= x[40] <= hi)
    # guaranteed at least 90%: the 2nd and 39th of 40 bound a 41st draw with probability 37/41 = 0.902
    assert np.mean(hits) == pytest.approx(37 / 41, abs=0.02)


def test_groups_with_enough_rows_get_their_own_interval_the_others_the_pooled_one():
    rng = np.random.default_rng(2)
    wide, narrow = rng.normal(scale=0.3, size=60), rng.normal(scale=0.02, size=60)
    log_ratio = np.concatenate([wide, narrow, [0.5] * 10])
    devices = ["cpu"] * 60 + ["gpu"] * 60 + ["rare"] * 10
    by_device = group_intervals(log_ratio, devices, 0.9)
    assert set(by_device) == {"cpu", "gpu"}  # 10 rows are too few
    assert by_device["cpu"] == conformal_bounds(wide, 0.9)
    assert np.diff(by_device["gpu"])[0] < np.diff(by_device["cpu"])[0] / 5
    pooled = conformal_bounds(log_ratio, 0.9)
    # a row outside the narrow GPU interval is inside the pooled one; the rare device is judged by the pooled one
    rows = np.array([0.2, 0.2, 0.5])
    assert covered(rows, ["gpu", "rare", "rare"], pooled, by_device).tolist() == [
        False,
        pooled[0] <= 0.2 <= pooled[1],
        pooled[0] <= 0.5 <= pooled[1],
    ]
    assert covered(rows, ["gpu", "cpu", "rare"], pooled, {}).tolist() == [
        bool(pooled[0] <= v <= pooled[1]) for v in rows
    ]


def test_a_group_is_a_device_mode_and_precision():
    assert group_key("rtx-3090", "train", "amp_fp16") == "rtx-3090 train amp_fp16"


def test_a_query_gets_its_groups_interval_else_the_pooled_one():
    info = {
        "interval_log_ratio": [-0.2, 0.3],
        "interval_log_ratio_by_group": {"rtx-4090 infer amp_fp16": [-0.1, 0.1]},
    }
    assert interval_for(info, "rtx-4090", "infer", "amp_fp16") == ([-0.1, 0.1], "group")
    # the RTX 4090's training step is not its inference rows' group
    assert interval_for(info, "rtx-4090", "train", "amp_fp16") == ([-0.2, 0.3], "pooled")
    # a checkpoint from before the groups
    assert interval_for({"interval_log_ratio": [-0.2, 0.3]}, "rtx-4090", "infer", "amp_fp16")[1] == "pooled"
