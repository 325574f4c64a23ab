"""How much of a held-out part's error is one level per group, and how much is within a group.

Per fold (``--fold``: the job folders of one fold, comma-separated, all scoring the same test samples), the GNN
predictions of the jobs are combined (geometric mean, as ``ensemble.py``), and scored with ``--baseline`` beside.
The rows are grouped by ``--level`` (held-out families: ``family memory_format``, the default; a held-out GPU:
``precision software``):

- ``as predicted``;
- ``one model measured``: the alphabetically first model of each value of the first ``--level`` column (of each
  family; chosen without looking at errors), or ``--reference``, is taken as measured, and each group's other rows
  are divided by the predictor's predicted / measured ratio on it; the reference rows are left out of every row of
  the table;
- ``<first level column> level removed``: each group's median log ratio removed. Tuned on the test rows
  themselves, so not a predictor: the error that is left when every group's level is exactly right.

Every row is also split by ``--split-by`` (default ``memory_format``). Columns other than ``family`` and
``model_ref`` are read from ``--store``. Printed: MAPE per fold and the mean over folds, as in the other scripts (a
``--split-by`` value only some folds have is averaged over those).

    .venv/bin/python experiments/level_oracle.py --fold multirun/a/0,multirun/b/0 ... \\
        --store .cache/stores/timm --out experiments/timm_train_family/results_family_level.json
    .venv/bin/python experiments/level_oracle.py --fold ... --store .cache/stores/torchvision \\
        --level precision software --split-by precision --baseline opcost --out ...
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from gnnperf.data.store import SampleStore
from gnnperf.errors import run_script
from gnnperf.eval.compare import ensemble_predictions, read_predictions
from gnnperf.eval.metrics import regression_metrics


def fold_frame(jobs: list[Path], baseline: str) -> pd.DataFrame:
    """One row per test sample: family, model, true time, the jobs' GNN ensemble and the first job's baseline."""
    gnn = ensemble_predictions(jobs)
    first = read_predictions(jobs[0])
    base = first[first["predictor"] == baseline].set_index("sample_id")["pred_ms"]
    if base.empty:
        raise SystemExit(f"error: {jobs[0]} has no {baseline} predictions (run it with that baseline)")
    return gnn[["model_ref", "family", "true_ms"]].assign(
        gnn=gnn["pred_ms"], **{baseline: base.reindex(gnn.index)}
    )


def is_reference(frame: pd.DataFrame, level: list[str], reference: str | None = None) -> pd.Series:
    """The rows of ``reference`` (a model_ref), or of the alphabetically first model of each value of ``level[0]``."""
    if reference is not None:
        return frame["model_ref"] == reference
    return frame["model_ref"] == frame.groupby(level[0])["model_ref"].transform("min")


def corrected(frame: pd.DataFrame, predictor: str, level: list[str]) -> dict[str, np.ndarray]:
    """Predictions as made, after one measured model per group, and with each group's level removed."""
    log_ratio = np.log(frame[predictor] / frame["true_ms"])
    group = [frame[c] for c in level]
    ref_level = log_ratio.where(frame["reference"]).groupby(group).transform("mean")
    shifts = {
        "as predicted": 0.0,
        "one model measured": ref_level.fillna(0.0),
        f"{level[0]} level removed": log_ratio.groupby(group).transform("median"),
    }
    return {how: (frame[predictor] / np.exp(shift)).to_numpy() for how, shift in shifts.items()}


def fold_table(
    frame: pd.DataFrame, baseline: str, level: list[str], split_by: str
) -> dict[str, dict[str, float]]:
    keep = ~frame["reference"].to_numpy()
    parts, true = frame[split_by].to_numpy()[keep], frame["true_ms"].to_numpy()[keep]
    table = {}
    for predictor in ("gnn", baseline):
        for how, pred in corrected(frame, predictor, level).items():
            pred = pred[keep]
            table[f"{predictor}, {how}"] = regression_metrics(pred, true)
            for part in sorted(set(parts)):
                mask = parts == part
                table[f"{predictor}, {how}, {part}"] = regression_metrics(pred[mask], true[mask])
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fold", action="append", required=True, help="comma-separated job folders of one fold")
    p.add_argument("--baseline", default="gbm", help="baseline of the first job scored beside the GNN")
    p.add_argument("--store", type=Path, action="append", required=True, help="sample store(s) of the rows")
    p.add_argument("--level", nargs="+", default=["family", "memory_format"], help="columns of a group")
    p.add_argument("--split-by", default="memory_format", help="column whose values get rows of their own")
    p.add_argument(
        "--reference", metavar="MODEL_REF", help="the measured model of every group (default: its first)"
    )
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    samples = pd.concat(SampleStore(s, readonly=True).read(status="ok") for s in args.store)
    columns = sorted({*args.level, args.split_by} - {"family", "model_ref"})
    stored = samples.drop_duplicates("sample_id").set_index("sample_id")[columns]
    folds = {}
    for fold in args.fold:
        jobs = [Path(j) for j in fold.split(",")]
        frame = fold_frame(jobs, args.baseline)
        frame[columns] = stored.reindex(frame.index).to_numpy()
        if frame[columns].isna().any().any():
            raise SystemExit(f"error: {jobs[0]} scored samples that --store does not hold")
        frame["reference"] = is_reference(frame, args.level, args.reference)
        if not frame["reference"].any():
            raise SystemExit(f"error: {jobs[0]} scored no row of {args.reference}")
        folds[fold] = fold_table(frame, args.baseline, args.level, args.split_by)
    # a --split-by value that only some folds have (the A100's tf32 rows) is averaged over those folds
    names = list(dict.fromkeys(n for f in folds.values() for n in f))
    mean = {
        n: {
            m: float(np.mean([f[n][m] for f in folds.values() if n in f]))
            for m in ("mape", "median_ape", "within_10")
        }
        for n in names
    }
    per_fold = pd.DataFrame({i: {n: t["mape"] for n, t in f.items()} for i, f in enumerate(folds.values())})
    print(per_fold.assign(mean=[mean[n]["mape"] for n in per_fold.index]).round(1).to_string())
    if args.out:
        args.out.write_text(json.dumps({"folds": folds, "mean_over_folds": mean}, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
