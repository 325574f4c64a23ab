"""transformers configs (deep stacks by block repetition), ONNX files, the cache, the dynamo fallback."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from gnnperf.errors import GnnperfError
from gnnperf.graph.build import GraphCache, build_graph
from gnnperf.graph.cli import summarize
from gnnperf.graph.export import export_model
from gnnperf.zoo.hf import SDPA_CAUSAL, SDPA_TIME, HFLogits
from gnnperf.zoo.resolve import resolve

NEUSIGHT_CONFIGS = Path(__file__).resolve().parents[3] / "shared/external/neusight/data/DLmodel_configs"


def _config_file(path: Path, **fields) -> Path:
    """A transformers config file of ``fields`` at ``path``."""
    path.write_text(json.dumps(fields))
    return path


@pytest.fixture
def gpt2_config(tmp_path) -> Path:
    return _config_file(
        tmp_path / "config.json", model_type="gpt2", architectures=["GPT2LMHeadModel"], n_layer=6, n_embd=64,
        n_head=4, n_positions=128, vocab_size=500,
    )  # fmt: skip


def test_hf_builds_the_architecture_class(gpt2_config):
    spec = resolve(f"hf:{gpt2_config}")
    model = spec.build()
    assert isinstance(model, HFLogits) and type(model.m).__name__ == "GPT2LMHeadModel"
    assert spec.num_layers == 6 and spec.input_kind == "tokens" and spec.vocab_size == 500


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_repeated_blocks_match_full_export(gpt2_config, exporter):
    ref = f"hf:{gpt2_config}"
    full = summarize(build_graph(ref, (32,), exporter, shallow=False), 4)
    repeated = summarize(build_graph(ref, (32,), exporter, shallow=True), 4)
    assert repeated["repeated_blocks"] == {"exported": 2, "depth": 6}
    for key in ("flops", "mat_flops", "bytes", "params", "num_nodes", "num_edges", "op_counts"):
        assert repeated[key] == full[key], key
    # the LM head's weight is tied to the embedding: counted once, whichever name the exporter kept
    assert full["params"] == sum(p.numel() for p in resolve(ref).build().parameters())
    # 256 tokens, 128 positions; the dynamo exporter's fake tensors alone would not stop it
    # (the TorchScript exporter on the meta device, first for hf: models, is refused before it traces)
    says = (
        "IndexError: index out of range.*" if exporter == "dynamo" else "failed; the sequence length 256 is "
    )
    with pytest.raises(GnnperfError, match=says + "past the config's max_position_embeddings 128"):
        build_graph(ref, (256,), exporter)
    assert torch.is_autocast_cache_enabled()  # the TorchScript exporter's switch-off undone after its failure
    # the LM head sees every position: logits are (batch, seq, vocab)
    model = resolve(ref).build()
    assert model(torch.zeros(2, 32, dtype=torch.long)).shape == (2, 32, 500)


def test_shared_layer_stack_is_exported_whole(tmp_path):
    # ALBERT applies one layer num_hidden_layers times: there is no block 1 to repeat
    cfg = {
        "model_type": "albert",
        "architectures": ["AlbertForMaskedLM"],
        "hidden_size": 64,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "embedding_size": 32,
        "num_hidden_layers": 6,
        "vocab_size": 300,
    }
    path = tmp_path / "albert.json"
    path.write_text(json.dumps(cfg))
    ref = f"hf:{path}"
    deep = summarize(build_graph(ref, (16,)), 1)
    full = summarize(build_graph(ref, (16,), shallow=False), 1)
    assert deep["repeated_blocks"] is None
    for key in ("flops", "params", "num_nodes", "op_counts"):
        assert deep[key] == full[key], key
    assert deep["params"] == sum(p.numel() for p in resolve(ref).build().parameters())  # shared: counted once
    cfg["num_hidden_layers"] = 3
    path.write_text(json.dumps(cfg))
    assert summarize(build_graph(ref, (16,)), 1)["op_counts"]["Softmax"] * 2 == deep["op_counts"]["Softmax"]


@pytest.mark.slow  # ~2.5 minutes: tracing two 2560-wide blocks at sequence length 2048
@pytest.mark.skipif(not NEUSIGHT_CONFIGS.is_dir(), reason="../shared/external not present")
def test_gpt3_shaped_config_without_its_weights():
    graph = build_graph(f"hf:{NEUSIGHT_CONFIGS / 'gpt3_27.json'}", (2048,))
    s = summarize(graph, 1)
    assert s["repeated_blocks"]["depth"] == 32
    assert 2.6e9 < s["params"] < 2.8e9  # GPT-3 2.7B, never allocated: two blocks were built
    # forward matrix FLOPs ~ 2 * params * tokens (+ attention); the LM head is tied to the embedding
    assert s["mat_flops"] > 2 * 2.6e9 * 2048


def test_onnx_file_reference(tmp_path):
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 5)
    )
    path = tmp_path / "net.onnx"
    torch.onnx.export(
        model,
        (torch.randn(2, 3, 8, 8),),
        str(path),
        dynamo=False,
        input_names=["x"],
        dynamic_axes={"x": {0: "n"}},
    )
    s = summarize(build_graph(str(path)), 3)
    assert s["input_shape"] == [3, 8, 8] and s["num_nodes"] == 4
    assert s["mat_flops"] == 2 * 3 * (8 * 6 * 6 * 27 + 288 * 5)
    assert s["params"] == 8 * 27 + 8 + 288 * 5 + 5
    assert list(build_graph(str(path), (3, 8, 8)).input_shape) == [3, 8, 8]  # its own shape, given: fine
    with pytest.raises(GnnperfError, match="exported at input shape 3,8,8 and is priced as exported"):
        build_graph(str(path), (3, 64, 64))  # its ops' shapes were fixed at export


def test_onnx_file_integer_initializers_are_not_parameters(tmp_path):
    """An ONNX file's integer constants (a Reshape's target shape) are initializers, not trainable weights."""
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((12, 5), dtype=np.float32), "fc.weight")
    target = numpy_helper.from_array(np.array([-1, 12], dtype=np.int64), "flat_shape")
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["x", "flat_shape"], ["flat"]),
            helper.make_node("MatMul", ["flat", "fc.weight"], ["y"]),
        ],
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5])],
        [weight, target],
    )
    path = tmp_path / "reshape.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    g = build_graph(str(path))
    assert g.param_count() == 60
    assert g.param_count(trainable_only=False) == 62


def test_onnx_file_with_symbolic_dims_takes_the_given_shape(tmp_path):
    class TokensAndMask(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.fc = torch.nn.Embedding(50, 16), torch.nn.Linear(16, 4)

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.fc(self.emb(ids) * mask.unsqueeze(-1))

    path = tmp_path / "tokens.onnx"
    example = (torch.zeros(2, 8, dtype=torch.long), torch.ones(2, 8))
    axes = {0: "batch", 1: "seq"}
    torch.onnx.export(
        TokensAndMask(), example, str(path), dynamo=False, input_names=["ids", "mask"],
        dynamic_axes={"ids": axes, "mask": axes},
    )  # fmt: skip
    with pytest.raises(GnnperfError, match="symbolic non-batch dims; give --input-shape"):
        build_graph(str(path))
    at = {n: summarize(build_graph(str(path), (n,)), 3) for n in (8, 64)}
    assert at[64]["input_shape"] == [64]
    assert at[8]["mat_flops"] == 2 * 3 * 8 * 16 * 4 and at[64]["mat_flops"] == 8 * at[8]["mat_flops"]
    with pytest.raises(GnnperfError, match="has 1 dims after the batch axis; the input shape 3,8 has 2"):
        build_graph(str(path), (3, 8))
    conv = tmp_path / "conv.onnx"
    torch.onnx.export(
        torch.nn.Conv2d(3, 4, 3), (torch.randn(2, 3, 8, 8),), str(conv), dynamo=False, input_names=["x"],
        dynamic_axes={"x": {0: "batch", 2: "h", 3: "w"}},
    )  # fmt: skip
    assert summarize(build_graph(str(conv), (3, 16, 16)), 1)["input_shape"] == [3, 16, 16]
    with pytest.raises(GnnperfError, match="has 3 at dim 1; the input shape gives 1"):
        build_graph(str(conv), (1, 16, 16))


def test_cache_hit_skips_export_and_survives_processes(tmp_path, monkeypatch):
    ref = "tests.graph.factories:tiny_cnn"
    first = build_graph(ref, (3, 8, 8), cache=GraphCache(tmp_path))
    assert len(list(tmp_path.glob("*.json.gz"))) == 1

    def no_export(*a, **k):
        raise AssertionError("exported again")

    monkeypatch.setattr("gnnperf.graph.build.export_model", no_export)
    again = build_graph(ref, (3, 8, 8), cache=GraphCache(tmp_path))  # a new cache object reads the same files
    assert again.to_dict() == first.to_dict()
    (next(tmp_path.glob("*.json.gz"))).write_bytes(b"not gzip")  # a corrupt entry is ignored, not fatal
    monkeypatch.undo()
    assert build_graph(ref, (3, 8, 8), cache=GraphCache(tmp_path)).to_dict() == first.to_dict()


def test_dynamo_exporter_gives_the_same_costs():
    spec = resolve("tests.graph.factories:residual")
    ts = summarize(build_graph(spec, (8, 6, 6), exporter="torchscript"), 2)
    dy = summarize(build_graph(spec, (8, 6, 6), exporter="dynamo"), 2)
    assert ts["exporter"] == "torchscript" and dy["exporter"] == "dynamo"
    assert dy["mat_flops"] == ts["mat_flops"] and dy["params"] == ts["params"]


def test_auto_export_falls_back_to_dynamo_when_the_torchscript_graph_has_no_static_shapes():
    spec = resolve("tests.graph.factories:token_pool")
    with pytest.raises(GnnperfError, match="no static shape"):
        build_graph(spec, (9, 8), exporter="torchscript")
    graph = build_graph(spec, (9, 8))
    assert graph.exporter == "dynamo"
    pool = next(n for n in graph.nodes if n.op_type == "MaxPool")
    assert graph.values[pool.outputs[0]].shape(5) == (
        5,
        8,
        4,
    )  # the 8 tokens after the first, pooled in pairs


def test_export_is_training_mode_without_parameters():
    exported = export_model(resolve("tests.graph.factories:tiny_cnn"), (3, 8, 8))
    model = exported.model
    assert not model.graph.initializer  # parameters are inputs, not serialised
    bn = next(n for n in model.graph.node if n.op_type == "BatchNormalization")
    assert onnx.helper.get_attribute_value(next(a for a in bn.attribute if a.name == "training_mode")) == 1
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def test_model_too_large_for_memory_is_exported_on_the_meta_device(monkeypatch, caplog):
    import gnnperf.graph.meta_export as meta_export

    spec = resolve("tests.graph.factories:residual")
    built = []
    real_build = spec.builder
    monkeypatch.setattr(
        spec, "builder", lambda depth: built.append(torch.get_default_device()) or real_build(depth)
    )
    monkeypatch.setattr(meta_export, "available_memory_bytes", lambda: 1024)
    with caplog.at_level("INFO", logger="gnnperf.graph.meta_export"):
        assert export_model(spec, (8, 6, 6)).model.graph.node
    assert "residual has 0.00 billion parameters" in caplog.text and "0.0 GiB is available" in caplog.text
    assert [d.type for d in built] == ["meta", "meta"]  # sized, then exported on the meta device; never built
    monkeypatch.setattr(meta_export, "available_memory_bytes", lambda: None)  # unknown: no check
    assert export_model(spec, (8, 6, 6)).model.graph.node


@pytest.mark.parametrize(
    "content, says",
    [
        ("5", "has no 'model_type'"),  # JSON, but no object
        ('{"model_type": "bert", "hidden_size": "abc"}', "hidden_size"),  # transformers' own validation
        ('{"model_type": "resnet"}', "takes no token ids"),  # a vision config: no token ids to feed
        (  # a multimodal config: its language model named
            '{"model_type": "llama4"}',
            "takes no token ids .*; its language model alone is its text_config, model_type 'llama4_text'$",
        ),
        ('{"model_type": "bert", "architectures": ["BertForNothing"]}', "no class 'BertForNothing'"),
        ('{"model_type": "gpt2", "architectures": "GPT2LMHeadModel"}', "must be a list of class names"),
        ('{"model_type": "gpt2", "n_layer": -1}', "num_hidden_layers must be at least 1, got -1"),
        ('{"model_type": "gpt2", "vocab_size": 0}', "vocab_size must be at least 1, got 0"),
        (
            '{"model_type": "whisper", "vocab_size": 100}',
            "takes no token ids \\(its input is input_features\\)",
        ),
        (
            '{"model_type": "gpt2", "architectures": ["LlamaForCausalLM"]}',
            "takes a LlamaConfig, not the GPT2Config",
        ),
        ('{"model_type": "gpt2", "architectures": ["GPT2Tokenizer"]}', "is not a transformers model class"),
    ],
)
def test_bad_hf_configs_are_user_errors(tmp_path, content, says):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(GnnperfError, match=says):
        resolve(f"hf:{path}")
    path.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(GnnperfError, match="cannot read hf config"):
        resolve(f"hf:{path}")


def test_hf_config_dtype_and_token_input_shape(gpt2_config):
    ref = f"hf:{gpt2_config}"
    fp32 = summarize(build_graph(ref, (16,)), 1)
    cfg = json.loads(gpt2_config.read_text())
    gpt2_config.write_text(json.dumps({**cfg, "torch_dtype": "float16"}))  # hub configs carry one
    assert summarize(build_graph(ref, (16,)), 1)["bytes"] == fp32["bytes"]  # the workload sets the precision
    with pytest.raises(GnnperfError, match="its input shape is one sequence length, got 3,16"):
        build_graph(ref, (3, 16))


def test_token_ids_never_hold_the_padding_token():
    # BERT pads with id 0; FSMT's code takes its padding branch and XLM shortens its lengths where an id is the pad
    spec = resolve(
        "hf:bert?vocab_size=4&hidden_size=32&num_hidden_layers=1&num_attention_heads=2&intermediate_size=64"
    )
    assert spec.excluded_token_ids == (0,)
    (ids,) = spec.make_inputs(64, (32,), generator=torch.Generator().manual_seed(0))
    assert sorted(ids.unique().tolist()) == [1, 2, 3]
    assert (
        resolve("hf:gpt2?vocab_size=40&n_layer=1&n_embd=32&n_head=2").excluded_token_ids == ()
    )  # no pad token


def test_a_cached_graph_of_an_edited_hf_config_is_built_again(gpt2_config, tmp_path, monkeypatch):
    def no_export(*a, **k):
        raise AssertionError("exported again")

    cache = GraphCache(tmp_path / "cache")
    small = build_graph(f"hf:{gpt2_config}", (16,), cache=cache)
    cfg = json.loads(gpt2_config.read_text())
    gpt2_config.write_text(json.dumps({**cfg, "n_embd": 128}))  # same path, another model
    wider = build_graph(f"hf:{gpt2_config}", (16,), cache=cache)
    assert wider.param_count() > small.param_count()
    assert build_graph(f"hf:{gpt2_config}", (16,), cache=cache).param_count() == wider.param_count()
    # a gnnperf that reads hf configs differently builds their cached graphs again
    monkeypatch.setattr("gnnperf.graph.build.HF_READ_VERSION", 99)
    monkeypatch.setattr("gnnperf.graph.build.export_model", no_export)
    with pytest.raises(AssertionError, match="exported again"):
        build_graph(f"hf:{gpt2_config}", (16,), cache=cache)


def test_inputs_that_cannot_be_made_are_a_user_error():
    with pytest.raises(GnnperfError, match="cannot make inputs of shape 3,-4,-4"):
        build_graph("tests.graph.factories:tiny_cnn", (3, -4, -4))  # a shape given from Python, not the CLI


def test_an_image_model_given_another_rank_of_input_is_one_clear_error():
    with pytest.raises(
        GnnperfError,
        match=r"takes images: its input shape is 3 dims \(channels, height, width\) such as 3,224,224, got 128$",
    ):
        resolve("torchvision:resnet18").input_shape((128,))  # --seq-len 128 on a CNN


def test_a_factory_module_in_the_working_directory_is_found(tmp_path, monkeypatch):
    # a console script's sys.path starts at its bin directory, not at the working directory as `python -m` does
    (tmp_path / "my_models_here.py").write_text(
        "from torch import nn\n\ndef tiny():\n    return nn.Linear(16, 4)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    graph = build_graph("my_models_here:tiny", (16,), cache=None)
    assert [n.op_type for n in graph.nodes] == ["Gemm"]


def test_a_factory_in_a_python_file_is_built_and_recached_when_the_file_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # the file's directory joins it; restored after the test
    model_file = tmp_path / "net.py"
    (tmp_path / "net_parts.py").write_text("from torch import nn\n\nHEAD = nn.Linear\n")  # a module beside it
    model_file.write_text("from net_parts import HEAD\n\ndef build():\n    return HEAD(16, 4)\n")
    monkeypatch.chdir(tmp_path)
    spec = resolve("net.py:build")
    assert spec.ref == f"{model_file}:build"  # absolute: the same file from any directory
    cache = GraphCache(tmp_path / "cache")
    assert [n.op_type for n in build_graph("net.py:build", (16,), cache=cache).nodes] == ["Gemm"]
    model_file.write_text(
        "from torch import nn\n\ndef build():\n    return nn.Sequential(nn.Linear(16, 4), nn.ReLU())\n"
    )
    assert [n.op_type for n in build_graph("net.py:build", (16,), cache=cache).nodes] == ["Gemm", "Relu"]


def test_a_factory_file_is_built_again_when_a_module_beside_it_changes(tmp_path):
    """The helper changes between two processes (in one, Python keeps the module it imported first)."""
    head = "from torch import nn\n\ndef head():\n    return nn.Linear(16, {})\n"
    (tmp_path / "parts.py").write_text(head.format(4))
    (tmp_path / "net.py").write_text("from parts import head\n\ndef build():\n    return head()\n")
    run = [
        sys.executable,
        "-m",
        "gnnperf.cli",
        "graph",
        f"{tmp_path / 'net.py'}:build",
        "--input-shape",
        "16",
    ]
    env = {**os.environ, "GNNPERF_CACHE": str(tmp_path / "cache")}

    def params() -> float:
        res = subprocess.run([*run, "--json"], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)["params"]

    assert params() == 16 * 4 + 4
    (tmp_path / "parts.py").write_text(head.format(8))
    assert params() == 16 * 8 + 8


@pytest.mark.parametrize(
    ("ref", "says"),
    [
        ("missing.py:build", "no such Python file: missing.py"),
        ("raises.py:build", "cannot run .*raises.py for raises.py:build: ValueError: not a model file"),
        (
            "raises_not.py:biuld",
            "module 'raises_not' has no 'biuld' \\(did you mean: build\\?\\)",
        ),
        ("raises_not.py:NET", "'NET' in module 'raises_not' is an nn.Module instance: give a function"),
        ("raises_not.py:WIDTH", "'WIDTH' in module 'raises_not' is not a callable: give a function"),
    ],
)
def test_a_python_file_that_cannot_give_a_model_is_one_error(ref, says, tmp_path, monkeypatch):
    (tmp_path / "raises.py").write_text("raise ValueError('not a model file')\n")
    (tmp_path / "raises_not.py").write_text(
        "from torch import nn\n\nNET = nn.Linear(2, 2)\nWIDTH = 3\n\ndef build():\n    pass\n"
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GnnperfError, match=says):
        resolve(ref)


def test_an_hf_reference_can_name_the_class_a_run_used(tmp_path):
    # NeuSight timed BERT inference with a classification head that its config (BertLMHeadModel) does not name
    path = _config_file(
        tmp_path / "bert.json", model_type="bert", architectures=["BertLMHeadModel"], num_hidden_layers=2,
        hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=500, max_position_embeddings=64,
    )  # fmt: skip
    ref = f"hf:{path}?class=BertForSequenceClassification"
    spec = resolve(ref)
    assert spec.ref == ref and type(spec.build().m).__name__ == "BertForSequenceClassification"
    assert spec.source_file == path  # the config file, without the query: the cache keys on its digest
    graph, lm = build_graph(ref, (16,)), build_graph(f"hf:{path}", (16,))
    (logits,) = [graph.values[o] for o in graph.nodes[-1].outputs]
    assert logits.shape(3) == (3, 2)  # two labels, not (batch, seq, vocab) as the LM head's
    assert summarize(graph, 3)["flops"] < summarize(lm, 3)["flops"]
    for query, message in [
        ("class=BertNope", "transformers has no class 'BertNope' \\(the reference's class=\\)"),
        ("class=GPT2ForSequenceClassification", "takes a GPT2Config, not the BertConfig"),
        (
            "head=cls",
            "the options of an hf: config file are class=NAME \\(a transformers class\\) and attn_impl",
        ),
        ("class=", "expected class=NAME or field=value options joined by &, each once; got 'class='"),
    ]:
        with pytest.raises(GnnperfError, match=message):
            resolve(f"hf:{path}?{query}")


def test_an_hf_model_type_is_built_from_its_config_classs_defaults_and_the_fields_given():
    ref = "hf:gpt2?class=GPT2LMHeadModel&n_layer=3&n_embd=64&n_head=4&n_positions=128&vocab_size=500"
    spec = resolve(ref)
    model = spec.build()
    assert spec.ref == ref and spec.family == "gpt2" and spec.source_file is None
    assert type(model.m).__name__ == "GPT2LMHeadModel" and spec.num_layers == 3 and spec.vocab_size == 500
    assert model.m.config.activation_function == "gelu_new"  # a default of GPT2Config
    # the same network as from a config file with those fields
    graph = build_graph(ref, (16,))
    assert graph.param_count() == sum(p.numel() for p in model.m.parameters())
    # values parse as JSON where they can, else stay text
    bert = resolve("hf:bert?num_hidden_layers=1&hidden_size=64&num_attention_heads=2&hidden_act=relu")
    config = bert.build().m.config
    assert (
        config.hidden_act == "relu"
        and config.num_hidden_layers == 1
        and type(bert.build().m).__name__ == "BertModel"
    )


def test_an_hf_reference_runs_transformers_default_attention_unless_it_names_eager():
    """Without ``attn_implementation`` a reference builds transformers' default attention, sdpa where the class has
    it (what the memory estimate traces), else eager; its time graph is the eager model's, which the predictor
    learned (NeuSight's measurements name ``attn_implementation=eager``)."""
    ref = "hf:gpt2?class=GPT2LMHeadModel&n_layer=1&n_embd=64&n_head=4&n_positions=64&vocab_size=500"
    eager, sdpa = resolve(f"{ref}&attn_implementation=eager"), resolve(f"{ref}&attn_implementation=sdpa")
    assert (eager.attention, sdpa.attention) == ("eager", "sdpa") and sdpa.ref.endswith(
        "&attn_implementation=sdpa"
    )
    default = resolve(ref)
    assert (default.ref, default.attention, default.assumptions) == (ref, "sdpa", sdpa.assumptions)
    assert default.build().m.config._attn_implementation == "sdpa"
    # a class without sdpa runs eager by default, and says nothing of fused attention
    switch = resolve(
        "hf:switch_transformers?class=SwitchTransformersForConditionalGeneration&num_layers=1&d_model=32&d_ff=64"
        "&num_heads=2&d_kv=16&num_experts=2&vocab_size=100"
    )
    assert switch.attention == "eager" and SDPA_TIME not in switch.assumptions
    assert eager.build().m.config._attn_implementation == "eager"
    assert sdpa.build().m.config._attn_implementation == "sdpa"
    assert sdpa.build(graph=True).m.config._attn_implementation == "eager"
    ops = [[n.op_type for n in build_graph(spec, (16,)).nodes] for spec in (eager, sdpa)]
    assert ops[0] == ops[1] and "Softmax" in ops[0]
    # said with each prediction: the time composed, and GPT-2's attention causal
    assert eager.assumptions == () and sdpa.assumptions == (SDPA_TIME, SDPA_CAUSAL)
    bert = "hf:bert?num_hidden_layers=1&hidden_size=64&num_attention_heads=4&intermediate_size=128&vocab_size=500"
    encoder = resolve(f"{bert}&attn_implementation=sdpa").assumptions  # an encoder's is not causal
    assert SDPA_TIME in encoder and SDPA_CAUSAL not in encoder
    with pytest.raises(
        GnnperfError, match="attn_implementation must be one of eager, sdpa, got 'flash_attention_2'"
    ):
        resolve(f"{ref}&attn_implementation=flash_attention_2")
    with pytest.raises(
        GnnperfError, match="Gemma2ForCausalLM has no sdpa attention in transformers"
    ):  # softcapping
        resolve("hf:gemma2?class=Gemma2ForCausalLM&attn_implementation=sdpa")


def _own(assumptions: tuple[str, ...]) -> tuple[str, ...]:
    """What a reference assumes beside its sdpa attention (transformers' default, so most references')."""
    return tuple(a for a in assumptions if a not in (SDPA_TIME, SDPA_CAUSAL))


MIXTRAL = (
    "hf:mixtral?num_hidden_layers=2&hidden_size=128&intermediate_size=256&num_attention_heads=4&num_key_value_heads=2"
    "&vocab_size=1000&num_local_experts=8"
)  # 8 experts of 256, two per token


def test_a_balanced_split_is_the_grouped_matrix_product():
    """Where the router splits the rows evenly (the last expert one short), the traced product is transformers'."""
    from gnnperf.zoo.hf_tracing import _balanced_grouped_mm

    x, w = torch.randn(8, 16), torch.randn(4, 16, 8)
    for rows, offsets in [(8, [2, 4, 6, 8]), (7, [2, 4, 6, 7])]:
        offs = torch.tensor(offsets, dtype=torch.int32)
        expected = torch.nn.functional.grouped_mm(x[:rows].contiguous(), w, offs=offs)
        assert torch.allclose(_balanced_grouped_mm(x[:rows], w, offs), expected, atol=1e-5)


def test_a_mixture_of_experts_is_exported_with_balanced_routing(capsys):
    """Routing decides how many rows each expert takes, which no exporter traces: with each expert taking an equal
    share, a model of 8 experts of 256, two per token, does the matrix FLOPs of a dense one of 512."""
    moe = summarize(build_graph(MIXTRAL, (64,)), 2)
    dense = MIXTRAL.replace("mixtral", "mistral").replace("intermediate_size=256", "intermediate_size=512")
    dense = summarize(build_graph(dense.replace("&num_local_experts=8", "&head_dim=32"), (64,)), 2)
    assert moe["mat_flops"] == pytest.approx(
        dense["mat_flops"], rel=0.01
    )  # and the router's 8 logits a token
    assert moe["params"] > 3 * dense["params"] / 2  # every expert's weights
    from gnnperf.cli import main

    assert main(["graph", f"{MIXTRAL}&attn_implementation=sdpa", "--seq-len", "64"]) == 0
    out = capsys.readouterr().out
    assert "exported with eager attention, which the predictor learned (the model runs sdpa)" in out
    assert (
        "assumed: a mixture of 8 experts, 2 per token: traced with each expert taking an equal share" in out
    )


DEEPSEEK_V2 = (
    "hf:deepseek_v2?num_hidden_layers=2&hidden_size=128&intermediate_size=256&moe_intermediate_size=64"
    "&num_attention_heads=4&kv_lora_rank=32&qk_rope_head_dim=16&qk_nope_head_dim=16&v_head_dim=16"
    "&n_routed_experts=4&num_experts_per_tok=2&first_k_dense_replace=1&vocab_size=1000&class=DeepseekV2ForCausalLM"
)
LLAMA4 = (
    "hf:llama4_text?num_hidden_layers=2&hidden_size=128&intermediate_size=128&intermediate_size_mlp=256"
    "&num_attention_heads=4&num_key_value_heads=2&head_dim=32&num_local_experts=4&vocab_size=1000"
    "&class=Llama4ForCausalLM"
)


@pytest.mark.parametrize("model_type", ["deepseek_v2", "llama4_text"])
def test_a_complex_rotary_traced_in_real_arithmetic_gives_transformers_values(model_type):
    """DeepSeek-V2 and Llama 4 rotate queries and keys as complex numbers, which neither exporter writes: traced,
    the same rotation in real arithmetic, with the same values and in the shapes each model's attention takes."""
    import importlib

    import transformers

    from gnnperf.zoo.hf_tracing import COMPLEX_ROTARY, traced

    config = transformers.AutoConfig.for_model(model_type, hidden_size=64, num_attention_heads=2, head_dim=32)
    (module_name,) = [m for m in COMPLEX_ROTARY if m.endswith(model_type.removesuffix("_text"))]
    module = importlib.import_module(module_name)
    rotary = getattr(module, COMPLEX_ROTARY[module_name][0])(config)
    x, positions = torch.randn(2, 5, 64), torch.arange(5).expand(2, 5)
    dim = 2 * rotary.inv_freq.numel()  # DeepSeek-V2 rotates a part of each head (qk_rope_head_dim)
    heads = (
        (2, 2, 5, dim) if model_type == "deepseek_v2" else (2, 5, 2, dim)
    )  # (batch, heads, seq) or (batch, seq, heads)
    q, k = torch.randn(heads), torch.randn(heads)
    expected = module.apply_rotary_emb(q, k, rotary(x, positions))
    with traced():
        freqs = rotary(x, positions)
        assert not freqs.is_complex()
        got = module.apply_rotary_emb(q, k, freqs)
    for a, b in zip(got, expected, strict=True):
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-6)


