"""Graph front-end speed and coverage.

1. export + graph for timm resnet50 and vit_base_patch16_224 (model built with random weights, exported, IR
   built; imports excluded), and a cache hit; medians of repeats.
2. every model of the timm RTX 3090 training table through ``gnnperf.data.prebuild`` (spawned workers at one
   thread each): graph built or not (reason), seconds per model in its worker, wall time per model.

    .venv/bin/python experiments/graph_speed/run.py [--table PATH] [--limit N] [--workers 1]
        [--skip-single | --skip-coverage] [--limit-s S] [--cache-dir DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
DEFAULT_TABLE = (
    HERE.parents[1] / ".." / "shared/external/timm/head/benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv"
)


def _timed_build(ref: str, shape: tuple[int, ...] | None, cache_dir: str | None) -> float:
    from gnnperf.graph.build import GraphCache, build_graph

    t = time.perf_counter()
    build_graph(ref, shape, cache=GraphCache(cache_dir) if cache_dir else None)
    return time.perf_counter() - t


def single_models(repeats: int) -> dict:
    import timm  # noqa: F401  (imports are not part of what is timed)
    import torch

    torch.set_num_threads(1)
    out = {}
    for ref in ("timm:resnet50", "timm:vit_base_patch16_224"):
        _timed_build(ref, None, None)  # first call pays lazy imports inside torch.onnx
        times = [_timed_build(ref, None, None) for _ in range(repeats)]
        with tempfile.TemporaryDirectory() as d:
            _timed_build(ref, None, d)
            hits = [_timed_build(ref, None, d) for _ in range(10)]
        out[ref] = {
            "export_and_graph_s_median": statistics.median(times),
            "export_and_graph_s": times,
            "cache_hit_ms_median": 1e3 * statistics.median(hits),
        }
        print(ref, json.dumps(out[ref]), flush=True)
    return out


def coverage(
    table: Path, limit: int | None, workers: int, limit_s: int, log: Path, cache_dir: Path | None
) -> dict:
    """Every model of ``table`` through :func:`gnnperf.data.prebuild.iter_prebuild` (spawned workers at one
    thread each, a time limit per model), one line per finished model in ``log``."""
    from gnnperf.data.prebuild import iter_prebuild

    df = pd.read_csv(table)
    keys = [(f"timm:{n}", f"3,{s},{s}") for n, s in zip(df["model"], df["train_img_size"].astype(int))][
        :limit
    ]
    results = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, open(log, "w") as out:
        d = str(cache_dir) if cache_dir else tmp  # a kept cache serves the timm experiments afterwards
        for i, r in enumerate(iter_prebuild(keys, d, workers, limit_s), 1):
            r = {"model": r.pop("model_ref").removeprefix("timm:"), **r}
            results.append(r)
            out.write(json.dumps(r) + "\n")  # partial results survive an interrupted run
            out.flush()
            if i % 25 == 0:
                ok = sum(x["ok"] for x in results)
                print(f"{i}/{len(keys)} ok={ok} elapsed={time.perf_counter() - t0:.0f}s", flush=True)
    wall = time.perf_counter() - t0
    ok = [r for r in results if r["ok"]]
    return {
        "table": str(table.name),
        "workers": workers,
        "models": len(results),
        "ok": len(ok),
        "ok_share": len(ok) / max(len(results), 1),
        "wall_s": wall,
        "wall_s_per_model": wall / max(len(results), 1),
        "median_s_per_ok_model": statistics.median(r["seconds"] for r in ok) if ok else None,
        "mean_s_per_ok_model": statistics.mean(r["seconds"] for r in ok) if ok else None,
        "failures": [r for r in results if not r["ok"]],
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--limit-s", type=int, default=60, help="per-model time limit (counted as a failure)")
    p.add_argument("--skip-single", action="store_true", help="only the coverage survey")
    p.add_argument("--skip-coverage", action="store_true", help="only the single models")
    p.add_argument("--out", type=Path, default=HERE / "results.json")
    p.add_argument("--cache-dir", type=Path, default=None, help="keep the graphs here (default: a temp dir)")
    args = p.parse_args()
    results = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": mp.cpu_count(),
            "python": sys.version.split()[0],
        },
        "single": {} if args.skip_single else single_models(args.repeats),
    }
    if not args.skip_coverage:
        log = HERE / "coverage.jsonl"
        cov = coverage(args.table.resolve(), args.limit, args.workers, args.limit_s, log, args.cache_dir)
        results["coverage"] = cov
        print(
            f"coverage: {cov['ok']}/{cov['models']} ({cov['ok_share']:.1%}), {cov['wall_s_per_model']:.2f} s per model"
        )
    args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
