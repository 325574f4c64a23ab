"""Summarise coverage.jsonl (also after an interrupted run) into a results file.

.venv/bin/python experiments/graph_speed/summarize.py experiments/graph_speed/results_coverage.json
"""

import json
import statistics
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

r = [json.loads(line) for line in Path("experiments/graph_speed/coverage.jsonl").read_text().splitlines()]
df = pd.read_csv("../shared/external/timm/head/benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv")
done = {x["model"] for x in r}
missing = [m for m in df.model if m not in done]
ok = [x for x in r if x["ok"]]
bad = [x for x in r if not x["ok"]]


def cls(reason):
    if "unknown timm model" in reason or "cannot be created" in reason:
        return "name no longer in timm"
    if "kernel of unknown shape" in reason:
        return "dynamic-kernel convolution (CondConv): both exporters fail"
    if "no static shape" in reason:
        return "dynamo graph with sequence ops not lowered to Split: shapes not inferred"
    if "timeout" in reason:
        return "over the per-model time limit"
    return "other"


c = Counter(cls(x["reason"]) for x in bad)
secs = [x["seconds"] for x in ok]
summary = {
    "table_models": len(df),
    "attempted": len(r),
    "ok": len(ok),
    "failed": len(bad),
    "not_reached": len(missing),
    "ok_share_of_attempted": len(ok) / len(r),
    "ok_share_of_table": len(ok) / len(df),
    "ok_share_of_existing_models": len(ok) / (len(r) - c["name no longer in timm"]),
    "mean_s_per_ok_model": statistics.mean(secs),
    "median_s_per_ok_model": statistics.median(secs),
    "p90_s_per_ok_model": sorted(secs)[int(0.9 * len(secs))],
    "failure_classes": dict(c),
    "failures": bad,
    "not_reached_models": missing,
}
Path(sys.argv[1]).write_text(json.dumps(summary, indent=1))
print(json.dumps({k: v for k, v in summary.items() if k not in ("failures", "not_reached_models")}, indent=1))
for x in bad:
    print(" -", x["model"], "|", cls(x["reason"]))