def test_models_with_complex_rotary_export_and_say_how_their_experts_are_traced():
    """Llama 4's code runs every expert on every token (traced so); DeepSeek-V2's runs transformers' grouped experts
    (traced with balanced routing)."""
    for ref, how in [
        (DEEPSEEK_V2, "each expert taking an equal share"),
        (LLAMA4, "as transformers' code for"),
    ]:
        assert summarize(build_graph(ref, (32,)), 2)["mat_flops"] > 0
        (assumed,) = _own(resolve(ref).assumptions)
        assert how in assumed


def test_a_hub_config_naming_a_remote_code_class_is_built_with_the_class_transformers_maps_it_to(tmp_path):
    """EXAONE's hub config names ExaoneForCausalLM (its remote code); transformers builds an exaone config as a
    LlamaForCausalLM, which is what gnnperf builds, and says so."""
    path = _config_file(
        tmp_path / "config.json", model_type="exaone", architectures=["ExaoneForCausalLM"], num_layers=2,
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128, vocab_size=500,
    )  # fmt: skip
    spec = resolve(f"hf:{path}")
    assert type(spec.build().m).__name__ == "LlamaForCausalLM"
    (assumed,) = _own(spec.assumptions)
    assert assumed.startswith("ExaoneForCausalLM (its 'architectures') is no transformers ")
    assert assumed.endswith("built as LlamaForCausalLM, the class transformers builds a 'exaone' config with")
    assert (
        _own(resolve("hf:exaone?class=LlamaForCausalLM&num_layers=2").assumptions) == ()
    )  # named, and mapped
    for bad in (
        "ExaoneForMagic",
        "ExaoneForCausalLM",
    ):  # a class the reference names is the user's to correct
        with pytest.raises(
            GnnperfError, match=f"transformers has no class '{bad}' \\(the reference's class="
        ):
            resolve(f"hf:exaone?class={bad}")


