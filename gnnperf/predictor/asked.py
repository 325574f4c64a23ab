"""The step the network predicts for one query (:meth:`gnnperf.predict.Predictor.predict`): the model's graph, the
device, and the workload as it runs, which is not always the workload as asked."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gnnperf.errors import GnnperfError

if TYPE_CHECKING:
    from gnnperf.graph.ir import OpGraph
    from gnnperf.hardware.table import HardwareSpec
    from gnnperf.measure.workload import Workload
    from gnnperf.predict import Predictor
    from gnnperf.predictor.query import Query


def asked_step(
    predictor: Predictor, q: Query, hardware_file: str | None, loaded: dict
) -> tuple[OpGraph, HardwareSpec, Workload, bool]:
    """``q``'s graph, device and workload as run, and whether its ``channels_last`` is moot.

    As run: one device's passes (DDP and FSDP: their collectives are composed on top), in the passes' type (FSDP's
    mixed precision: the shards' fp32 is composed), a precision the device runs at another's rate as that one, and
    ``channels_last`` asked of a model it changes nothing for as contiguous. ``loaded`` keeps each (model, input
    shape)'s graph for the other queries of one call.

    Raises:
        GnnperfError: several devices of a kind that is no GPU, or a training step of a model without parameters.
    """
    from gnnperf.graph.build import GraphCache, build_graph
    from gnnperf.predictor.coverage import same_rate_precision

    spec = predictor.spec(q.hardware, hardware_file)
    if spec.kind != "gpu" and q.num_devices > 1:
        raise GnnperfError(
            f"{q.num_devices} devices on {spec.name}: data-parallel devices are GPUs (a {spec.kind} "
            "runs one process; give its threads through the hardware entry)"
        )
    key = (q.model, q.input_shape)  # one read of the graph cache per model and input shape
    graph = loaded[key] if key in loaded else build_graph(q.model, q.input_shape, cache=GraphCache())
    loaded[key] = graph
    if q.mode == "train" and graph.param_count() == 0:
        raise GnnperfError(
            f"{graph.model_ref} has no trainable parameters: a training step has nothing to learn "
            "(predict --mode infer)"
        )
    # the harness converts 4-D/5-D inputs and weights only: without any, channels_last times the contiguous
    # step, so it is predicted as one (the network would read the flag as a layout change)
    moot = q.memory_format == "channels_last" and not channels_last_matters(graph)
    trained_on = predictor.info.get("trained_on", {})
    precision = same_rate_precision(trained_on, q.passes_precision, spec) or q.passes_precision
    as_run = {
        "memory_format": "contiguous" if moot else q.memory_format,
        "precision": precision,
        "num_devices": q.num_devices if q.parallel == "dp" else 1,
    }
    return graph, spec, replace(q.workload(graph.input_shape), **as_run), moot


def channels_last_matters(graph: OpGraph) -> bool:
    """Whether ``channels_last`` changes anything for ``graph``: a 4-D/5-D input, or convolution weights."""
    return len(graph.input_shape) in (3, 4) or any(
        n.op_type in ("Conv", "ConvTranspose") for n in graph.nodes
    )
