"""Break down a gnnperf-eval run on the H200 rows: by part, by precision, seen vs unseen models, and after
calibration on one measured reference model.

Reads the ``predictions.csv`` that ``gnnperf-eval +experiment=h200_unseen`` wrote (every predictor, every row) and
adds what the eval table cannot show:

- the two parts of ``datasets/h200``: the timm benchmark's training step (``timm:`` models) and the zoo rows;
- with ``--all-samples``, whether a checkpoint of the ``all_sources`` run had the model in its training or
  validation part (its ``holdout_model`` split, seed 0, recomputed from that run's processed sample table);
- one-reference calibration, as ``Predictor.calibrate`` does it: a predictor's predictions on a (part,
  precision) group are scaled by measured / predicted of one reference row of the group, and scored on the
  group's other rows. Every row of the group takes its turn as the reference; the mean, best and worst MAPE over
  those turns are reported (the mean is the expected MAPE of a reference picked at random);
- the speedup over the RTX 3090 (timm part): each row's time in the RTX 3090 table (same model, batch size and
  kind of step) over the measured and over each predictor's H200 time.

    .venv/bin/python experiments/h200_unseen/analyse.py --predictions outputs/h200_unseen/run1/predictions.csv \
        --all-samples .cache/datasets/all/processed/samples.parquet --timm-store .cache/stores/timm \
        --out experiments/h200_unseen/results.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from gnnperf.data.splits import holdout_model
from gnnperf.data.store import SampleStore
from gnnperf.eval.metrics import one_reference_mapes, regression_metrics


def _metrics(frame: pd.DataFrame) -> dict[str, float]:
    out = regression_metrics(frame.pred_ms.to_numpy(), frame.true_ms.to_numpy())
    keep = ("mape", "median_ape", "within_10", "within_20", "spearman")
    return {
        **{k: round(float(out[k]), 4) for k in keep if k in out},
        "median_pred_over_true": round(float(np.median(frame.pred_ms / frame.true_ms)), 3),
        "n": len(frame),
    }


def one_reference(frame: pd.DataFrame) -> dict[str, float]:
    """MAPE on a group's other rows after scaling by one reference row, over every choice of reference."""
    mapes = one_reference_mapes(frame.pred_ms.to_numpy(), frame.true_ms.to_numpy())
    return {
        "mean_mape": round(float(np.mean(mapes)), 2),
        "best_mape": round(float(np.min(mapes)), 2),
        "worst_mape": round(float(np.max(mapes)), 2),
        "n_references": len(mapes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--predictions", type=Path, required=True)
    parser.add_argument("--h200-store", type=Path, default=Path("datasets/h200"))
    parser.add_argument("--all-samples", type=Path, help="processed samples of an all_sources run")
    parser.add_argument("--timm-store", type=Path, required=True, help="sample store of the timm tables")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    long = pd.read_csv(args.predictions)
    h200 = SampleStore(args.h200_store).read().set_index("sample_id")
    long = long.join(h200[["batch_size"]], on="sample_id")
    long["part"] = np.where(long.model_ref.str.startswith("timm:"), "timm_benchmark_step", "zoo")

    if args.all_samples:
        shipped = pd.read_parquet(args.all_samples)
        split = holdout_model(shipped, seed=0, fold=0, num_folds=5, val_frac=0.1, test_frac=0.1)
        seen = set(shipped.model_ref.iloc[np.concatenate([split["train"], split["val"]])])
        long["model_seen"] = long.model_ref.isin(seen)

    timm = SampleStore(args.timm_store).read()
    rtx = timm[
        (timm["mode"] == "train") & (timm.memory_format == "contiguous") & (timm.hardware == "rtx-3090")
    ]
    rtx_ms = rtx.set_index(["model_ref", "batch_size"]).iteration_time_ms
    long["rtx3090_ms"] = rtx_ms.reindex(
        pd.MultiIndex.from_frame(long[["model_ref", "batch_size"]])
    ).to_numpy()

    results: dict = {"rows": int(long.sample_id.nunique()), "predictors": {}}
    for name, frame in long.groupby("predictor", sort=False):
        r: dict = {"all": _metrics(frame)}
        for part, g in frame.groupby("part"):
            r[part] = _metrics(g)
        timm_rows = frame[frame.part == "timm_benchmark_step"]
        if args.all_samples:
            for flag, g in timm_rows.groupby("model_seen"):
                r[f"timm_benchmark_step/model_{'seen' if flag else 'unseen'}_by_all_sources"] = _metrics(g)
        for precision, g in frame[frame.part == "zoo"].groupby("precision"):
            r[f"zoo/{precision}"] = _metrics(g)
        r["one_reference"] = {"timm_benchmark_step": one_reference(timm_rows)}
        for precision, g in frame[frame.part == "zoo"].groupby("precision"):
            r["one_reference"][f"zoo/{precision}"] = one_reference(g)
        with_rtx = timm_rows.dropna(subset=["rtx3090_ms"])
        r["speedup_over_rtx3090_median"] = {
            "measured": round(float(np.median(with_rtx.rtx3090_ms / with_rtx.true_ms)), 2),
            "predicted": round(float(np.median(with_rtx.rtx3090_ms / with_rtx.pred_ms)), 2),
            "n": len(with_rtx),
        }
        worst = frame.assign(ratio=frame.pred_ms / frame.true_ms)
        worst = worst.iloc[np.argsort(-np.abs(np.log(worst.ratio.to_numpy())))][:5]
        r["worst"] = [
            {
                "model_ref": w.model_ref.split("?")[0] if w.part == "timm_benchmark_step" else w.model_ref,
                "batch_size": int(w.batch_size),
                "precision": w.precision,
                "true_ms": round(float(w.true_ms), 2),
                "pred_ms": round(float(w.pred_ms), 2),
            }
            for w in worst.itertuples()
        ]
        results["predictors"][name] = r
        print(
            f"{name:9s} MAPE {r['all']['mape']:5.1f}  timm {r['timm_benchmark_step']['mape']:5.1f}"
            f"  zoo {r['zoo']['mape']:5.1f}  pred/true {r['all']['median_pred_over_true']:.2f}"
            f"  one-reference timm {r['one_reference']['timm_benchmark_step']['mean_mape']:5.1f}"
        )
    if args.all_samples:
        timm_models = long[long.part == "timm_benchmark_step"].drop_duplicates("model_ref")
        results["timm_models_seen_by_all_sources"] = int(timm_models.model_seen.sum())
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
