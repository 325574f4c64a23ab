"""Shape-only traces of models that read values computed from their inputs (:mod:`gnnperf.graph.input_values`)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gnnperf.graph.input_values import InputValues
from gnnperf.graph.memory import training_memory
from gnnperf.graph.saved import trace_saved
from gnnperf.measure.harness import TrainingLoss
from gnnperf.measure.workload import Workload
from gnnperf.zoo.resolve import resolve


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


@pytest.mark.parametrize(
    "ref",
    [
        "hf:xlm?class=XLMWithLMHeadModel&n_layers=2&n_heads=4&emb_dim=128&vocab_size=1000",  # lengths' .item()
        "hf:fsmt?class=FSMTForConditionalGeneration&encoder_layers=2&decoder_layers=2&d_model=64"
        "&encoder_attention_heads=4&decoder_attention_heads=4&encoder_ffn_dim=128&decoder_ffn_dim=128"
        "&src_vocab_size=1000&tgt_vocab_size=1000",  # padding_mask.any()
        "hf:xmod?class=XmodForCausalLM&num_hidden_layers=2&hidden_size=64&num_attention_heads=4"
        "&intermediate_size=128&vocab_size=1000",  # boolean masks over the language ids
        "hf:longformer?class=LongformerForMaskedLM&num_hidden_layers=2&hidden_size=64&num_attention_heads=4"
        "&intermediate_size=128&vocab_size=1000&attention_window=16",  # any global attention?
    ],
)
def test_transformers_models_that_read_their_inputs_are_traced_as_a_real_forward(ref):
    """The estimate's saved tensors are those of a real CPU forward on the same token ids (the meta and fake
    traces fail on these models); against torch's memory profiler see tests/graph/test_memory.py."""
    spec = resolve(ref)
    ids = spec.make_inputs(2, (32,), generator=torch.Generator().manual_seed(0))  # the estimate's draw
    with spec.tracing():
        real = trace_saved(spec.build(), ids, loss=TrainingLoss(upcast=False)).plain_bytes()
    estimate = training_memory(ref, Workload(batch_size=2, input_shape=(32,), optimizer="sgd"))
    assert estimate.activations_mb * 2**20 == real
