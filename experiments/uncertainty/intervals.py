"""One pooled interval or one per device, mode and precision: coverage and width on the test part, per source and device.

Reads a ``predict_parts.py`` CSV (validation and test predictions of one checkpoint), calibrates both intervals on
its validation rows with the functions training uses (:mod:`gnnperf.predictor.interval`) and scores them on its test
rows: the share inside, and the width as the ratio of the upper to the lower bound. With ``--write-into`` the two
intervals and their test coverage are stored in that predictor checkpoint (the one whose predictions the CSV holds),
as training stores them since 2026-12-05: how the shipped v20, trained before, got its intervals per group.

    .venv/bin/python experiments/uncertainty/intervals.py /tmp/v21_parts.csv --name v21 \\
        --out experiments/uncertainty/results_intervals.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from gnnperf.errors import GnnperfError, run_script
from gnnperf.predictor.interval import MIN_GROUP_ROWS, conformal_bounds, covered, group_intervals, groups_of


def scores(test: pd.DataFrame, pooled: list[float], by_group: dict, by: str) -> dict:
    """Coverage and median width of both intervals, per value of column ``by`` and over all rows."""
    t = test.assign(
        pooled_in=covered(test["log_ratio"], test["group"], pooled, {}),
        group_in=covered(test["log_ratio"], test["group"], pooled, by_group),
        group_width=[float(np.exp(np.diff(by_group.get(g, pooled))[0])) for g in test["group"]],
    )
    parts = {"all": t, **dict(iter(t.groupby(by)))}
    return {
        str(k): {
            "n": int(len(p)),
            "pooled_coverage": float(p["pooled_in"].mean()),
            "group_coverage": float(p["group_in"].mean()),
            "group_median_width": float(p["group_width"].median()),
        }
        for k, p in parts.items()
    }


def write_into(path: Path, pooled: list[float], by_group: dict, scored: dict) -> None:
    """Store both intervals and their test coverage in a predictor checkpoint, in place (atomically)."""
    from gnnperf.predictor.checkpoint import not_a_predictor, read_checkpoint, write_checkpoint

    ckpt = read_checkpoint(path)
    if "gnnperf" not in ckpt:
        raise not_a_predictor(path)
    info = ckpt["gnnperf"]
    info["interval_log_ratio"], info["interval_log_ratio_by_group"] = pooled, by_group
    info["metrics"]["test/interval_coverage"] = scored["group_coverage"]
    info["metrics"]["test/interval_coverage_pooled"] = scored["pooled_coverage"]
    write_checkpoint(ckpt, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", type=Path, help="CSV of predict_parts.py")
    parser.add_argument("--name", required=True, help="the checkpoint's key in --out")
    parser.add_argument("--coverage", type=float, default=0.9)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--write-into", type=Path, help="predictor checkpoint to store the intervals in")
    args = parser.parse_args()
    rows = pd.read_csv(args.parts, dtype={"sample_id": str})
    if not {"val", "test"} <= set(rows["part"]):
        raise GnnperfError(f"{args.parts} needs validation and test rows (predict_parts.py writes both)")
    rows["log_ratio"] = np.log(rows["true_ms"]) - np.log(rows["pred_ms"])
    rows["group"] = groups_of(rows)
    val, test = rows[rows["part"] == "val"], rows[rows["part"] == "test"]
    pooled = conformal_bounds(val["log_ratio"], args.coverage)
    by_group = group_intervals(val["log_ratio"], val["group"], args.coverage)
    report = {
        "coverage": args.coverage,
        "min_group_rows": MIN_GROUP_ROWS,
        "val_rows": int(len(val)),
        "pooled_ratio": np.exp(pooled).tolist(),
        "group_ratio": {g: np.exp(b).tolist() for g, b in by_group.items()},
        "pooled_width": float(np.exp(np.diff(pooled)[0])),
        "by_source": scores(test, pooled, by_group, "source"),
        "by_device": scores(test, pooled, by_group, "hardware"),
    }
    if args.write_into:
        write_into(args.write_into, pooled, by_group, report["by_source"]["all"])
    results = json.loads(args.out.read_text()) if args.out.is_file() else {}
    results[args.name] = report
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"{args.name}: pooled {np.round(report['pooled_ratio'], 3).tolist()}, width {report['pooled_width']:.3f}"
    )
    for src, r in report["by_source"].items():
        print(
            f"  {src:24s} n {r['n']:5d}  pooled {r['pooled_coverage']:.3f}  per group {r['group_coverage']:.3f}"
            f"  (median width {r['group_median_width']:.3f})"
        )


if __name__ == "__main__":
    run_script(main)
