"""The shape-only traces behind a prediction's memory estimate and activation checkpointing, once per workload.

The trace (:func:`gnnperf.graph.memory.training_memory`) depends on the model and the workload, not on the device,
so a comparison over many GPUs traces each model once; a model the trace cannot run is kept as its error, and said
again for every device that asks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gnnperf.errors import GnnperfError

if TYPE_CHECKING:
    from gnnperf.graph.inference_memory import InferenceMemory
    from gnnperf.graph.memory import Checkpointed, MemoryEstimate
    from gnnperf.measure.workload import Workload
    from gnnperf.predictor.query import Query


class Traces:
    """Memory estimates by (model, workload, DDP, checkpointing), traced on first use."""

    def __init__(self) -> None:
        self._done: dict[tuple, MemoryEstimate | InferenceMemory | GnnperfError] = {}

    def estimate(self, query: Query) -> MemoryEstimate:
        """The query's training-step memory estimate.

        Raises:
            GnnperfError: a model the shape-only trace cannot run, or an ONNX file (no PyTorch model to trace).
        """
        from gnnperf.graph.memory import training_memory

        workload = query.workload(query.input_shape or ())  # () is the model's default input
        key = (query.model, workload, *query.training_memory_options)
        if key not in self._done:
            try:
                self._done[key] = training_memory(query.model, workload, *key[2:])
            except GnnperfError as e:
                self._done[key] = e
        if isinstance(self._done[key], GnnperfError):
            raise self._done[key]
        return self._done[key]

    def inference(self, query: Query) -> InferenceMemory:
        """The query's inference-step memory estimate.

        Raises:
            GnnperfError: a model the shape-only trace cannot run, or an ONNX file (no PyTorch model to trace).
        """
        from gnnperf.graph.inference_memory import inference_memory

        workload = query.workload(query.input_shape or ())
        key = (query.model, workload, "infer")
        if key not in self._done:
            try:
                self._done[key] = inference_memory(query.model, workload)
            except GnnperfError as e:
                self._done[key] = e
        if isinstance(self._done[key], GnnperfError):
            raise self._done[key]
        return self._done[key]

    def checkpointed(self, query: Query, workload: Workload) -> Checkpointed:
        """The blocks ``query`` checkpoints, as traced; ``workload`` is the step as predicted.

        Raises:
            GnnperfError: the step has no backward pass, or the model cannot be traced.
        """
        if workload.mode != "train" or workload.timed == "fwd":
            raise GnnperfError(
                "activation checkpointing recomputes blocks in the backward pass: it needs a training step that has one"
            )
        try:
            return self.estimate(query).checkpointing
        except GnnperfError as e:
            raise GnnperfError(f"activation checkpointing: {e}") from None
