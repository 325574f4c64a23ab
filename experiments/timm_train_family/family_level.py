"""How much of the held-out-family error is one level per family, and how much is within a family.

Per fold (``--fold``: the job folders of one fold, comma-separated, all scoring the same test samples), the GNN
predictions of the jobs are combined (geometric mean, as ``ensemble.py``), and scored with ``--baseline`` beside:

- ``as predicted``;
- ``one model measured``: each held-out family's alphabetically first model (chosen without looking at errors)
  is taken as measured, and the family's other rows of the same layout are divided by the predictor's
  predicted / measured ratio on it; the reference rows are left out of every row of the table;
- ``family level removed``: each (family, layout)'s median log ratio removed. Tuned on the test rows themselves,
  so not a predictor: the error that is left when every held-out family's level is exactly right.

Every row is split by ``memory_format`` (read from ``--store``). Mean over folds, as in the other scripts.

    .venv/bin/python experiments/timm_train_family/family_level.py --fold multirun/a/0,multirun/b/0 ... \\
        --store .cache/stores/timm --out experiments/timm_train_family/results_family_level.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from gnnperf.data.store import SampleStore
from gnnperf.errors import run_script
from gnnperf.eval.compare import read_predictions
from gnnperf.eval.metrics import regression_metrics

LAYOUT = "memory_format"


def fold_frame(jobs: list[Path], baseline: str) -> pd.DataFrame:
    """One row per test sample: family, model, true time, the jobs' GNN ensemble and the first job's baseline."""
    long = [read_predictions(job) for job in jobs]
    wide = [p.pivot_table(index="sample_id", columns="predictor", values="pred_ms") for p in long]
    ids = wide[0].index
    if any(set(w.index) != set(ids) for w in wide):
        raise SystemExit(f"error: the jobs {', '.join(map(str, jobs))} scored different test samples")
    first = long[0].drop_duplicates("sample_id").set_index("sample_id").loc[ids]
    if baseline not in wide[0]:
        raise SystemExit(f"error: {jobs[0]} has no {baseline} predictions (run it with that baseline)")
    gnn = np.exp(np.mean([np.log(w.loc[ids, "gnn"].to_numpy()) for w in wide], axis=0))
    return first[["model_ref", "family", "true_ms"]].assign(gnn=gnn, **{baseline: wide[0].loc[ids, baseline]})


def is_reference(frame: pd.DataFrame) -> pd.Series:
    """The rows of each family's alphabetically first model."""
    return frame["model_ref"] == frame.groupby("family")["model_ref"].transform("min")


def corrected(frame: pd.DataFrame, predictor: str) -> dict[str, np.ndarray]:
    """Predictions as made, after one measured model per family, and with each family's level removed."""
    log_ratio = np.log(frame[predictor] / frame["true_ms"])
    group = [frame["family"], frame[LAYOUT]]
    is_ref = is_reference(frame)
    ref_level = log_ratio.where(is_ref).groupby(group).transform("mean")
    shifts = {
        "as predicted": 0.0,
        "one model measured": ref_level.fillna(0.0),
        "family level removed": log_ratio.groupby(group).transform("median"),
    }
    return {how: (frame[predictor] / np.exp(shift)).to_numpy() for how, shift in shifts.items()}


def fold_table(frame: pd.DataFrame, baseline: str) -> dict[str, dict[str, float]]:
    keep = ~is_reference(frame).to_numpy()
    layouts, true = frame[LAYOUT].to_numpy()[keep], frame["true_ms"].to_numpy()[keep]
    table = {}
    for predictor in ("gnn", baseline):
        for how, pred in corrected(frame, predictor).items():
            pred = pred[keep]
            table[f"{predictor}, {how}"] = regression_metrics(pred, true)
            for layout in sorted(set(layouts)):
                part = layouts == layout
                table[f"{predictor}, {how}, {layout}"] = regression_metrics(pred[part], true[part])
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fold", action="append", required=True, help="comma-separated job folders of one fold")
    p.add_argument("--baseline", default="gbm", help="baseline of the first job scored beside the GNN")
    p.add_argument("--store", type=Path, action="append", required=True, help="sample store(s) of the rows")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    samples = pd.concat(SampleStore(s, readonly=True).read(status="ok") for s in args.store)
    layout = samples.drop_duplicates("sample_id").set_index("sample_id")[LAYOUT]
    folds = {}
    for fold in args.fold:
        jobs = [Path(j) for j in fold.split(",")]
        frame = fold_frame(jobs, args.baseline)
        frame[LAYOUT] = layout.reindex(frame.index).to_numpy()
        if frame[LAYOUT].isna().any():
            raise SystemExit(f"error: {jobs[0]} scored samples that --store does not hold")
        folds[fold] = fold_table(frame, args.baseline)
    names = list(next(iter(folds.values())))
    mean = {
        n: {m: float(np.mean([f[n][m] for f in folds.values()])) for m in ("mape", "median_ape", "within_10")}
        for n in names
    }
    print(pd.DataFrame(mean).T.round(2).to_string())
    if args.out:
        args.out.write_text(json.dumps({"folds": folds, "mean_over_folds": mean}, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
