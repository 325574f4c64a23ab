"""Gather the per-study files of ``baseline_folds.py`` into one table: mean test MAPE per study and predictor.

    .venv/bin/python experiments/opcost_prior/collect.py experiments/opcost_prior/results_*.json \
        --out experiments/opcost_prior/results.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    table = {}
    for path in args.files:
        doc = json.loads(path.read_text())
        table[
            " ".join([doc["experiment"], *doc["overrides"]])
        ] = {  # one experiment may run with several overrides
            "runs": len(doc["folds"]),
            "mape": {name: m["mape"] for name, m in doc["mean"].items()},
            "within_10": {name: m["within_10"] for name, m in doc["mean"].items()},
        }
    names = list(next(iter(table.values()))["mape"])
    print("| study | runs | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for exp, row in table.items():
        print(f"| {exp} | {row['runs']} | " + " | ".join(f"{row['mape'][n]:.1f}" for n in names) + " |")
    args.out.write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