def test_switch_experts_are_traced_with_balanced_routing_up_to_their_capacity():
    """Switch Transformers' experts take the tokens the router picks, in a loop neither exporter traces: traced,
    each of 4 experts takes an equal share up to its capacity per sequence (3 here: 2 sequences x 3 = 6 of the 8
    tokens an even split would give it), and the model exports and traces for its memory."""
    from gnnperf.graph.memory import training_memory
    from gnnperf.measure.workload import Workload
    from gnnperf.zoo.hf_tracing import traced

    ref = (
        "hf:switch_transformers?class=SwitchTransformersForConditionalGeneration&num_layers=2&d_model=64&d_ff=128"
        "&num_heads=4&d_kv=16&num_experts=4&expert_capacity=3&vocab_size=500"
    )
    spec = resolve(ref)
    model = spec.build()
    rows = []
    for name, module in model.named_modules():
        if name.endswith("mlp.experts.expert_0"):
            module.register_forward_hook(lambda m, args, out: rows.append(args[0].shape[0]))
    with traced():
        model(*spec.make_inputs(2, (16,)))
    assert rows and set(rows) == {6}
    assert "up to its capacity of 3 a sequence" in spec.assumptions[0]
    assert summarize(build_graph(ref, (16,)), 2)["mat_flops"] > 0
    assert training_memory(ref, Workload(input_shape=(16,), batch_size=2, optimizer="sgd")).activations_mb > 0


