"""The issue's plain bar, reproduced on gnnperf's own folds: boosted trees on five aggregate features from timm's tables.

Features per row of timm's RTX 3090 training tables (NCHW and NHWC): log(GMACs x batch), log(activations x batch),
log(params), log(batch), image size, where GMACs and activations come from timm's inference tables (per sample,
at the inference resolution, scaled by (train size / inference size)^2 to the training resolution). Folds are gnnperf's ``holdout_family`` (or ``random``) split of the
same rows, seed 0; trees are fitted on train + val. Target log ms, HistGradientBoostingRegressor as the gbm
baseline. Rows whose model is in no inference table are dropped and counted. Run on both layouts (as the GNN
is), with the layout as a sixth feature, and on the NCHW table alone.

    .venv/bin/python experiments/timm_train_family/five_features.py --store .cache/stores/timm \
        --tables ../shared/external/timm/head --out experiments/timm_train_family/results_five_features.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor

from gnnperf.data.splits import make_split
from gnnperf.data.store import SampleStore, select_samples
from gnnperf.eval.metrics import regression_metrics

# Newest first: a model's GMACs / activations come from the first table that lists it.
INFER_TABLES = [
    "benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv",
    "benchmark-infer-amp-nchw-pt210-cu121-rtx3090.csv",
    "benchmark-infer-amp-nchw-pt113-cu117-rtx3090.csv",
]


def model_costs(tables: Path) -> pd.DataFrame:
    """Per model: GMACs and mega-activations per sample at ``infer_img_size``, and params (millions)."""
    frames = [pd.read_csv(tables / name) for name in INFER_TABLES]
    costs = pd.concat(frames).drop_duplicates("model", keep="first")
    return costs.set_index("model")[["infer_img_size", "infer_gmacs", "infer_macts", "param_count"]]


def features(rows: pd.DataFrame, costs: pd.DataFrame, layout: bool = False) -> tuple[pd.DataFrame, int]:
    """The five (six with ``layout``) features of ``rows``; rows without costs are dropped (count returned)."""
    name = rows["model_ref"].str.removeprefix("timm:")
    known = name.isin(costs.index)
    rows, c = rows[known], costs.loc[name[known]].reset_index(drop=True)
    size = rows["input_shape"].str.split(",").str[-1].astype(float).to_numpy()
    scale = (size / c["infer_img_size"].to_numpy()) ** 2
    batch = rows["batch_size"].to_numpy(dtype=float)
    x = pd.DataFrame(
        {
            "log_gmacs_x_batch": np.log(c["infer_gmacs"].to_numpy() * scale * batch),
            "log_macts_x_batch": np.log(c["infer_macts"].to_numpy() * scale * batch),
            "log_params": np.log(c["param_count"].to_numpy()),
            "log_batch": np.log(batch),
            "img_size": size,
        },
        index=rows.index,
    )
    if layout:
        x["channels_last"] = (rows["memory_format"] == "channels_last").to_numpy(dtype=float)
    return x, int((~known).sum())


def fold_scores(
    x: pd.DataFrame, rows: pd.DataFrame, split: str, num_folds: int
) -> tuple[list[dict], dict[str, float]]:
    """Boosted trees on ``x`` (log ms, train + val) over gnnperf's ``split`` of ``rows``, seed 0: per fold, and means."""
    folds = []
    for fold in range(num_folds):
        part = make_split(split, rows, seed=0, fold=fold, num_folds=num_folds)
        fit_rows = np.concatenate([part["train"], part["val"]])
        model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, random_state=0)
        model.fit(x.iloc[fit_rows], np.log(rows["iteration_time_ms"].iloc[fit_rows]))
        pred = np.exp(model.predict(x.iloc[part["test"]]))
        m = regression_metrics(pred, rows["iteration_time_ms"].to_numpy()[part["test"]])
        folds.append({"fold": fold, **{k: round(float(v), 4) for k, v in m.items()}})
    mean = {k: round(float(np.mean([f[k] for f in folds])), 4) for k in ("mape", "median_ape", "within_10")}
    return folds, mean


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", type=Path, default=Path(".cache/stores/timm"), help="imported timm store")
    p.add_argument(
        "--tables", type=Path, default=Path("../shared/external/timm/head"), help="timm CSV folder"
    )
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    every = select_samples(SampleStore(args.store, readonly=True).read(status="ok"), "mode == 'train'")
    costs = model_costs(args.tables)
    result: dict = {"rows": len(every), "studies": {}}
    # (name, rows, with the layout feature): both tables as the GNN sees them, and the NCHW table alone.
    studies = [
        ("both_layouts/five", every, False),
        ("both_layouts/five_plus_layout", every, True),
        ("nchw_only/five", every[every["memory_format"] == "contiguous"], False),
    ]
    for name, rows, layout in studies:
        x, dropped = features(rows.reset_index(drop=True), costs, layout)
        kept = rows.reset_index(drop=True).loc[x.index].reset_index(drop=True)
        x = x.reset_index(drop=True)
        for split in ("holdout_family", "random"):
            folds, mean = fold_scores(x, kept, split, args.folds)
            result["studies"][f"{name}/{split}"] = {
                "rows": len(kept),
                "dropped_rows_without_costs": dropped,
                "mean": mean,
                "folds": folds,
            }
            per_fold = ", ".join(f"{f['mape']:.1f}" for f in folds)
            print(
                f"{name}/{split}: mean MAPE {mean['mape']:.1f}% (folds {per_fold}), within 10% {mean['within_10']:.2f}"
            )
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
