"""Markdown table of a summarised sweep (results.json from summarize_sweep.py): one row per job.

.venv/bin/python experiments/report_table.py experiments/<study>/results.json [--by hardware|family|source]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

PREDICTORS = ("gnn", "flops", "roofline", "gbm", "sequence")


def held_out(job: dict, by: str) -> str:
    rows = job.get(f"per_{by}", [])
    names = sorted({r[by if by != "device" else "hardware"] for r in rows if r["predictor"] == "gnn"})
    return ", ".join(names) if len(names) <= 4 else f"{len(names)} {by}s"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("results", type=Path)
    p.add_argument("--by", default="device", choices=["device", "family", "source"])
    p.add_argument(
        "--keys", nargs="*", default=[], help="override keys to show (default: all but experiment)"
    )
    args = p.parse_args()
    res = json.loads(args.results.read_text())
    head = [
        "job",
        "held out",
        "overrides",
        *(f"{n} MAPE" for n in PREDICTORS),
        "GNN med APE",
        "GNN ≤10%",
        "n",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for job in res["jobs"]:
        o = {
            k: v
            for k, v in job["overrides"].items()
            if k != "experiment" and (not args.keys or k in args.keys)
        }
        t = job["test"]
        best = min((t[n]["mape"] for n in PREDICTORS if n != "gnn" and n in t), default=float("nan"))
        cells = [f"**{t[n]['mape']:.1f}**" if n in t and t[n]["mape"] <= best and n != "gnn" else
                 (f"{t[n]['mape']:.1f}" if n in t else "-") for n in PREDICTORS]  # fmt: skip
        gnn = t["gnn"]
        row = [str(job["job"]), held_out(job, args.by), " ".join(f"{k}={v}" for k, v in o.items()), *cells]
        row += [f"{gnn['median_ape']:.1f}", f"{gnn['within_10']:.2f}", str(int(gnn["n"]))]
        print("| " + " | ".join(row) + " |")
    print()
    for group, metrics in res["mean_over_jobs"].items():
        means = ", ".join(f"{n} {metrics[f'{n}/mape']:.1f}" for n in PREDICTORS if f"{n}/mape" in metrics)
        print(f"- mean MAPE over jobs ({group}): {means}")


if __name__ == "__main__":
    main()
