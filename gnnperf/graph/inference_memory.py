"""Peak device memory of an inference step: the weights and the most tensors one forward pass holds at once.

Without a backward pass nothing is saved: a tensor lives while the code holds it, and the forward pass's peak is
the most bytes alive at one moment. :class:`LiveBytes` follows that on the ``meta`` device (shapes only): every op's
output that owns new memory is counted until its Python object is freed, as the caching allocator would see it
released (views and in-place results own none). The model runs under ``torch.no_grad`` with the GPU's fused
attention (:func:`gnnperf.graph.as_on_gpu.as_on_gpu`) and, for ``amp_*``, CUDA autocast's casts
(:class:`~gnnperf.graph.as_on_gpu.CudaAutocast`), whose copies of the weights autocast keeps for the whole forward
pass (its cast cache). Checked against torch's memory profiler on a CPU forward (``tests/graph/test_memory.py``,
``experiments/memory``: 0.999-1.000 for seven models at one thread).
"""

from __future__ import annotations

import weakref
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from gnnperf.errors import GnnperfError
from gnnperf.graph.as_on_gpu import CudaAutocast, as_on_gpu
from gnnperf.graph.memory import USABLE_SHARE, WORKSPACE_MB, verdict
from gnnperf.graph.shaped import AUTOCAST_DTYPE, build_shaped, error_line, shaped_inputs
from gnnperf.measure.workload import Workload

__all__ = ["InferenceMemory", "LiveBytes", "inference_memory", "largest_inference_batch"]

_MB = 2**20


class LiveBytes(TorchDispatchMode):
    """The bytes of the op outputs alive at once, at their most (``peak``), counted per storage."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._storages: set[int] = set()

    def _free(self, key: int, nbytes: int) -> None:
        self._storages.discard(key)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.is_view:
            return out
        inputs = {id(t) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or id(t) in inputs or t._base is not None:
                continue  # an in-place op's result, or a view: no new memory
            key = t.untyped_storage()._cdata
            if key in self._storages:
                continue
            nbytes = t.untyped_storage().nbytes()
            self._storages.add(key)
            self.live += nbytes
            self.peak = max(self.peak, self.live)
            weakref.finalize(t, self._free, key, nbytes)
        return out


@dataclass(frozen=True)
class InferenceMemory:
    """Peak memory of one inference step on one device, in MB: the weights (parameters and buffers), the most
    tensors the forward pass holds at once (the inputs among them, autocast's weight copies too), the workspace."""

    weights_mb: float
    activations_mb: float
    workspace_mb: float

    @property
    def total_mb(self) -> float:
        return self.weights_mb + self.activations_mb + self.workspace_mb

    def on_device(self, memory_gb: float) -> dict[str, Any]:
        """MB by what holds them, ``total_mb``, ``peak_at`` (``forward``) and the device's verdict
        (:func:`gnnperf.graph.memory.verdict`)."""
        return {
            **asdict(self),
            "total_mb": self.total_mb,
            "peak_at": "forward",
            **verdict(self.total_mb, memory_gb),
        }


def inference_memory(model_ref: str, workload: Workload) -> InferenceMemory:
    """The peak memory of an inference step of ``model_ref`` at ``workload`` on one device (see the module docstring).

    Raises:
        GnnperfError: a training workload, an ONNX file, or a model the meta device cannot run.
    """
    from gnnperf.zoo.resolve import resolve

    if workload.mode != "infer":
        raise GnnperfError("inference_memory covers inference steps; training_memory covers training")
    spec = resolve(model_ref)
    if spec.builder is None:
        raise GnnperfError(f"{spec.ref} is an ONNX file: no PyTorch model to trace, so no memory estimate")
    one = spec.make_inputs(1, workload.input_shape or None)
    half = AUTOCAST_DTYPE.get(workload.precision)
    cached: list[torch.Tensor] = []  # autocast's weight copies, held as its cache holds them
    try:
        with torch.device("meta"):
            model = build_shaped(spec, workload).eval()
            weights = {id(p) for p in model.parameters()}
            live = LiveBytes()
            with live:  # the inputs are the step's too
                inputs = shaped_inputs(one, workload)
            cast = (
                CudaAutocast(half, lambda t, c: id(t) in weights and cached.append(c))
                if half
                else nullcontext()
            )
            with torch.no_grad(), spec.tracing(), as_on_gpu(), cast, live:
                model(*inputs)
    except Exception as e:  # noqa: BLE001 - code that reads a value (.item(), nonzero) cannot run without one
        raise GnnperfError(
            f"{spec.ref}: memory not estimated, the shape-only trace failed ({error_line(e)})"
        ) from None
    weights_mb = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers())) / _MB
    return InferenceMemory(weights_mb, live.peak / _MB, WORKSPACE_MB)


def largest_inference_batch(
    model_ref: str, workload: Workload, memory_gb: float, traced: InferenceMemory
) -> int:
    """The largest batch whose inference step fits in :data:`~gnnperf.graph.memory.USABLE_SHARE` of ``memory_gb``
    (0: not one sample): the forward pass's peak is linear in the batch, so ``traced`` (at ``workload``'s batch)
    and one more trace give it, checked by a trace at the batch found (one less where that does not fit)."""
    usable_mb = USABLE_SHARE * memory_gb * 1024
    batch = workload.batch_size
    other = 2 if batch == 1 else 1
    at_other = inference_memory(model_ref, replace(workload, batch_size=other))
    per_sample = (traced.activations_mb - at_other.activations_mb) / (batch - other)
    if per_sample <= 0:
        raise GnnperfError(f"{model_ref}: the traced memory does not grow with the batch; no largest batch")
    fixed = traced.total_mb - batch * per_sample  # weights, workspace, what does not grow with the batch
    guess = max(0, int((usable_mb - fixed) // per_sample))
    while guess > 0 and inference_memory(model_ref, replace(workload, batch_size=guess)).total_mb > usable_mb:
        guess -= 1
    return guess