def test_layerdrop_is_off_so_the_graph_and_the_memory_trace_have_every_layer():
    """M2M100 skips each layer with its LayerDrop probability in training, one draw per step: exported with it on,
    the graph kept the layers one draw kept, and the shape-only memory trace could not draw at all."""
    from gnnperf.graph.memory import training_memory
    from gnnperf.measure.workload import Workload

    m2m = (
        "hf:m2m_100?class=M2M100ForConditionalGeneration&encoder_layers=2&decoder_layers=2&d_model=64"
        "&encoder_attention_heads=4&decoder_attention_heads=4&encoder_ffn_dim=128&decoder_ffn_dim=128&vocab_size=500"
    )
    dropping = f"{m2m}&encoder_layerdrop=0.9&decoder_layerdrop=0.9"
    (assumed,) = _own(resolve(dropping).assumptions)
    assert assumed.startswith(
        "LayerDrop off (encoder_layerdrop 0.9, decoder_layerdrop 0.9): every layer runs"
    )
    assert len(build_graph(dropping, (16,)).nodes) == len(
        build_graph(m2m + "&encoder_layerdrop=0", (16,)).nodes
    )
    memory = training_memory(dropping, Workload(input_shape=(16,), batch_size=2, optimizer="sgd"))
    assert memory.activations_mb > 0


