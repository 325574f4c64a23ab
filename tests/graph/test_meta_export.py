"""Exports on the meta device (transformers models, and models whose traced forward pass would not fit in memory)
against traces with values."""

import pytest
import torch

import gnnperf.graph.export as export_module
import gnnperf.graph.meta_export as meta_export
from gnnperf.errors import GnnperfError
from gnnperf.graph.export import export_model
from gnnperf.graph.features import to_data
from gnnperf.graph.ir import build_ir
from gnnperf.measure.workload import Workload
from gnnperf.zoo.resolve import resolve

LLAMA = (
    "hf:llama?class=LlamaForCausalLM&num_hidden_layers=2&hidden_size=128&intermediate_size=256"
    "&num_attention_heads=4&num_key_value_heads=2&vocab_size=1000"
)
# its position ids are an integer constant, which the meta device has no value for (it may be a shape)
BERT = (
    "hf:bert?class=BertForMaskedLM&num_hidden_layers=1&hidden_size=64&intermediate_size=128"
    "&num_attention_heads=2&vocab_size=500"
)


def _exported(ref: str, shape: tuple[int, ...], meta: bool):
    spec = resolve(ref)
    e = export_model(spec, shape, meta=meta)
    return build_ir(e.model, spec.ref, shape, e.exporter, e.model_inputs, e.trainable)


def _builds_on(monkeypatch, spec) -> list[str]:
    """The devices ``spec`` is built on from now on (the default device at each build)."""
    built = []
    real_build = spec.build
    monkeypatch.setattr(
        spec, "build", lambda *a, **k: built.append(torch.get_default_device().type) or real_build(*a, **k)
    )
    return built


@pytest.mark.parametrize(
    "ref, shape",
    [
        ("timm:resnet18", (3, 64, 64)),  # BatchNorm in training mode
        ("timm:vit_tiny_patch16_224", (3, 224, 224)),
        # a tied weight
        ("hf:gpt2?class=GPT2LMHeadModel&n_layer=2&n_embd=128&n_head=4&vocab_size=1000", (64,)),
        (
            "hf:t5?class=T5ForConditionalGeneration&num_layers=2&d_model=128&d_ff=256&num_heads=4&d_kv=32",
            (64,),
        ),
        # rotary positions, grouped keys and values, a mask's fill value as constants
        (LLAMA, (64,)),
        # the encoder's and decoder's equal sinusoidal tables, merged as constants of one shape
        (
            "hf:m2m_100?class=M2M100ForConditionalGeneration&decoder_layers=1&encoder_layers=1&d_model=64"
            "&encoder_attention_heads=2&decoder_attention_heads=2&encoder_ffn_dim=128&decoder_ffn_dim=128",
            (32,),
        ),
    ],
)
def test_meta_export_is_the_export_with_values(ref, shape):
    on_meta, with_values = _exported(ref, shape, meta=True), _exported(ref, shape, meta=False)
    assert [n.op_type for n in on_meta.nodes] == [n.op_type for n in with_values.nodes]
    workload = Workload(batch_size=4, input_shape=shape)
    a, b = to_data(on_meta, workload), to_data(with_values, workload)
    for key, value in b:  # a PyG Data's items
        assert torch.equal(a[key], value) if torch.is_tensor(value) else a[key] == value, key


def test_a_trace_too_large_for_memory_is_exported_on_the_meta_device(monkeypatch, caplog):
    """The weights fit and the trace's tensors do not: the real model is never built."""
    spec = resolve("timm:resnet18")
    model, _ = export_module._built(spec, None, (3, 512, 512), 2, on_meta=True)
    weights = sum(p.numel() * p.element_size() for p in (*model.parameters(), *model.buffers()))
    built = _builds_on(monkeypatch, spec)
    # room for the weights (and their margin) and for less than the trace's tensors (its first convolution's 34 MB)
    monkeypatch.setattr(meta_export, "available_memory_bytes", lambda: int(weights * 2.5) + 2**20)
    with caplog.at_level("INFO", logger="gnnperf.graph.meta_export"):
        exported = export_model(spec, (3, 512, 512))
    assert (
        "tracing it with values needs about" in caplog.text and "exported on the meta device" in caplog.text
    )
    assert set(built) == {"meta"}
    assert [n.op_type for n in exported.model.graph.node].count("Conv") == 20


def test_transformers_models_are_exported_on_the_meta_device_first(monkeypatch):
    """Their traces with values are slow and large; where the meta device cannot trace one, it is traced with values."""
    llama = resolve(LLAMA)
    built = _builds_on(monkeypatch, llama)
    export_model(llama, (64,))
    assert built == ["meta"]
    bert = resolve(BERT)
    built = _builds_on(monkeypatch, bert)
    assert export_model(bert, (64,)).model.graph.node
    assert built == ["meta", "meta", "cpu"]  # tried on it, sized on it, traced with values
    with pytest.raises(
        GnnperfError, match="on the meta device the export of .* failed: an integer tensor constant"
    ):
        export_model(bert, (64,), meta=True)


@pytest.mark.parametrize(
    "ref, shape, says",
    [
        (
            BERT,
            (64,),
            "is available, and on the meta device .* its export failed: an integer tensor constant",
        ),
        # a learned position table of 128 rows at 256 tokens: the meta device would read no position
        (
            "hf:gpt2?class=GPT2LMHeadModel&n_layer=1&n_embd=64&n_head=2&vocab_size=500&n_positions=128",
            (256,),
            "failed; the sequence length 256 is past the config's max_position_embeddings 128",
        ),
    ],
)
def test_what_the_meta_device_cannot_export_is_refused_in_one_line(monkeypatch, ref, shape, says):
    monkeypatch.setattr(meta_export, "available_memory_bytes", lambda: 1)  # too little to trace with values
    with pytest.raises(GnnperfError, match=says):
        export_model(resolve(ref), shape)


def test_skipped_initialisation_returns_on_memory_holding_values_out_of_range(monkeypatch):
    """transformers calls torch's own trunc_normal_, which redraws (skipped) normal values until all are in range."""
    import threading

    from transformers.initialization import trunc_normal_

    # uninitialised memory that earlier tensors left out of the range, each time the loop asks for more
    full_like = torch.full_like
    monkeypatch.setattr(torch, "empty_like", lambda t, **kwargs: full_like(t, 1e30))
    tensor = torch.full((64,), 1e30)
    thread = threading.Thread(target=lambda: trunc_normal_(tensor, std=0.02), daemon=True)
    with export_module._no_random_init():
        thread.start()
        thread.join(timeout=30)
    assert not thread.is_alive()
