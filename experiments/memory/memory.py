"""The training-memory estimate (gnnperf/graph/memory.py) against real outcomes.

Two checks:

- ``peaks``: every sample of the given stores with ``peak_memory_mb`` (``torch.cuda.max_memory_allocated`` over
  warm-up and timed training steps, this project's harness) is estimated from its model reference and workload
  alone and scored: absolute percentage error, the share within 20%, the median ratio estimate / measured.
- ``ran``: every single-GPU training row of the given stores ran, so its step fitted in the device's memory; the
  share the estimate says fits (NeuSight's transformer rows: fp32, eager attention, no optimizer step).
- ``oom``: timm's benchmark (the RTX 3090 training tables) started every model at batch 512 and, after an
  out-of-memory error, retried at ``timm.utils.decay_batch_step`` of the batch (512, 384, 256, 192, 128, ...).
  So a row's batch fitted in the card's memory and, below 512, the step above it did not. For every row the
  estimate at both batches is compared with the data-sheet memory, the verdict ``gnnperf predict`` prints.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from timm.utils import decay_batch_step

from gnnperf.data.processing import workload_from_row
from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError
from gnnperf.graph.memory import training_memory
from gnnperf.hardware.table import get_spec

FIRST_BATCH = 512  # timm benchmark.py's starting batch size for these tables (SOURCE.md: "Max 512")


def score(rows: pd.DataFrame) -> dict[str, float]:
    ratio = rows["estimate_mb"] / rows["peak_memory_mb"]
    ape = (ratio - 1).abs()
    return {
        "n": len(rows),
        "mape": float(ape.mean() * 100),
        "median_ape": float(ape.median() * 100),
        "within_20pct": float((ape <= 0.2).mean()),
        "median_ratio": float(ratio.median()),
        "min_ratio": float(ratio.min()),
        "max_ratio": float(ratio.max()),
    }


def peaks(samples: pd.DataFrame) -> dict:
    rows = []
    for _, row in samples.iterrows():
        estimate = training_memory(row["model_ref"], workload_from_row(row))
        rows.append({
            "model_ref": row["model_ref"], "hardware": row["hardware"], "batch_size": int(row["batch_size"]),
            "precision": row["precision"], "optimizer": row["optimizer"], "timed": row["timed"],
            "peak_memory_mb": float(row["peak_memory_mb"]), "estimate_mb": estimate.total_mb,
            **{k: v for k, v in estimate.as_dict().items() if k != "total_mb"},
        })  # fmt: skip
    table = pd.DataFrame(rows)
    table["ratio"] = table["estimate_mb"] / table["peak_memory_mb"]
    return {
        "all": score(table),
        "above_1gb": score(table[table["peak_memory_mb"] > 1024]),
        "below_1gb": score(table[table["peak_memory_mb"] <= 1024]),
        "by_precision": {p: score(g) for p, g in table.groupby("precision")},
        "rows": table.sort_values("ratio").round(3).to_dict("records"),
    }


def oom(samples: pd.DataFrame, bracket: bool = True) -> dict:
    """Verdicts for rows that ran and, with ``bracket``, for timm's batch step above each, which ran out."""
    steps = [FIRST_BATCH]
    while steps[-1] > 1:
        steps.append(decay_batch_step(steps[-1]))
    above = dict(zip(steps[1:], steps[:-1], strict=True)) if bracket else {}  # batch -> the step tried before
    rows, failed = [], []
    for _, row in samples.iterrows():
        workload = workload_from_row(row)
        capacity_mb = get_spec(row["hardware"]).memory_gb * 1024
        try:
            ran = training_memory(row["model_ref"], workload).total_mb
            b = int(row["batch_size"])
            oomed = (
                training_memory(row["model_ref"], replace(workload, batch_size=above[b])).total_mb
                if b in above
                else None
            )
        except GnnperfError as e:
            failed.append({"model_ref": row["model_ref"], "error": str(e)})
            continue
        rows.append({
            "model_ref": row["model_ref"], "batch_size": b, "capacity_mb": capacity_mb,
            "estimate_mb": ran, "estimate_above_mb": oomed,
        })  # fmt: skip
    t = pd.DataFrame(rows)
    ran_fits = t["estimate_mb"] <= t["capacity_mb"]
    out = {
        "rows": len(t),
        "trace_failed": len(failed),
        "ran_and_estimated_to_fit": float(ran_fits.mean()),
        "estimate_over_capacity_quantiles": {
            q: float((t["estimate_mb"] / t["capacity_mb"]).quantile(q)) for q in (0.05, 0.5, 0.95, 1.0)
        },
        "wrong_ran": t[~ran_fits].round(1).to_dict("records"),
        "failed": failed,
    }
    if not bracket:
        return out
    bracketed = t[t["estimate_above_mb"].notna()]
    above_fails = bracketed["estimate_above_mb"] > bracketed["capacity_mb"]
    return {
        **out,
        "rows_below_first_batch": len(bracketed),
        "oomed_and_estimated_not_to_fit": float(above_fails.mean()),
        "both_verdicts_right": float((ran_fits.loc[bracketed.index] & above_fails).mean()),
        "estimate_above_over_capacity_quantiles": {
            q: float((bracketed["estimate_above_mb"] / bracketed["capacity_mb"]).quantile(q))
            for q in (0.0, 0.05, 0.5, 0.95)
        },
        "wrong_oomed": bracketed[~above_fails].round(1).to_dict("records"),
        "usable_share_sweep": usable_share_sweep(t, bracketed),
        "table": t.drop(columns="capacity_mb").round(1).to_dict("records"),
    }


