"""How much of each timm family's bytes the views rule removes: every cached timm graph's bytes at one batch size,
with the rule on and off (``GNNPERF_COST_ABLATE=views``, ``gnnperf.graph.cost``), summed per family (the timm module
that defines the model, as the family split has it), with the op types that make the difference. With ``--on`` and
``--off`` (sweep folders of the five family folds, ``F/per_family.csv``, one per seed), also the GNN's test MAPE of
the families in each class of that ratio, with the rule on and off: each family's MAPE averaged over the seeds, the
families weighted by their test rows.

    .venv/bin/python experiments/timm_train_family/views_share.py .cache/graphs \\
        --on multirun/timm_family_fv6b_s0 multirun/timm_family_fv6b_s1 \\
        --off multirun/timm_family_ablate_views multirun/timm_family_ablate_views_s1 \\
        --out experiments/timm_train_family/results_views_share.json
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import pandas as pd

from gnnperf.errors import run_script
from gnnperf.graph.cost import graph_costs
from gnnperf.graph.ir import OpGraph
from gnnperf.zoo.resolve import resolve

CLASSES = (
    (1.10, float("inf")),
    (1.03, 1.10),
    (0.0, 1.03),
)  # bytes off / on: view-heavy, some views, next to none


def family_mape(sweeps: list[Path]) -> pd.DataFrame:
    """Per family: the GNN's test MAPE averaged over the sweeps (seeds), and its test rows."""
    runs = []
    for sweep in sweeps:
        per = [pd.read_csv(p) for p in sorted(sweep.glob("[0-9]/per_family.csv"))]
        frame = pd.concat(per).query("predictor == 'gnn'").set_index("family")
        runs.append(frame[["mape", "n"]])
    return pd.DataFrame(
        {"mape": pd.concat([r["mape"] for r in runs], axis=1).mean(axis=1), "n": runs[0]["n"]}
    )


def by_class(ratio: dict[str, float], on: pd.DataFrame, off: pd.DataFrame) -> list[dict]:
    out = []
    for lo, hi in CLASSES:
        fams = [f for f in on.index if f in ratio and lo <= ratio[f] < hi and f in off.index]
        n = on.loc[fams, "n"]
        out.append(
            {
                "bytes_off_over_on": [lo, hi if hi != float("inf") else None],
                "families": len(fams),
                "rows": int(n.sum()),
                "mape_on": round(float((on.loc[fams, "mape"] * n).sum() / n.sum()), 2),
                "mape_off": round(float((off.loc[fams, "mape"] * n).sum() / n.sum()), 2),
                "families_better_off": int((off.loc[fams, "mape"] < on.loc[fams, "mape"]).sum()),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cache", type=Path, help="graph cache folder (gnnperf data graphs --cache)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--per-family", type=int, default=3, help="graphs per family (the first in file order)")
    ap.add_argument("--on", type=Path, nargs="*", default=[], help="sweeps with the rule on (one per seed)")
    ap.add_argument("--off", type=Path, nargs="*", default=[], help="sweeps with GNNPERF_COST_ABLATE=views")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    on: dict[str, float] = defaultdict(float)
    off: dict[str, float] = defaultdict(float)
    by_op: dict[str, Counter] = defaultdict(Counter)
    graphs: dict[str, list[str]] = defaultdict(list)
    for path in sorted(args.cache.glob("*.json.gz")):
        with gzip.open(path, "rt") as f:
            graph = OpGraph.from_dict(json.load(f))
        if not graph.model_ref.startswith("timm:"):
            continue
        family = resolve(graph.model_ref).family
        if len(graphs[family]) >= args.per_family:
            continue
        graphs[family].append(graph.model_ref)
        costs_on, _ = graph_costs(graph, args.batch, off=frozenset())  # fused chains as the graphs are priced
        costs_off, _ = graph_costs(graph, args.batch, off=frozenset({"views"}))
        for node, a, b in zip(graph.nodes, costs_on, costs_off):
            moved_on, moved_off = a.bytes_read + a.bytes_written, b.bytes_read + b.bytes_written
            on[family] += moved_on
            off[family] += moved_off
            if moved_off > moved_on:
                by_op[family][node.op_type] += moved_off - moved_on
    rows = sorted(
        (
            {
                "family": fam,
                "graphs": graphs[fam],
                "bytes_off_over_on": round(off[fam] / on[fam], 4),
                "share_of_bytes_off": {op: round(v / off[fam], 4) for op, v in by_op[fam].most_common(4)},
            }
            for fam in on
            if on[fam] > 0
        ),
        key=lambda r: -r["bytes_off_over_on"],
    )
    result: dict = {"batch": args.batch, "families": rows}
    for r in rows:
        ops = ", ".join(f"{op} {v:.0%}" for op, v in r["share_of_bytes_off"].items())
        print(f"{r['family']:28s} {r['bytes_off_over_on']:5.2f}  {ops}")
    if args.on and args.off:
        ratio = {r["family"]: r["bytes_off_over_on"] for r in rows}
        result["on"], result["off"] = [str(p) for p in args.on], [str(p) for p in args.off]
        result["gnn_mape_by_class"] = by_class(ratio, family_mape(args.on), family_mape(args.off))
        for c in result["gnn_mape_by_class"]:
            print(c)
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
