"""Build the graphs a set of samples needs, in parallel worker processes, into a graph cache.

:class:`~gnnperf.data.dataset.PerfDataset` builds missing graphs one after the other in its ``process`` step;
for a public table of hundreds of models that is an hour of exports on one core. This fills the cache first,
one model per task in ``workers`` spawned processes (each at one torch thread), with a time limit per model so
one pathological export cannot stall the rest. A dataset with ``build_graphs=False`` then reads the cache.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from gnnperf.errors import GnnperfError


def graph_keys(stores: Sequence[str | Path], query: str | None = None) -> list[tuple[str, str]]:
    """Sorted distinct ``(model_ref, input_shape)`` pairs of the ``ok`` samples in ``stores`` (after ``query``)."""
    import pandas as pd

    from gnnperf.data.store import SampleStore, select_samples

    frames = [SampleStore(s, readonly=True).read(status="ok") for s in stores]
    samples = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if samples.empty:
        raise GnnperfError(f"no ok samples in {', '.join(map(str, stores))}")
    if query:
        samples = select_samples(samples, query)
    pairs = samples[["model_ref", "input_shape"]].drop_duplicates()
    return sorted(zip(pairs["model_ref"], pairs["input_shape"]))


def _timeout(signum: int, frame: Any) -> None:
    raise TimeoutError


def _build_one(job: tuple[str, str, str, int]) -> dict[str, Any]:
    ref, shape, cache_dir, limit_s = job
    import torch

    from gnnperf.graph.build import GraphCache, build_graph

    torch.set_num_threads(1)
    t = time.perf_counter()
    signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(limit_s)
    row: dict[str, Any] = {"model_ref": ref, "input_shape": shape, "ok": False}
    try:
        build_graph(ref, tuple(int(d) for d in shape.split(",")), cache=GraphCache(cache_dir))
        row["ok"] = True
    except TimeoutError:
        row["reason"] = f"timeout after {limit_s} s"
    except Exception as e:  # exporters fail in many ways; the rest of the table goes on
        row["reason"] = f"{type(e).__name__}: {e}"[:300]
    finally:
        signal.alarm(0)
    row["seconds"] = time.perf_counter() - t
    return row


def iter_prebuild(
    keys: Sequence[tuple[str, str]], cache_dir: str | Path, workers: int = 1, limit_s: int = 300
) -> Iterator[dict[str, Any]]:
    """Build every ``(model_ref, input_shape)`` graph into ``cache_dir``, yielding one row per key as it finishes.

    Rows: ``model_ref``, ``input_shape``, ``ok``, ``seconds`` (in the worker, imports excluded) and ``reason``
    when not ok. Cached graphs are hits (milliseconds).
    """
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    jobs = [(ref, shape, str(cache_dir), int(limit_s)) for ref, shape in keys]
    if workers <= 1:
        yield from map(_build_one, jobs)
        return
    # spawn: a fork of a process that has run torch threads can deadlock; a fresh worker every 20 models
    # returns the memory that large exports leave behind
    with mp.get_context("spawn").Pool(workers, maxtasksperchild=20) as pool:
        yield from pool.imap_unordered(_build_one, jobs)


def prebuild_graphs(
    keys: Sequence[tuple[str, str]], cache_dir: str | Path, workers: int = 1, limit_s: int = 300
) -> list[dict[str, Any]]:
    """All rows of :func:`iter_prebuild`."""
    return list(iter_prebuild(keys, cache_dir, workers, limit_s))