def usable_share_sweep(t: pd.DataFrame, bracketed: pd.DataFrame) -> dict:
    """The verdicts if only a share of the data-sheet memory were usable (context, allocator fragmentation)."""
    out = {}
    for share in np.round(np.arange(0.70, 1.001, 0.02), 2):
        limit = share * t["capacity_mb"]
        ran = t["estimate_mb"] <= limit
        above = bracketed["estimate_above_mb"] > limit.loc[bracketed.index]
        out[float(share)] = {
            "ran_estimated_to_fit": float(ran.mean()),
            "oomed_estimated_not_to_fit": float(above.mean()),
            "both_right": float((ran.loc[bracketed.index] & above).mean()),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--peaks", nargs="+", default=[], help="stores with measured peak memory (datasets/h200)"
    )
    parser.add_argument(
        "--oom", nargs="+", default=[], help="stores with timm's RTX 3090 training rows (.cache/stores/timm)"
    )
    parser.add_argument("--oom-query", default="mode == 'train' and memory_format == 'contiguous'")
    parser.add_argument(
        "--unfused-attention",
        action="store_true",
        help="trace timm's attention as explicit matrix products (timm before torch 2.0, the 2022 tables' set-up)",
    )
    parser.add_argument(
        "--ran", nargs="+", default=[], help="stores of rows that ran (.cache/stores/neusight)"
    )
    parser.add_argument("--ran-query", default="mode == 'train' and num_devices == 1")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    result = {}
    if args.peaks:
        samples = pd.concat(
            [SampleStore(s, readonly=True).read(status="ok") for s in args.peaks], ignore_index=True
        )
        result["peaks"] = peaks(samples[samples["peak_memory_mb"].notna()])
        for name in ("all", "above_1gb", "below_1gb"):
            s = result["peaks"][name]
            print(
                f"peaks {name:10s} n={s['n']:3d}  MAPE {s['mape']:5.1f}%  median APE {s['median_ape']:5.1f}%  "
                f"within 20% {s['within_20pct']:.2f}  median estimate/measured {s['median_ratio']:.2f}"
            )
    if args.unfused_attention:
        import timm.layers

        timm.layers.set_fused_attn(False)
    if args.oom:
        samples = pd.concat(
            [SampleStore(s, readonly=True).read(status="ok") for s in args.oom], ignore_index=True
        )
        result["oom"] = oom(samples.query(args.oom_query))
        r = result["oom"]
        print(
            f"oom: {r['rows']} rows ({r['trace_failed']} not traced); ran and estimated to fit "
            f"{r['ran_and_estimated_to_fit']:.1%}; of {r['rows_below_first_batch']} below batch {FIRST_BATCH}, the "
            f"batch above estimated not to fit {r['oomed_and_estimated_not_to_fit']:.1%}, both right "
            f"{r['both_verdicts_right']:.1%}"
        )
    if args.ran:
        samples = pd.concat(
            [SampleStore(s, readonly=True).read(status="ok") for s in args.ran], ignore_index=True
        )
        result["ran"] = oom(samples.query(args.ran_query), bracket=False)
        r = result["ran"]
        print(
            f"ran: {r['rows']} rows ({r['trace_failed']} not traced); estimated to fit {r['ran_and_estimated_to_fit']:.1%}"
        )
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
