"""Seed ensembles read from job folders: members aligned by sample, geometric mean, other splits refused."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from gnnperf.errors import GnnperfError
from gnnperf.eval.compare import PREDICTIONS, ensemble_predictions, member_predictions


def job(folder: Path, gnn: dict[str, float], gbm: float = 5.0) -> Path:
    """A job folder whose predictions.csv holds ``gnn`` (sample -> ms) and a gbm row per sample, true 10 ms."""
    folder.mkdir()
    rows = [
        {"predictor": name, "sample_id": sid, "model_ref": f"m{sid}", "pred_ms": ms, "true_ms": 10.0}
        for sid, pred in gnn.items()
        for name, ms in (("gnn", pred), ("gbm", gbm))
    ]
    pd.DataFrame(rows).to_csv(folder / PREDICTIONS, index=False)
    return folder


def test_members_share_one_sample_order_and_the_ensemble_is_their_geometric_mean(tmp_path):
    a = job(tmp_path / "a", {"02": 4.0, "01": 20.0})  # ids that look like numbers stay strings
    b = job(tmp_path / "b", {"01": 5.0, "02": 9.0})
    members = member_predictions([a, b])
    assert [list(m.index) for m in members] == [["01", "02"], ["01", "02"]]
    assert set(members[0]["predictor"]) == {"gnn"}
    ens = ensemble_predictions([a, b])
    assert ens["pred_ms"].tolist() == pytest.approx([10.0, 6.0])  # sqrt(20 * 5), sqrt(4 * 9)
    assert ens["model_ref"].tolist() == ["m01", "m02"] and ens["true_ms"].tolist() == [10.0, 10.0]
    assert ensemble_predictions([a], "gbm")["pred_ms"].tolist() == pytest.approx([5.0, 5.0])
    assert math.isclose(ensemble_predictions([a])["pred_ms"]["01"], 20.0)  # one member: itself


def test_another_split_or_a_missing_predictor_is_refused(tmp_path):
    a = job(tmp_path / "a", {"1": 4.0, "2": 20.0})
    other = job(tmp_path / "other", {"1": 5.0, "3": 9.0})
    with pytest.raises(GnnperfError, match="scored other test samples than .*: not the same split"):
        member_predictions([a, other])
    with pytest.raises(GnnperfError, match="has no predictions of 'sequence'"):
        ensemble_predictions([a], "sequence")
    with pytest.raises(GnnperfError, match="no job folders"):
        member_predictions([])