def test_experts_split_by_the_model_code_and_sampled_routing_noise_are_traced():
    """JetMoE splits the routed tokens by expert in its own code (sizes read from the router), PhiMoE samples
    Gumbel noise with Tensor.exponential_: neither exported before. Traced, JetMoE's experts take equal shares (the
    same product as its code on an even split) and the noise is drawn from the same distribution."""
    from transformers.models.jetmoe.modeling_jetmoe import JetMoeParallelExperts

    from gnnperf.zoo.hf_tracing import traced

    experts, x = JetMoeParallelExperts(4, 16, 8), torch.randn(12, 16)
    torch.nn.init.normal_(experts.weight)  # built with torch.empty
    expected = experts(x, [3, 3, 3, 3])
    with traced():
        assert torch.allclose(experts(x, [1, 5, 0, 6]), expected, atol=1e-6)  # the routed split is not read
        torch.manual_seed(0)
        draws = torch.empty(200_000).exponential_(2.0)
    assert draws.min() >= 0 and draws.mean().item() == pytest.approx(0.5, rel=0.01)
    small = "num_hidden_layers=2&hidden_size=128&num_attention_heads=4&num_key_value_heads=2&vocab_size=1000"
    for ref in (
        f"hf:jetmoe?class=JetMoeForCausalLM&{small}&intermediate_size=256&num_local_experts=4&num_experts_per_tok=2",
        f"hf:phimoe?class=PhimoeForCausalLM&{small}&intermediate_size=256&num_local_experts=4&num_experts_per_tok=2",
        "hf:xmod?class=XmodForCausalLM&num_hidden_layers=2&hidden_size=128&num_attention_heads=4&vocab_size=1000",
    ):
        assert summarize(build_graph(ref, (32,)), 2)["mat_flops"] > 0
    jetmoe = resolve(f"hf:jetmoe?class=JetMoeForCausalLM&{small}&num_local_experts=4&num_experts_per_tok=2")
    (assumed,) = _own(jetmoe.assumptions)
    assert "each expert taking an equal share" in assumed


