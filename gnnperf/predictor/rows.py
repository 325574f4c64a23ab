"""The row of one prediction (:meth:`gnnperf.predict.Predictor.predict`): what was asked, the time the network gave
for the step it times, its interval, what the prediction extrapolates or assumes, and the parts composed on top of
the network's step (activation checkpointing's recomputation, DistributedDataParallel's all-reduce)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from gnnperf.graph.ir import OpGraph
    from gnnperf.graph.memory import Checkpointed
    from gnnperf.hardware.table import HardwareSpec
    from gnnperf.measure.workload import Workload
    from gnnperf.predict import Predictor
    from gnnperf.predictor.query import Query


def time_row(
    predictor: Predictor,
    query: Query,
    graph: OpGraph,
    spec: HardwareSpec,
    workload: Workload,
    ms: float,
    u: torch.Tensor,
    assumptions: tuple[str, ...],
    layout_moot: bool,
    checkpointed: Checkpointed | None,
    bare_ms: float | None = None,
) -> dict[str, Any]:
    """The row for ``query``, predicted as ``workload`` (the step the network saw) at ``ms``.

    Args:
        u: the step's graph-level features (the extrapolation checks read them).
        assumptions: what the model reference was traced with (:attr:`~gnnperf.zoo.resolve.ModelSpec.assumptions`).
        layout_moot: channels-last asked of a model it changes nothing for, predicted as contiguous.
        checkpointed: the blocks a checkpointed step runs again, or None.
        bare_ms: with gradient accumulation (``query.grad_accum`` > 1), the step without the optimizer update, or
            None where the step times none.
    """
    from gnnperf.predictor.accumulation import accumulation_row
    from gnnperf.predictor.coverage import extrapolation
    from gnnperf.predictor.interval import interval_for
    from gnnperf.predictor.parallel import parallel_row
    from gnnperf.predictor.recompute import recompute_row

    (lo, hi), scope = interval_for(predictor.info, spec.name, workload.mode, workload.precision)
    row = {
        "model": graph.model_ref,
        "hardware": spec.name,
        "hardware_seen_in_training": spec.name in predictor.devices,
        "batch_size": workload.batch_size,
        "input_shape": list(graph.input_shape),
        "precision": workload.precision,
        "mode": workload.mode,
        "optimizer": workload.optimizer,
        "timed": workload.timed_label,
        "memory_format": workload.memory_format,
        "num_devices": workload.num_devices,
        "parallel": query.parallel,
        "grad_accum": query.grad_accum,
        "iteration_time_ms": ms,
        "interval_ms": [ms * math.exp(lo), ms * math.exp(hi)],
        "interval_coverage": predictor.info.get("interval_coverage"),
        "interval_scope": scope,
        "checkpoint": str(predictor.path),
    }
    row.update(extrapolation(predictor, row, graph, spec, workload, u))
    row["assumptions"] = list(assumptions)
    # as asked (the calibration key and reports follow the query), predicted as the step it times
    row["memory_format"], row["channels_last_moot"] = query.memory_format, layout_moot
    row["precision"] = query.precision
    # with FSDP's mixed precision, the passes' type over fp32 shards
    row["fsdp_param_dtype"] = query.fsdp_param_dtype
    passes = query.passes_precision
    row["precision_predicted_as"] = workload.precision if workload.precision != passes else None
    if checkpointed is not None:  # the step, then the blocks' forward pass again
        row["activation_checkpointing"] = recompute_row(ms, checkpointed)
        row["iteration_time_ms"] += row["activation_checkpointing"]["recompute_ms"]
        row["interval_ms"] = [v * row["iteration_time_ms"] / ms for v in row["interval_ms"]]
    if query.parallel != "dp":
        row.update(
            parallel_row(
                row,
                query.parallel,
                graph.param_count(),
                spec,
                query.num_devices,
                query.fsdp_policy,
                query.cluster,
            )
        )
    if query.grad_accum > 1:  # the passes before the last, which all-reduces and updates
        row.update(
            accumulation_row(row, ms, bare_ms, query.grad_accum, graph.param_count(), spec, checkpointed)
        )
    return row
