"""The live tensors of a training step at their most, by torch's memory profiler: a check of the memory estimate.

The harness's peak memory is the CUDA allocator's; on a CPU the resident size also counts what is not a tensor (the
math library's buffers). Torch's memory profiler (``profile_memory=True``, ``export_memory_timeline``) follows every
tensor of a step and labels it, so on any machine the tensors a step holds at once can be set beside
:func:`gnnperf.graph.memory.training_memory` (``tests/graph/test_memory.py``, ``experiments/memory``).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
from torch import nn

from gnnperf.measure.harness import TrainingLoss

__all__ = ["LABELS", "live_peak_mb"]

# export_memory_timeline's columns after the first: torch.profiler._memory_profiler's categories in its plot order
LABELS = (
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
)


def live_peak_mb(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer] | None = None,
    autocast: torch.dtype | None = None,
) -> dict[str, float]:
    """MB of live tensors by label (:data:`LABELS`) at the moment they add up to the most, in one CPU training step
    with the harness's loss, after a first step that creates the optimizer's state. ``optimizer``: made from the
    parameters; by default the harness's SGD (momentum 0.9). ``autocast``: the forward and loss under CPU autocast
    to that type (its op lists are not CUDA's: compare where they agree)."""
    model.train()
    params = list(model.parameters())
    opt = optimizer(params) if optimizer else torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    loss = TrainingLoss(upcast=False)

    amp = torch.autocast("cpu", dtype=autocast) if autocast is not None else nullcontext()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with amp:
            value = loss(model(*inputs))
        value.backward()
        opt.step()

    step()
    cpu = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(
        activities=cpu, profile_memory=True, record_shapes=True, with_stack=True
    ) as prof:
        step()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "timeline.json"
        prof.export_memory_timeline(str(path), device="cpu")
        sizes = np.array(json.loads(path.read_text())[1], dtype=float)[:, 1:]  # the first column is unused
    at = sizes.sum(1).argmax()
    return {label: float(v / 2**20) for label, v in zip(LABELS, sizes[at], strict=True)}
