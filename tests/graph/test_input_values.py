"""Shape-only traces of models that read values computed from their inputs (:mod:`gnnperf.graph.input_values`)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gnnperf.graph.input_values import InputValues
from gnnperf.graph.saved import trace_saved


class _Padded(nn.Module):
    """Reads the token ids' lengths (as XLM does), picks the tokens of one kind with a boolean mask (as X-MOD's
    adapters do) and moves a buffer to the inputs' device (as transformers' embeddings do)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.adapter = nn.Linear(16, 16)
        self.register_buffer("offsets", torch.zeros(1, dtype=torch.long))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        lengths = (ids != 0).sum(1)
        assert lengths.max().item() <= ids.shape[1]
        h = self.embed(ids + self.offsets.to(ids.device))
        chosen = ids % 2 == 0
        out = torch.zeros_like(h)
        out[chosen] = self.adapter(h[chosen]).relu()
        steps = torch.arange(ids.shape[1], device=ids.device)  # made on the inputs' device: values known
        return out * (steps[None, :, None] < lengths[:, None, None])


def test_values_from_the_inputs_are_read_and_the_saves_are_a_real_forwards():
    ids = torch.randint(0, 50, (4, 9))
    real = trace_saved(_Padded(), (ids,))
    with torch.device("meta"):
        model = _Padded()
    with pytest.raises(RuntimeError, match="meta tensors"):
        trace_saved(model, (ids.to("meta"),))
    with InputValues():
        traced = trace_saved(model, (ids,))
    assert traced.plain_bytes() == real.plain_bytes() > 0


def test_a_value_of_the_weights_still_cannot_be_read():
    with torch.device("meta"):
        model = nn.Linear(4, 4)
    with InputValues(), pytest.raises(RuntimeError, match="meta tensors"):
        model(torch.ones(2, 4)).max().item()


def test_a_weights_value_is_not_written_into_an_inputs_tensor():
    with torch.device("meta"):
        weight = torch.empty(3)
    with InputValues(), pytest.raises(RuntimeError, match="writes a value computed from the weights"):
        torch.zeros(3).add_(weight)


def test_results_past_the_budget_stay_shape_only():
    with torch.device("meta"), InputValues(budget=100):
        small = torch.ones(4, 4)  # 64 bytes
        seen = small.expand(100, 4, 4)  # a view: no bytes
        large = torch.ones(37, dtype=torch.bool)
        fits = torch.ones(36, dtype=torch.bool)
    assert small.device.type == "cpu" and small.sum().item() == 16 and seen.device.type == "cpu"
    assert large.device.type == "meta" and fits.device.type == "cpu"
