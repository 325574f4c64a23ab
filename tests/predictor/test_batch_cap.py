"""The batch cap: which larger batches cap a prediction, and how."""

from __future__ import annotations

import pytest

from gnnperf.predictor.batch_cap import LARGEST, cap_at_larger, cap_batches, larger_batches


@pytest.mark.parametrize(
    ("batch", "above"),
    [
        (1, [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]),
        (12, [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]),
    ],
)
def test_larger_batches_are_the_powers_of_two_above_up_to_the_largest(batch, above):
    assert larger_batches(batch) == above


def test_no_larger_batch_at_or_past_the_largest():
    assert larger_batches(LARGEST - 1) == [LARGEST]
    assert larger_batches(LARGEST) == [] and larger_batches(3 * LARGEST) == []


def test_each_prediction_is_capped_at_the_least_of_its_larger_batches():
    # items: two asked predictions, then their larger batches' predictions
    ms = [5.0, 9.0, 7.0, 4.0, 8.0]
    ladders = [[(2, 2), (4, 3)], [(8, 4)]]
    assert cap_at_larger(ms, ladders) == [(4.0, 4), (8.0, 8)]
    assert cap_at_larger(ms, [[], []]) == [(5.0, None), (9.0, None)]


def test_larger_batches_asked_of_the_same_step_join_the_powers_of_two():
    steps = [("a", 10), ("a", 12), ("b", 12), ("a", 5000)]
    assert cap_batches(steps) == [
        [12, *larger_batches(10), 5000],
        [*larger_batches(12), 5000],
        larger_batches(12),
        [],
    ]
