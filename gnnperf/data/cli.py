"""``gnnperf data summary STORE``: what a sample store holds (the numbers behind a data card).

``gnnperf data import SOURCE PATH [--out STORE] [--limit N] [--json]``: read a public benchmark table with a
source adapter (:mod:`gnnperf.data.sources`) and print the import report; with ``--out`` the samples (and
the hardware records they need) go into a sample store. Rerunning adds nothing: rows whose ``sample_id`` is
already stored are not written again. Rows and files with problems are listed and the rest imported (exit 0);
a path with no tables of the source, or tables none of whose rows could be imported, is an error (exit 2, and
no store is created).

``gnnperf data graphs STORE... --cache DIR [--query Q] [--workers N] [--limit-s S] [--json]``: build the
graphs the stores' samples need into a graph cache, in parallel (see :mod:`gnnperf.data.prebuild`); exit 1 when
some failed (listed).

Examples::

    gnnperf data import timm-benchmark ../shared/external/timm/head --out datasets/public --limit 100
    gnnperf data import pytorch-gpu-benchmark ../shared/external/ryujaehun-pytorch-gpu-benchmark --json
    gnnperf data import neusight ../shared/external/neusight --out datasets/public
    gnnperf data graphs datasets/public --cache .cache/graphs --query "mode == 'train'" --workers 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gnnperf.errors import GnnperfError

if TYPE_CHECKING:
    from rich.table import Table

# Listed here so building the parser imports no adapter; a test checks it against the registry.
SOURCE_NAMES = ("timm-benchmark", "pytorch-gpu-benchmark", "neusight")
MAX_PROBLEM_LINES = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    s = sub.add_parser("summary", help="counts per family and hardware, status, noise (CV) and time ranges")
    s.add_argument("store", help="sample store directory")
    s.add_argument("--json", action="store_true")
    imp = sub.add_parser("import", help="import a public benchmark table into a sample store")
    imp.add_argument("source", help=f"source adapter: {', '.join(SOURCE_NAMES)}")
    imp.add_argument("path", help="the table's folder (or one file of it)")
    imp.add_argument("--out", metavar="STORE", help="sample store to write to (default: only report)")
    imp.add_argument("--limit", type=int, metavar="N", help="import at most N samples")
    imp.add_argument("--json", action="store_true", help="print the report as JSON")
    g = sub.add_parser("graphs", help="build the graphs of a store's samples into a graph cache, in parallel")
    g.add_argument("stores", nargs="+", help="sample store directories")
    g.add_argument("--cache", required=True, metavar="DIR", help="graph cache directory")
    g.add_argument("--query", help="pandas query selecting the samples (as in the data config)")
    g.add_argument(
        "--workers", type=int, default=1, help="worker processes (one torch thread each); 0: in this process"
    )
    g.add_argument("--limit-s", type=int, default=300, help="time limit per model; over it counts as failed")
    g.add_argument("--json", action="store_true", help="print one row per graph as JSON lines")


def import_source(source: str, path: str, out: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """Read ``path`` with the adapter ``source``; with ``out``, store the new samples and hardware records.

    Returns the import report as a dict plus ``written`` (new samples stored), ``already_stored`` and
    ``hardware_records`` (record files written or kept).
    """
    from gnnperf.data.sources import get_source

    adapter = get_source(source)
    if not str(path).strip():  # Path("") is the current directory
        raise GnnperfError(f"no path given to import {source} tables from")
    if out is not None:
        _check_writable(out)  # before reading: a whole timm import takes minutes
    rows, report = adapter.read(path, limit=limit)
    if report.files == 0:
        raise GnnperfError(f"no {source} tables found under {path}")
    result: dict[str, Any] = report.to_dict()
    result.update(written=0, already_stored=0, hardware_records=[])
    if out is None or not rows:
        return result
    from gnnperf.apps.generate import save_hardware_record
    from gnnperf.data.store import SampleStore

    store = SampleStore(out)
    # what a read returns (a shard that cannot be read whole holds nothing a dataset would see)
    stored = store.read().set_index("sample_id")
    new = [r for r in rows if r["sample_id"] not in stored.index]
    differing = _differing(stored, [r for r in rows if r["sample_id"] in stored.index])
    used = {r["hardware"] for r in rows}
    try:  # the records first: samples stored without the specs of their hardware could not be used
        records = [save_hardware_record(store.root, spec) for spec in adapter.hardware() if spec.name in used]
    except OSError as e:
        raise GnnperfError(
            f"no samples stored in {out}: a hardware record could not be written: {e}"
        ) from None
    if new:
        try:  # one shard, written whole or not at all (SampleStore.write_shard)
            store.write_shard(new)
        except OSError as e:
            raise GnnperfError(f"no samples stored in {out}: the shard could not be written: {e}") from None
    result.update(
        written=len(new),
        already_stored=len(rows) - len(new),
        stored_differently=differing,
        hardware_records=[str(p) for p in records],
    )
    return result


# What a sample measured; a row of the same sample_id with other values is another measurement of it.
MEASURED = ("iteration_time_ms", "time_p10_ms", "time_p90_ms", "n_iters")


def _differing(stored: Any, rows: list[dict[str, Any]]) -> list[str]:
    """``sample_id`` of the ``rows`` stored (``stored``, by sample_id) with other measured values (kept)."""
    import numpy as np
    import pandas as pd

    if not rows:
        return []
    new = pd.DataFrame(rows).set_index("sample_id")[list(MEASURED)].astype(float)
    old = stored.loc[new.index, list(MEASURED)].astype(float)
    differ = ~np.isclose(new.to_numpy(), old.to_numpy(), rtol=1e-6, equal_nan=True)
    return sorted(map(str, new.index[differ.any(axis=1)]))


def _check_writable(out: str) -> None:
    """Raise a user error if a sample store cannot be created or written at ``out``; creates nothing."""
    p = Path(out).absolute()
    existing = next(q for q in (p, *p.parents) if q.exists())
    if not existing.is_dir():
        raise GnnperfError(f"sample store {out}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise GnnperfError(f"sample store {out} is not writable ({existing})")


def _print_import(result: dict[str, Any]) -> None:
    problems = result["problems"]
    hardware = ", ".join(f"{k} {v}" for k, v in result["hardware"].items()) or "-"
    limit = " (stopped at --limit)" if result["limit_reached"] else ""
    print(
        f"{result['source']}: {result['samples']} samples from {result['rows']} rows in {result['files']} files "
        f"({result['files_skipped']} skipped), {len(problems)} problems{limit}"
    )
    print(f"hardware: {hardware}")
    if result["written"] or result["already_stored"]:
        print(f"stored: {result['written']} new, {result['already_stored']} already in the store")
    if result.get("stored_differently"):
        print(
            f"{len(result['stored_differently'])} of those are stored with other measured values (the store keeps "
            "its own, e.g. from an earlier copy of the table): import into a new store to take these"
        )
    for line in problems[:MAX_PROBLEM_LINES]:
        print(f"  {line}")
    if len(problems) > MAX_PROBLEM_LINES:
        print(f"  ... {len(problems) - MAX_PROBLEM_LINES} more (--json lists all)")


def summary(store: str) -> dict:
    from gnnperf.data.store import SampleStore

    sample_store = SampleStore(store, readonly=True)
    df = sample_store.read()
    if df.empty:
        shards = len(sample_store.shards())
        why = f"none of its {shards} shards could be read" if shards else "no shard-*.parquet files in it"
        raise GnnperfError(f"sample store {store} holds no samples ({why})")
    ok = df[df["status"] == "ok"]
    cv = ok["time_cv"].astype(float)
    return {
        "samples": len(df),
        "status": df["status"].value_counts().to_dict(),
        "models": int(ok["model_ref"].nunique()),
        "families": int(ok["family"].nunique()),
        "hardware": ok["hardware"].value_counts().to_dict(),
        "batch_sizes": sorted(int(b) for b in ok["batch_size"].unique()),
        "software": sorted(ok["software"].unique().tolist()),
        "per_family_hardware": ok.groupby(["family", "hardware"])
        .size()
        .unstack(fill_value=0)
        .to_dict(orient="index"),
        "time_cv_quantiles": {q: _finite(cv.quantile(q)) for q in (0.1, 0.5, 0.9, 0.99)},
        "time_cv_per_hardware_median": {
            hw: _finite(v) for hw, v in ok.groupby("hardware")["time_cv"].median().items()
        },
        "iteration_time_ms_range": [
            _finite(ok["iteration_time_ms"].min()),
            _finite(ok["iteration_time_ms"].max()),
        ],
        "iteration_time_ms_median": _finite(ok["iteration_time_ms"].median()),
        "n_iters_median": _finite(ok["n_iters"].median()),
    }


def _finite(value: float) -> float | None:
    """JSON has no NaN: a statistic of no values (sources that record no CV, a store without an ok row) is null."""
    return None if math.isnan(value) else float(value)


def _family_hardware_table(counts: dict[str, dict[str, int]], hardware: list[str]) -> Table:
    """Samples per family and device, the longer of the two lists down the rows so that the columns fit.

    Column headers fold instead of being cut: cut, ``a100-pcie-40gb`` and ``a100-sxm4-40gb`` read alike.
    """
    from rich.table import Column, Table

    families = list(counts)
    if len(hardware) <= len(families):
        rows, cols, get = families, hardware, lambda r, c: counts[r].get(c, 0)
        corner = "family"
    else:
        rows, cols, get = hardware, families, lambda r, c: counts[c].get(r, 0)
        corner = "hardware"
    table = Table(corner, *(Column(c, overflow="fold") for c in cols))
    for r in rows:
        table.add_row(r, *(str(get(r, c)) for c in cols))
    return table


def _graphs(args: argparse.Namespace) -> int:
    from gnnperf.data.prebuild import graph_keys, iter_prebuild

    if args.workers < 0 or args.limit_s < 1:
        bad = f"--workers {args.workers}" if args.workers < 0 else f"--limit-s {args.limit_s}"
        raise GnnperfError(f"{bad}: --workers must be 0 or more, --limit-s 1 or more")
    rows = []
    for row in iter_prebuild(graph_keys(args.stores, args.query), args.cache, args.workers, args.limit_s):
        rows.append(row)
        if args.json:  # streamed: a long run shows progress and an interrupted one keeps its lines
            print(json.dumps(row), flush=True)
    failed = [r for r in rows if not r["ok"]]
    if not args.json:
        print(f"graphs: {len(rows) - len(failed)} of {len(rows)} in {args.cache}")
        for r in failed:
            print(f"  {r['model_ref']} at {r['input_shape']}: {r['reason']}")
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    if args.action == "graphs":
        return _graphs(args)
    if args.action == "import":
        result = import_source(args.source, args.path, args.out, args.limit)
        if args.json:
            print(json.dumps(result, indent=1))
        else:
            _print_import(result)
        if result["samples"] == 0:
            why = (
                "no row of its tables could be used (listed)"
                if result["problems"]
                else "its tables have no rows"
            )
            raise GnnperfError(f"nothing imported from {args.path}: {why}")
        return 0
    s = summary(args.store)
    if args.json:
        print(json.dumps(s, indent=1))
        return 0
    from gnnperf.console import stdout_console

    console = stdout_console()
    console.print(f"{s['samples']} samples {s['status']}; {s['models']} models in {s['families']} families")
    console.print(_family_hardware_table(s["per_family_hardware"], list(s["hardware"])))
    q = s["time_cv_quantiles"]
    if all(v is None for v in q.values()):  # public tables (NeuSight) give one time per row
        console.print("time CV: not recorded by this store's sources")
    else:
        console.print(f"time CV p10 {q[0.1]:.3f}  median {q[0.5]:.3f}  p90 {q[0.9]:.3f}  p99 {q[0.99]:.3f}")
    lo, hi = s["iteration_time_ms_range"]
    if lo is None:
        console.print("no sample of this store has status ok: no iteration times")
        return 0
    console.print(
        f"iteration time {lo:.2f} .. {hi:.1f} ms (median {s['iteration_time_ms_median']:.1f}); software {s['software']}"
    )
    return 0
