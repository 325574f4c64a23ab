"""Build the graphs a set of samples needs, in parallel worker processes, into a graph cache.

:class:`~gnnperf.data.dataset.PerfDataset` builds missing graphs one after the other in its ``process`` step;
for a public table of hundreds of models that is an hour of exports on one core. This fills the cache first,
one model per task in ``workers`` spawned processes (each at one torch thread), with a time limit per model so
one pathological export cannot stall the rest, and a worker the system kills (out of memory) costs only its own
model: the models that were in flight are retried one at a time, and the one whose lone worker dies again is
reported as failed. A dataset with ``build_graphs=False`` then reads the cache.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
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
    """Build one graph into the cache; a row saying whether it worked (the worker's job)."""
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


Job = tuple[str, str, str, int]  # (model_ref, input_shape, cache_dir, limit_s)
Build = Callable[[Job], dict[str, Any]]
# A fresh pool every 20 models per worker returns the memory that large exports leave behind. Not through
# ProcessPoolExecutor(max_tasks_per_child=...): on Python 3.11-3.13 a pool that retires a worker with work still
# queued can stop spawning replacements and hang for good (CPython gh-115634; seen here at 40 of 830 timm models).
TASKS_PER_WORKER = 20


def _marker(started: str, job: Job) -> Path:
    return Path(started) / hashlib.sha1(f"{job[0]}@{job[1]}".encode()).hexdigest()


def _started_then(build: Build, job: Job, started: str) -> dict[str, Any]:
    _marker(started, job).touch()  # the parent learns which models were in flight when a worker died
    return build(job)


def _died(job: Job) -> dict[str, Any]:
    reason = "its worker process died (killed by the system; out of memory?) when built alone"
    return {"model_ref": job[0], "input_shape": job[1], "ok": False, "reason": reason, "seconds": None}


def _pooled(jobs: list[Job], workers: int, build: Build) -> Iterator[dict[str, Any]]:
    """Rows of ``jobs`` from spawned worker pools, surviving workers that die (see the module docstring)."""
    # spawn: a fork of a process that has run torch threads can deadlock
    ctx = mp.get_context("spawn")
    todo: list[Job] = list(jobs)
    suspects: list[Job] = []  # in flight when a worker died: each is built alone, in a pool of its own
    with tempfile.TemporaryDirectory(prefix="gnnperf-prebuild-") as started:
        while todo or suspects:
            batch = suspects[:1] or todo[: workers * TASKS_PER_WORKER]
            for marker in Path(started).iterdir():
                marker.unlink()
            finished: set[Job] = set()
            pool = ProcessPoolExecutor(1 if suspects else workers, mp_context=ctx)
            try:
                futures = {pool.submit(_started_then, build, job, started): job for job in batch}
                for future in as_completed(futures):
                    row = future.result()  # BrokenProcessPool when a worker died
                    finished.add(futures[future])
                    yield row
            except BrokenProcessPool:
                if suspects:  # the suspect's own worker died: that model is the cause
                    yield _died(batch[0])
                    finished.add(batch[0])
                else:
                    unfinished = [j for j in batch if j not in finished]
                    suspects = [j for j in unfinished if _marker(started, j).exists()] or unfinished[:1]
            finally:  # also when the caller stops early: queued models are dropped, not built first
                pool.shutdown(wait=True, cancel_futures=True)
            suspects = [j for j in suspects if j not in finished]
            todo = [j for j in todo if j not in finished and j not in suspects]


def iter_prebuild(
    keys: Sequence[tuple[str, str]],
    cache_dir: str | Path,
    workers: int = 1,
    limit_s: int = 300,
    build: Build = _build_one,
) -> Iterator[dict[str, Any]]:
    """Build every ``(model_ref, input_shape)`` graph into ``cache_dir``, yielding one row per key as it finishes.

    Rows: ``model_ref``, ``input_shape``, ``ok``, ``seconds`` (in the worker, imports excluded) and ``reason``
    when not ok. Cached graphs are hits (milliseconds).

    Args:
        workers: spawned worker processes; 0 builds in this process (no start-up cost, but a model that
            exhausts memory takes the whole run down with it).
        build: the per-model job (a picklable top-level function; tests replace it).
    """
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise GnnperfError(f"graph cache {cache_dir} is a file, not a directory") from None
    except OSError as e:
        raise GnnperfError(f"cannot create the graph cache {cache_dir}: {e.strerror}") from None
    jobs = [(ref, shape, str(cache_dir), int(limit_s)) for ref, shape in keys]
    if workers <= 0:
        yield from map(build, jobs)
        return
    yield from _pooled(jobs, workers, build)


def prebuild_graphs(
    keys: Sequence[tuple[str, str]], cache_dir: str | Path, workers: int = 1, limit_s: int = 300
) -> list[dict[str, Any]]:
    """All rows of :func:`iter_prebuild`."""
    return list(iter_prebuild(keys, cache_dir, workers, limit_s))
