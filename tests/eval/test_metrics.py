"""Metrics on hand-made arrays, grouped metrics, comparison tables and plots."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from gnnperf.errors import GnnperfError
from gnnperf.eval.metrics import (
    METRICS,
    grouped_metrics,
    one_reference_mapes,
    prediction_frame,
    regression_metrics,
)
from gnnperf.eval.plots import plot_error_cdf, plot_pred_vs_true
from gnnperf.eval.tables import comparison_table, print_table, stack_predictions, to_markdown


def test_ten_percent_off_both_ways():
    m = regression_metrics([110, 90], [100, 100])
    assert m["mape"] == 10.0 and m["median_ape"] == 10.0
    assert m["rmse_ms"] == 10.0
    assert m["within_10"] == 1.0 and m["within_20"] == 1.0
    assert m["n"] == 2
    assert math.isnan(m["spearman"]) and math.isnan(m["kendall"])  # measured times are constant
    assert list(m) == list(METRICS)


def test_within_shares_mape_and_rmse():
    m = regression_metrics([105, 115, 130], [100, 100, 100])
    assert m["mape"] == pytest.approx(50 / 3)
    assert m["median_ape"] == pytest.approx(15.0)
    assert m["within_10"] == pytest.approx(1 / 3) and m["within_20"] == pytest.approx(2 / 3)
    assert m["rmse_ms"] == pytest.approx(math.sqrt((25 + 225 + 900) / 3))


def test_rank_correlations():
    assert regression_metrics([1, 2, 3, 4], [1, 2, 3, 5])["spearman"] == pytest.approx(1.0)
    m = regression_metrics([4, 3, 2, 1], [1, 2, 3, 5])
    assert m["spearman"] == pytest.approx(-1.0) and m["kendall"] == pytest.approx(-1.0)
    # a tie in the predictions: tau-b = 5 / sqrt(5 * 6); Spearman on average ranks = sqrt(4.5 / 5)
    tied = regression_metrics([1, 2, 2, 3], [1, 2, 3, 4])
    assert tied["kendall"] == pytest.approx(5 / math.sqrt(30))
    assert tied["spearman"] == pytest.approx(math.sqrt(0.9))


@pytest.mark.parametrize(
    "pred, true, message",
    [
        ([], [], "empty"),
        ([1.0, 0.0], [1.0, 1.0], "non-positive"),
        ([1.0, -2.0], [1.0, 1.0], "non-positive"),
        ([1.0, 2.0], [1.0, float("nan")], "non-finite"),
        ([1.0, 2.0], [1.0, 2.0, 3.0], "2 predictions for 3"),
    ],
)
def test_bad_inputs_are_user_errors(pred, true, message):
    with pytest.raises(GnnperfError, match=message):
        regression_metrics(pred, true)


@pytest.fixture
def frame() -> pd.DataFrame:
    return prediction_frame(
        [100, 200, 110, 90],
        [100, 200, 100, 100],
        family=["resnet", "resnet", "vit", "vit"],
        hardware=["cpu-1t", "cpu-2t", "cpu-1t", "cpu-2t"],
    )


def test_one_reference_scales_by_the_reference_row():
    # the predictor is right up to one factor on rows 0 and 1, and half as fast again on row 2
    pred, true = np.array([1.0, 2.0, 4.0]), np.array([2.0, 4.0, 4.0])
    mapes = one_reference_mapes(pred, true)
    # reference 0 or 1: factor 2, rows 0-1 exact, row 2 predicted 8 for 4 (100%); reference 2: factor 1, 50% on 0 and 1
    assert mapes == pytest.approx([50.0, 50.0, 50.0])
    assert one_reference_mapes(pred * 3.0, true) == pytest.approx(
        mapes
    )  # the predictor's level does not matter
    with pytest.raises(GnnperfError, match="two or more rows"):
        one_reference_mapes([1.0], [1.0])


def test_grouped_metrics_per_family_and_device(frame):
    by_family = grouped_metrics(frame, "family")
    assert list(by_family.index) == ["resnet", "vit"] and by_family.index.name == "family"
    assert by_family.loc["resnet", "mape"] == 0.0 and by_family.loc["vit", "mape"] == 10.0
    assert by_family["n"].tolist() == [2, 2]
    both = grouped_metrics(frame, ["family", "hardware"])
    assert both.index.names == ["family", "hardware"] and len(both) == 4
    assert both.loc[("vit", "cpu-2t"), "mape"] == 10.0
    with pytest.raises(GnnperfError, match="cannot group by device"):
        grouped_metrics(frame, "device")
    with pytest.raises(GnnperfError, match="empty"):
        grouped_metrics(frame.iloc[:0], "family")


def test_prediction_frame_without_measurements():
    df = prediction_frame([1.0, 2.0], None, sample_id=["a", "b"])
    assert df["true_ms"].isna().all() and list(df.columns) == ["sample_id", "pred_ms", "true_ms"]


@pytest.fixture
def results(frame) -> dict[str, pd.DataFrame]:
    worse = frame.assign(pred_ms=frame["true_ms"] * np.array([1.5, 0.5, 1.2, 1.0]))
    return {"gnn": frame, "flops": worse}


def test_comparison_table_rows_are_predictors(results):
    table = comparison_table(results)
    assert list(table.index) == ["gnn", "flops"] and table.index.name == "predictor"
    assert list(table.columns) == list(METRICS)
    assert table.loc["gnn", "mape"] == pytest.approx(5.0)
    assert table.loc["flops", "mape"] == pytest.approx((50 + 50 + 20 + 0) / 4)
    with pytest.raises(GnnperfError, match="no predictions"):
        comparison_table({})


def test_print_table_shows_title_names_and_values(results):
    buffer = io.StringIO()
    print_table(comparison_table(results), title="test split", console=Console(file=buffer, width=60))
    text = buffer.getvalue()
    assert "test split" in text and "gnn" in text and "flops" in text
    assert "5.0" in text and "30.0" in text and "within_20" in text  # nothing cut on a narrow console


def test_to_markdown_exact():
    table = pd.DataFrame(
        {"mape": [5.0, 30.25], "n": [4, 4]}, index=pd.Index(["gnn", "a|b"], name="predictor")
    )
    assert to_markdown(table) == (
        "| predictor | mape | n |\n|:---|---:|---:|\n| gnn | 5.0 | 4 |\n| a\\|b | 30.2 | 4 |\n"
    )


def test_plots_write_png_files(results, frame, tmp_path):
    stacked = stack_predictions(results)
    assert stacked.columns[0] == "predictor" and len(stacked) == 8
    for plot in (plot_pred_vs_true, plot_error_cdf):
        for name, data in (("dict", results), ("long", stacked), ("single", frame)):
            path = plot(data, tmp_path / "plots" / f"{plot.__name__}-{name}.png")
            assert path.stat().st_size > 0
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots_reject_frames_without_times(tmp_path):
    with pytest.raises(GnnperfError, match="lacks column"):
        plot_pred_vs_true(pd.DataFrame({"pred_ms": [1.0]}), tmp_path / "x.png")