def test_jetmoe_routing_is_traced_without_reading_the_experts_sizes():
    """JetMoE's router reads each expert's token count (``.tolist()``), which the memory trace has no values for;
    traced, it routes as before (the same pairs, sorted by expert, and gates) with equal shares, and the memory
    estimate runs."""
    from transformers.models.jetmoe.modeling_jetmoe import JetMoeTopKGating

    from gnnperf.graph.memory import training_memory
    from gnnperf.measure.workload import Workload
    from gnnperf.zoo.hf_tracing import traced

    router, x = JetMoeTopKGating(16, num_experts=3, top_k=2), torch.randn(7, 16)
    expected = router(x)
    with traced():
        routed = router(x)
    for got, want in zip(routed[:3] + routed[4:], expected[:3] + expected[4:], strict=True):
        assert torch.equal(got, want)
    assert routed[3] == [5, 5, 4]  # 14 token-expert pairs; the router's own split is expected[3]
    small = "num_hidden_layers=2&hidden_size=128&num_attention_heads=4&num_key_value_heads=2&vocab_size=1000"
    ref = f"hf:jetmoe?class=JetMoeForCausalLM&{small}&intermediate_size=256&num_local_experts=4&num_experts_per_tok=2"
    assert training_memory(ref, Workload(input_shape=(16,), batch_size=2, optimizer="sgd")).activations_mb > 0


@pytest.mark.parametrize(
    "ref, says",
    [
        ("hf:gpt5", "hf config not found: gpt5 \\(nor is it a transformers model type, such as gpt2"),
        ("hf:gpt2?n_layer=0", "num_hidden_layers must be at least 1, got 0"),
        ("hf:gpt2?n_layer=2&n_layer=3", "each once; got 'n_layer=3'"),
        ("hf:gpt2?n_layer", "each once; got 'n_layer='"),
        ("hf:no/such/config", "hf config not found: no/such/config$"),
    ],
)
def test_a_bad_hf_model_type_reference_is_one_clear_error(ref, says):
    with pytest.raises(GnnperfError, match=says):
        resolve(ref)
