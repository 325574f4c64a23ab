"""The GNN beside every baseline on the same split: fit baselines on train, score all on test, write tables."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gnnperf.errors import GnnperfError

if TYPE_CHECKING:
    from gnnperf.baselines.registry import BaselineData
    from gnnperf.data.datamodule import PerfDataModule
    from gnnperf.predictor.fallback import UnseenOpFallback

log = logging.getLogger(__name__)

PREDICTIONS = "predictions.csv"


def baseline_data(dm: PerfDataModule, part: str) -> BaselineData:
    """The :class:`BaselineData` of one part of a set-up :class:`PerfDataModule`, in split order."""
    from gnnperf.baselines.registry import BaselineData

    data = dm.part(part)  # sample by sample, not batched: op sequences stay shared with the dataset's cache
    return BaselineData.from_batches((data[i] for i in range(len(data))), dm.dataset.hardware_specs)


def compare(
    dm: PerfDataModule,
    gnn_pred_ms: np.ndarray | None,
    baselines: Sequence[str],
    out_dir: str | Path | None = None,
    plots: bool = True,
    gnn_name: str = "gnn",
    fallback: UnseenOpFallback | None = None,
    train: BaselineData | None = None,
    test: BaselineData | None = None,
) -> dict[str, Any]:
    """Score the GNN's test predictions and each baseline's on the test part of ``dm``.

    Args:
        fallback: an :class:`~gnnperf.predictor.fallback.UnseenOpFallback` applied to the GNN's predictions;
            where it changes any, the unblended ones are scored too, as ``<gnn_name>_no_fallback``.
        train, test: the parts' :class:`BaselineData` when the caller has them already (built here otherwise).

    Returns ``{"table": DataFrame (rows predictors), "per_family", "per_device", "per_source", "frames",
    "unseen_op_share"}`` (the fallback weight of each test sample, zeros without a fallback) and, with
    ``out_dir``, writes ``comparison.md``, ``comparison.json``, per-family/device/source CSVs, plots.
    """
    from gnnperf.baselines.registry import get_baseline
    from gnnperf.eval.metrics import grouped_metrics
    from gnnperf.eval.tables import comparison_table, stack_predictions, to_markdown

    test = test if test is not None else baseline_data(dm, "test")
    frames: dict[str, pd.DataFrame] = {}
    share = np.zeros(len(test))
    if gnn_pred_ms is not None:
        gnn = np.asarray(gnn_pred_ms, dtype=np.float64)
        if fallback is not None:
            blended, share = fallback.apply(gnn, test)
            if share.any():
                frames[f"{gnn_name}_no_fallback"] = test.prediction_frame(gnn)
            gnn = blended
        frames = {gnn_name: test.prediction_frame(gnn), **frames}
    if baselines:
        train = train if train is not None else baseline_data(dm, "train")
        for name in baselines:
            model = get_baseline(name)().fit(train)
            frames[name] = test.prediction_frame(model.predict(test))
    table = comparison_table(frames)
    long = stack_predictions(frames)
    per_family = grouped_metrics(long, ["predictor", "family"])
    per_device = grouped_metrics(long, ["predictor", "hardware"])
    samples = dm.dataset.samples
    long["source"] = long["sample_id"].map(samples.set_index("sample_id")["source"]).fillna("unknown")
    per_source = grouped_metrics(long, ["predictor", "source"])
    result = {
        "table": table,
        "per_family": per_family,
        "per_device": per_device,
        "per_source": per_source,
        "frames": frames,
        "unseen_op_share": share,
    }
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "comparison.md").write_text(to_markdown(table) + "\n")
        (out / "comparison.json").write_text(json.dumps(_records(table), indent=1))
        per_family.to_csv(out / "per_family.csv")
        per_device.to_csv(out / "per_device.csv")
        per_source.to_csv(out / "per_source.csv")
        long.to_csv(out / PREDICTIONS, index=False)
        if plots:
            from gnnperf.eval.plots import plot_error_cdf, plot_pred_vs_true

            plot_pred_vs_true(frames, out / "pred_vs_true.png")
            plot_error_cdf(frames, out / "error_cdf.png")
    return result


def read_predictions(job_dir: str | Path) -> pd.DataFrame:
    """The long prediction table (one row per predictor and test sample) that :func:`compare` wrote to a job folder.

    Raises:
        GnnperfError: if the folder holds no ``predictions.csv`` (it is not a finished gnnperf-train/eval job).
    """
    path = Path(job_dir) / PREDICTIONS
    if not path.is_file():
        raise GnnperfError(
            f"{path} does not exist (a finished gnnperf-train or gnnperf-eval job folder holds it)"
        )
    return pd.read_csv(path, dtype={"sample_id": str})


def member_predictions(jobs: Sequence[str | Path], predictor: str = "gnn") -> list[pd.DataFrame]:
    """``predictor``'s test rows of each job folder (:func:`read_predictions`), indexed by ``sample_id`` in one
    (sorted) order: the members of a seed ensemble, which must all have scored the same samples.

    Raises:
        GnnperfError: if there are no jobs, a job has no rows of ``predictor``, or a job scored other samples
            than the first (another split).
    """
    if not jobs:
        raise GnnperfError("no job folders given")
    members = []
    for job in jobs:
        rows = read_predictions(job)
        rows = rows[rows["predictor"] == predictor].set_index("sample_id").sort_index()
        if rows.empty:
            raise GnnperfError(f"{job} has no predictions of {predictor!r}")
        if members and not rows.index.equals(members[0].index):
            raise GnnperfError(f"{job} scored other test samples than {jobs[0]}: not the same split")
        members.append(rows)
    return members


def ensemble_predictions(jobs: Sequence[str | Path], predictor: str = "gnn") -> pd.DataFrame:
    """The first job's rows of ``predictor`` (:func:`member_predictions`) with ``pred_ms`` the geometric mean of
    every job's: the seed ensemble the studies score (errors of time are relative, so the mean is taken in log)."""
    members = member_predictions(jobs, predictor)
    log_pred = np.mean([np.log(m["pred_ms"].to_numpy()) for m in members], axis=0)
    return members[0].assign(pred_ms=np.exp(log_pred))


def _records(table: pd.DataFrame) -> dict[str, Mapping[str, float]]:
    return {str(k): {c: float(v) for c, v in row.items()} for k, row in table.iterrows()}
