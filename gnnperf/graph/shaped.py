"""The model and inputs of a shape-only trace (on the ``meta`` device or under fake tensors), in the workload's types:
what the training and inference memory estimates (:mod:`gnnperf.graph.memory`, :mod:`gnnperf.graph.inference_memory`)
both build, and how they say a trace's failure in one line."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from gnnperf.measure.harness import AUTOCAST_DTYPE, MODEL_DTYPE  # the traced model is the harness's
from gnnperf.measure.workload import Workload

__all__ = [
    "AUTOCAST_DTYPE",
    "MODEL_DTYPE",
    "build_shaped",
    "default_dtype",
    "error_line",
    "quiet_logger",
    "shaped_inputs",
]


@contextmanager
def quiet_logger(logger: str, level: int = logging.ERROR) -> Iterator[None]:
    """``logger`` at ``level`` and above only, while in the context."""
    log = logging.getLogger(logger)
    saved = log.level
    log.setLevel(level)
    try:
        yield
    finally:
        log.setLevel(saved)


@contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """torch's default floating-point type, while in the context (as ``model.to(dtype)``, which fake and meta
    parameters cannot do)."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


def build_shaped(spec, workload: Workload) -> torch.nn.Module:
    """``spec``'s model in the caller's tensor context (meta, fake), its weights in the workload's model type."""
    from gnnperf.graph.export import _no_random_init

    # the default dtype as model.to(dtype) (fake parameters cannot be converted); the builder's warnings were
    # printed when the graph was built
    dtype = MODEL_DTYPE.get(workload.precision, torch.float32)
    with _no_random_init(), default_dtype(dtype), quiet_logger("transformers"):
        return spec.build(input_shape=workload.input_shape or None)


def shaped_inputs(
    one: tuple[torch.Tensor, ...], workload: Workload, values: bool = False
) -> tuple[torch.Tensor, ...]:
    """``one``'s inputs (one sample each) at the workload's batch, empty in the caller's tensor context, floating
    ones in the model's type; with ``values`` the integer ones as given (already the workload's batch)."""
    dtype = MODEL_DTYPE.get(workload.precision, torch.float32)
    return tuple(
        t
        if values and not t.is_floating_point()
        else torch.empty(
            (workload.batch_size, *t.shape[1:]), dtype=dtype if t.is_floating_point() else t.dtype
        )
        for t in one
    )


def error_line(e: Exception) -> str:
    """The first line of ``e``'s message, up to its first sentence (torch's meta errors run long)."""
    return (str(e).strip().splitlines() or [""])[0].split(". ")[0]
