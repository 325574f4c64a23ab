"""Is the disagreement between seeds a usable uncertainty? Seed ensembles' spread against their error.

Each ``--fold`` names the members of one fold (same split and test part, other ``seed``), comma-separated: job
folders, as in ``experiments/ensemble.py``, or CSVs of ``predict_parts.py``. Per test row: the ensemble's prediction
(mean of the members' log predictions), the members' spread (standard deviation of their log predictions) and the
ensemble's error (absolute log error, and APE). Reported: the Spearman correlation of spread and error, MAPE and the
share within 10% in each quartile of the spread, how often the measured time lies within the ensemble's prediction
times ``exp(+-2 spread)`` (what a user reading the spread as a standard error would expect to hold about 95% of the
time), and how often it lay inside the members' own 90% intervals. The result is stored under ``--name`` in ``--out``
(other names in the file are kept), so several set-ups share one results file.

    .venv/bin/python experiments/uncertainty/spread.py --name timm_train_family \\
        --fold multirun/timm_family_fv6b_s0/0,multirun/timm_family_fv6b_s1/0 --fold ... \\
        --out experiments/uncertainty/results_spread.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from gnnperf.errors import GnnperfError, run_script
from gnnperf.eval.compare import read_predictions


def test_predictions(member: Path) -> pd.DataFrame:
    """The GNN's test predictions of a job folder, or the test rows of a ``predict_parts.py`` CSV, by sample."""
    if member.is_dir():
        return read_predictions(member).query("predictor == 'gnn'").set_index("sample_id")
    if not member.is_file():
        raise GnnperfError(f"{member} is neither a job folder nor a CSV of predict_parts.py")
    return pd.read_csv(member, dtype={"sample_id": str}).query("part == 'test'").set_index("sample_id")


def fold_rows(jobs: list[Path]) -> pd.DataFrame:
    """One row per test sample of the fold: measured and ensemble log ms, the members' spread."""
    members = [test_predictions(job) for job in jobs]
    ids = members[0].index.sort_values()
    for job, m in zip(jobs[1:], members[1:]):
        if not m.index.sort_values().equals(ids):
            raise GnnperfError(f"{job} scored other test samples than {jobs[0]}: not the same split")
    log_preds = np.log(np.stack([m.loc[ids, "pred_ms"].to_numpy() for m in members]))
    first = members[0].loc[ids]
    return pd.DataFrame(
        {
            "source": first["source"].to_numpy(),
            "log_true": np.log(first["true_ms"].to_numpy()),
            "log_ens": log_preds.mean(0),
            "spread": log_preds.std(0, ddof=1),
        },
        index=ids,
    )


def spread_report(rows: pd.DataFrame, members: int) -> dict:
    """Spread against error over every row of every fold."""
    err = (rows["log_ens"] - rows["log_true"]).abs()
    ape = (np.exp(rows["log_ens"] - rows["log_true"]) - 1).abs() * 100
    # rank first: two-member spreads tie often enough to make qcut's edges collide
    quartile = pd.qcut(rows["spread"].rank(method="first"), 4, labels=["q1", "q2", "q3", "q4"])
    by_quartile = {
        str(q): {
            "n": int(len(idx)),
            "median_spread": float(rows.loc[idx, "spread"].median()),
            "mape": float(ape[idx].mean()),
            "within_10pct": float((ape[idx] <= 10).mean()),
        }
        for q, idx in rows.groupby(quartile, observed=True).groups.items()
    }
    by_source = {
        str(src): {
            "n": int(len(idx)),
            "mape": float(ape[idx].mean()),
            "spearman_spread_abs_log_error": float(spearmanr(rows.loc[idx, "spread"], err[idx]).statistic),
        }
        for src, idx in rows.groupby("source").groups.items()
    }
    return {
        "n": int(len(rows)),
        "members": members,
        "ensemble_mape": float(ape.mean()),
        "spearman_spread_abs_log_error": float(spearmanr(rows["spread"], err).statistic),
        "median_spread": float(rows["spread"].median()),
        "median_abs_log_error": float(err.median()),
        "within_2_spread": float((err <= 2 * rows["spread"]).mean()),
        "by_spread_quartile": by_quartile,
        "by_source": by_source if len(by_source) > 1 else {},
    }


def interval_coverage(jobs: list[Path]) -> float | None:
    """Mean over the jobs of the share of test rows inside each job's own 90% split-conformal interval.

    The interval a checkpoint prints (``gnnperf predict``) is calibrated on its validation part; ``gnnperf-train``
    records how often it held on the test part (``test/interval_coverage`` in ``metrics.json``).
    """
    values = []
    for job in jobs:
        path = job / "metrics.json"
        value = json.loads(path.read_text()).get("test/interval_coverage") if path.is_file() else None
        if value is not None:
            values.append(float(value))
    return float(np.mean(values)) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="the set-up's key in --out")
    parser.add_argument(
        "--fold", action="append", required=True, help="comma-separated job folders of one fold"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    folds = [[Path(j) for j in f.split(",")] for f in args.fold]
    counts = {len(jobs) for jobs in folds}
    if len(counts) != 1 or min(counts) < 2:
        raise GnnperfError(f"every --fold needs the same number (at least 2) of jobs, got {sorted(counts)}")
    rows = pd.concat([fold_rows(jobs) for jobs in folds])
    report = spread_report(rows, counts.pop()) | {
        "member_interval_coverage": interval_coverage([j for jobs in folds for j in jobs]),
        "folds": [[str(j) for j in jobs] for jobs in folds],
    }
    results = json.loads(args.out.read_text()) if args.out.is_file() else {}
    results[args.name] = report
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"{args.name}: {report['n']} rows, {report['members']} members, ensemble MAPE {report['ensemble_mape']:.1f}%, "
        f"Spearman(spread, |log error|) {report['spearman_spread_abs_log_error']:.2f}, "
        f"within +-2 spread {report['within_2_spread']:.2f}, "
        f"in the members' own 90% intervals {report['member_interval_coverage'] or float('nan'):.2f}"
    )
    for q, r in report["by_spread_quartile"].items():
        print(
            f"  {q}: spread {r['median_spread']:.3f}  MAPE {r['mape']:.1f}  within 10% {r['within_10pct']:.2f}"
        )


if __name__ == "__main__":
    run_script(main)
