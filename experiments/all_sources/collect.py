"""Collect one gnnperf-train run folder into results.json (test table, metrics, memory, per-group tables).

    .venv/bin/python experiments/all_sources/collect.py multirun/all_sources_v8 \
        --wall-note "one thread; ..." --out experiments/all_sources/results.json
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path

import pandas as pd
import yaml

from gnnperf.graph.features import FEATURE_VERSION


def _log_times(log: Path) -> tuple[datetime, datetime]:
    """First and last timestamp of a run's train.log (``[YYYY-mm-dd HH:MM:SS,mmm]`` at the start of a line)."""
    stamps = [
        datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f")
        for line in log.read_text().splitlines()
        if line.startswith("[20")
    ]
    if not stamps:
        raise SystemExit(f"error: {log} has no timestamped lines")
    return stamps[0], stamps[-1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="the gnnperf-train run folder (hydra.run.dir)")
    p.add_argument("--wall-note", default="", help="what ran beside it, threads")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    for name in ("comparison.json", "metrics.json", "memory.json", "train.log"):
        if not (args.run / name).is_file():
            raise SystemExit(
                f"error: {args.run / name} does not exist (a finished gnnperf-train run holds it)"
            )
    start, end = _log_times(args.run / "train.log")
    result = {
        "run": str(args.run),
        "overrides": yaml.safe_load((args.run / ".hydra" / "overrides.yaml").read_text()) or [],
        "feature_version": FEATURE_VERSION,
        "wall_s_total": round((end - start).total_seconds()),
        "wall_note": args.wall_note,
        "test": json.loads((args.run / "comparison.json").read_text()),
        "metrics": json.loads((args.run / "metrics.json").read_text()),
        "memory": json.loads((args.run / "memory.json").read_text()),
    }
    for table in ("per_source", "per_device", "per_family"):
        result[table] = pd.read_csv(args.run / f"{table}.csv").round(4).to_dict(orient="records")
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}: gnn test MAPE {result['test']['gnn']['mape']:.1f}, {result['wall_s_total']} s")


if __name__ == "__main__":
    main()
