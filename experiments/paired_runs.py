"""Two gnnperf-train runs of the same splits side by side: a new GNN against an earlier run with its baselines.

For a GNN retrained without baselines (``'baselines=[]'``, e.g. with another schedule) on the splits of a committed
run: per fold, the new GNN, the earlier GNN and the earlier run's baselines (fitted on the same train part, so the
same numbers), the new GNN blended with ``--blend-with`` (geometric mean, weights 1/2 fixed beforehand, as in
``ensemble.py``), and the GNNs split by a sample column (``--column``, e.g. memory_format). Then the mean over folds.
Both runs must have scored the same test samples, or, with ``--subset``, the new run a part of the earlier run's
(e.g. one layout, through its data query): both are then scored on the new run's samples. ``--keep-in STORE``
scores only the test samples that STORE holds, e.g. a store imported again after an adapter fix left rows out;
``--drop QUERY`` leaves out those whose row in ``--store`` matches a pandas query (python engine, so string methods
work), e.g. rows a data config now leaves out.

    .venv/bin/python experiments/paired_runs.py --pair multirun/timm_family_e30/0,multirun/timm_family_opcost/0 \\
        --pair ... --store .cache/stores/timm --column memory_format --out experiments/.../results.json
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


def _wide(job: Path) -> pd.DataFrame:
    preds = read_predictions(job)
    return preds.pivot_table(
        index=["sample_id", "true_ms"], columns="predictor", values="pred_ms"
    ).reset_index()


def fold_table(
    new: Path,
    old: Path,
    blend_with: str,
    column: pd.Series | None,
    keep: set[str] | None = None,
    subset: bool = False,
    drop: set[str] | None = None,
) -> dict[str, dict]:
    """Metrics of one fold: ``gnn (new)``, ``gnn (earlier)``, the earlier baselines, the blend, per column value."""
    a, b = _wide(new), _wide(old)
    new_ids, old_ids = set(a["sample_id"]), set(b["sample_id"])
    if subset and new_ids <= old_ids:
        b = b[b["sample_id"].isin(new_ids)]
    elif new_ids != old_ids:
        what = "test samples the earlier one did not" if subset else "different test samples"
        raise SystemExit(f"error: {new} and {old} scored {what}")
    if keep is not None:
        a, b = a[a["sample_id"].isin(keep)], b[b["sample_id"].isin(keep)]
    if drop:
        a, b = a[~a["sample_id"].isin(drop)], b[~b["sample_id"].isin(drop)]
    joined = a[["sample_id", "true_ms", "gnn"]].merge(
        b.drop(columns="true_ms"), on="sample_id", suffixes=("", "_old")
    )
    true = joined["true_ms"].to_numpy()
    baselines = [c for c in b.columns if c not in ("sample_id", "true_ms", "gnn", "gnn_no_fallback")]
    series = {
        "gnn (new)": joined["gnn"],
        "gnn (earlier)": joined["gnn_old"],
        **{n: joined[n] for n in baselines},
    }
    if blend_with in joined:
        series[f"gnn (new)+{blend_with}"] = np.sqrt(joined["gnn"] * joined[blend_with])
    table = {name: regression_metrics(s.to_numpy(), true) for name, s in series.items()}
    if column is not None:
        values = column.reindex(joined["sample_id"]).to_numpy()
        for value in sorted(set(values)):
            keep = values == value
            for name in ("gnn (new)", "gnn (earlier)"):
                table[f"{name} {column.name}={value}"] = regression_metrics(
                    series[name].to_numpy()[keep], true[keep]
                )
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--pair", action="append", required=True, metavar="NEW,EARLIER", help="one fold's two jobs"
    )
    p.add_argument(
        "--blend-with", default="gbm", metavar="NAME", help="earlier baseline blended with the new GNN"
    )
    p.add_argument("--store", type=Path, action="append", default=[], help="sample store for --column")
    p.add_argument("--column", help="sample column to split the GNNs by, e.g. memory_format")
    p.add_argument("--keep-in", type=Path, metavar="STORE", help="score only the test samples STORE holds")
    p.add_argument(
        "--drop", metavar="QUERY", help="leave out the test samples whose --store row matches QUERY"
    )
    p.add_argument(
        "--subset", action="store_true", help="the new runs scored part of the earlier runs' test samples"
    )
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    keep = SampleStore(args.keep_in, readonly=True).existing_ids() if args.keep_in else None
    column, drop = None, None
    if args.column or args.drop:
        if not args.store:
            raise SystemExit("error: --column and --drop need --store")
        samples = pd.concat(SampleStore(s, readonly=True).read(status="ok") for s in args.store)
        if args.column:
            column = samples.drop_duplicates("sample_id").set_index("sample_id")[args.column]
        if args.drop:
            drop = set(samples.query(args.drop, engine="python")["sample_id"])
    folds = {}
    for pair in args.pair:
        new, old = (Path(x) for x in pair.split(","))
        folds[str(new)] = fold_table(new, old, args.blend_with, column, keep, args.subset, drop) | {
            "earlier_job": str(old)
        }
    names = [k for k in next(iter(folds.values())) if k != "earlier_job"]
    mean = {
        name: {
            m: float(np.mean([f[name][m] for f in folds.values()]))
            for m in ("mape", "median_ape", "within_10")
        }
        for name in names
    }
    table = pd.DataFrame({job: {n: f[n]["mape"] for n in names} for job, f in folds.items()}).T
    table.loc["mean"] = {n: mean[n]["mape"] for n in names}
    print(table.round(1).T.to_string())
    if args.out:
        scored = {"kept_in": str(args.keep_in)} if args.keep_in else {}
        scored |= {"scored_on": "the new runs' test samples"} if args.subset else {}
        scored |= {"dropped": args.drop} if args.drop else {}
        args.out.write_text(json.dumps({"folds": folds, "mean_over_folds": mean, **scored}, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
