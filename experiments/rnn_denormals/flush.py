"""Re-time a store's rows with the project's harness, with PyTorch's default and with flush-to-zero on.

Subnormal floats are slow on Intel cores; the harness keeps PyTorch's default (no flushing), as a user's script runs.
For each selected row of ``--store`` (its model reference, batch size, optimizer and timed region, on this machine's
CPU at the row's thread count) this measures the step twice, ``torch.set_flush_denormal(False)`` then ``(True)``,
and writes both medians beside the stored one: where flushing makes the step several times faster, the row's time is
the arithmetic on subnormal numbers, not the network's ops.

    .venv/bin/python experiments/rnn_denormals/flush.py --store datasets/cpu_m167 --batch 16 \\
        --family lstm --family gru --family gpt --family transformer_encoder --family resnet \\
        --out experiments/rnn_denormals/results_flush_m167.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from gnnperf.data.processing import device_specs, workload_from_row
from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError, run_script
from gnnperf.measure.harness import measure
from gnnperf.measure.workload import MeasureSettings
from gnnperf.zoo.resolve import resolve


def timed(spec: Any, row: pd.Series, threads: int, flush: bool) -> float:
    """The harness's median step for the row's workload on this CPU at ``threads``, flush-to-zero as given."""
    settings = MeasureSettings(device="cpu", threads=threads)
    torch.set_flush_denormal(flush)
    try:
        result = measure(spec, workload_from_row(row), settings)
    finally:
        torch.set_flush_denormal(False)
    if result["status"] != "ok":
        raise GnnperfError(f"{row.model_ref} batch {row.batch_size}: {result['status']} {result['error']}")
    return float(result["iteration_time_ms"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--family", action="append", required=True, help="a zoo family to re-time (repeat)")
    ap.add_argument("--batch", type=int, action="append", help="only these batch sizes (repeat)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if not torch.set_flush_denormal(False):
        raise GnnperfError(
            "this CPU does not support flush-to-zero (torch.set_flush_denormal returned False)"
        )

    rows = SampleStore(args.store).read().query("status == 'ok'")
    rows = rows[rows.family.isin(args.family) & rows["mode"].eq("train")]
    if args.batch:
        rows = rows[rows.batch_size.isin(args.batch)]
    if rows.empty:
        raise GnnperfError(f"no ok training rows of {args.family} in {args.store}")
    threads = {
        name: spec.threads for name, spec in device_specs([args.store], list(rows.hardware.unique())).items()
    }
    out = []
    for _, row in rows.iterrows():
        spec = resolve(row.model_ref)
        default, flushed = (timed(spec, row, threads[row.hardware] or 1, flush) for flush in (False, True))
        out.append({
            "model_ref": row.model_ref, "family": row.family, "batch_size": int(row.batch_size),
            "optimizer": row.optimizer, "stored_ms": round(float(row.iteration_time_ms), 2),
            "default_ms": round(default, 2), "flushed_ms": round(flushed, 2),
        })  # fmt: skip
        print(f"{row.family:20s} b{row.batch_size:<3d} {row.optimizer:6s} stored {row.iteration_time_ms:8.1f}"
              f"  default {default:8.1f}  flushed {flushed:8.1f}")  # fmt: skip
    frame = pd.DataFrame(out)
    ratio = frame.default_ms / frame.flushed_ms
    summary = {
        family: {
            "rows": int(len(g)),
            "default_over_flushed_median": round(float(np.median(ratio[g.index])), 2),
            "default_over_flushed_max": round(float(ratio[g.index].max()), 2),
            "rows_over_2x": int((ratio[g.index] > 2).sum()),
            "stored_over_default_median": round(float(np.median(g.stored_ms / g.default_ms)), 2),
        }
        for family, g in frame.groupby("family")
    }
    args.out.write_text(
        json.dumps({"store": str(args.store), "per_family": summary, "rows": out}, indent=1) + "\n"
    )
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    run_script(main)
