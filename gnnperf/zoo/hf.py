"""``hf:`` references: a transformers text model built from a config with random weights.

- ``hf:PATH/TO/config.json``: a config file (a hub model's ``config.json``);
- ``hf:MODEL_TYPE[?field=value&...]``: where no such file exists, a transformers model type (``gpt2``, ``bert``,
  ``llama``, ...) with its config class's defaults and the fields given (values read as JSON where they parse:
  ``hf:llama?num_hidden_layers=16&hidden_size=2048&intermediate_size=5632``), so that a model can be named offline.

``transformers`` builds the class named in ``architectures`` (else the base model), or the one a reference names
(``?class=BertForSequenceClassification``: the head a run used, which a hub config often does not name), with
``from_config`` and the attention transformers picks by default: sdpa (PyTorch's fused attention) where the class
has it, else eager; ``attn_implementation=eager`` names the explicit one (what NeuSight measured, :data:`ATTENTION`);
a deep stack can be built shallower (``ModelSpec.num_layers``, :mod:`gnnperf.graph.repeat`). Only the first output
(the logits) is priced (:class:`HFLogits`).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import torch
from torch import nn

from gnnperf.errors import GnnperfError
from gnnperf.zoo.hf_tracing import BALANCED_EXPERTS, traced
from gnnperf.zoo.resolve import ModelSpec

# Attention as transformers runs it (the reference's attn_implementation): eager, explicit MatMul/Softmax that keeps
# the attention matrix for the backward pass, as NeuSight measured and the shipped predictor learned (the graphs are
# always exported so); sdpa, torch's scaled_dot_product_attention, transformers' default for every class that has it
# (and so the reference's, since 2026-12-06), whose fused GPU kernels keep no attention matrix (the memory estimate
# traces them so: gnnperf.graph.as_on_gpu)
ATTENTION = ("eager", "sdpa")
# What a prediction of an sdpa model assumes: its graph is exported with eager attention (ModelSpec.graph_builder),
# whose attention ops' predicted time is swapped for a fused kernel's composed price (gnnperf.predictor.fused_attention)
SDPA_TIME = (
    "sdpa attention: predicted from eager attention's graph with its attention ops' time replaced by a fused "
    "kernel's, composed (its matrix products at the rate the step's weight products are predicted to run, at most "
    "PyTorch's flash kernel's published rate on a Hopper GPU in 16 bits, the backward recomputing the scores; not "
    "learned: checked against one published GPU run and on a CPU); the memory as the fused kernels keep it"
)
# ... and, for a causal model's self-attention, that the fused kernel skips the masked half of the scores
SDPA_CAUSAL = (
    "sdpa attention is causal: the fused kernel computes the score tiles on and below the diagonal only"
)


def _causal(config: Any) -> bool:
    """Whether every attention of the model is causal self-attention (transformers passes sdpa ``is_causal``): a
    decoder (``is_decoder``) or a type with a causal LM head and no masked-LM one (an encoder's type has both);
    encoder-decoders mix both kinds and are priced without the skip."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if getattr(config, "is_encoder_decoder", False):
        return False
    kind = config.model_type
    decoder_type = kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
    return bool(getattr(config, "is_decoder", False)) or decoder_type


def hf_spec(path: str) -> ModelSpec:
    """The spec of ``hf:PATH[?class=NAME]`` or ``hf:MODEL_TYPE[?class=NAME&field=value...]``: the transformers class
    a config (or the reference) names, with random weights (see the module doc). A ``?`` in the reference starts its
    query, as in ``zoo:`` references."""
    path, _, query = path.partition("?")
    options = _options(path, query)
    class_name = options.pop("class", "")
    attention = options.pop("attn_implementation", None)
    if attention is not None and attention not in ATTENTION:
        raise GnnperfError(
            f"hf:{path}?{query}: attn_implementation must be one of {', '.join(ATTENTION)}, got '{attention}'"
        )
    p: Path | None = Path(path)
    if p.is_file() or p.suffix == ".json" or "/" in path or "\\" in path:
        if options:
            raise GnnperfError(
                f"hf:{path}?{query}: the options of an hf: config file are class=NAME (a transformers class) and "
                "attn_implementation; change the file for other fields"
            )
        cfg = _read_config(p)
    else:  # a model type with its config class's defaults
        cfg = {"model_type": path, **{k: _value(v) for k, v in options.items()}}
        p = None
    try:
        import transformers
    except ImportError:
        raise GnnperfError("hf: references need the 'transformers' package") from None
    if p is None and path not in transformers.CONFIG_MAPPING:
        raise GnnperfError(
            f"hf config not found: {path} (nor is it a transformers model type, such as gpt2, bert or llama)"
        )

    def make_config(num_layers: int | None):
        config = transformers.AutoConfig.for_model(cfg["model_type"], **_fields(cfg))
        if num_layers is not None:
            config.num_hidden_layers = num_layers
        config.use_cache = False  # a training step keeps no KV cache (and the cache object breaks tracing)
        if getattr(config, "default_language", "") is None and getattr(config, "languages", None):
            # X-MOD runs one language's adapters, which it cannot pick without one named: the first (all cost alike)
            config.default_language = list(config.languages)[0]
        return config

    try:
        config = make_config(None)
    except Exception as e:  # transformers validates fields with its own error types (strict dataclasses...)
        # it lists every model type it knows after an unknown one: keep the first sentence
        lines = [s.strip() for s in str(e).split(". Should contain one of")[0].splitlines() if s.strip()]
        reason = " ".join(lines[:2])[:300] if lines else type(e).__name__  # a field's error spans two lines
        raise GnnperfError(f"hf config {path}: {reason}") from None
    archs = cfg.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise GnnperfError(f"hf config {path}: 'architectures' must be a list of class names, got {archs!r}")
    name = class_name or (archs[0] if archs else None)
    named_by = "the reference's class=" if class_name else "its 'architectures'"
    cls = getattr(transformers, name, None) if name else None
    mapped = _mapped_classes(config)
    substituted: tuple[str, ...] = ()
    if name and cls is None:
        # a hub config naming its remote-code class (EXAONE's ExaoneForCausalLM, ...) for a model type transformers
        # now builds with a class of its own (LlamaForCausalLM): that class, with the same head (a class the
        # reference names is the user's to correct)
        cls = None if class_name else _same_head(name, mapped)
        if cls is None:
            raise GnnperfError(f"hf config {path}: transformers has no class '{name}' ({named_by})")
        substituted = (
            f"{name} ({named_by}) is no transformers {transformers.__version__} class: built as {cls.__name__}, "
            f"the class transformers builds a '{cfg['model_type']}' config with",
        )
    if cls is not None and not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
        raise GnnperfError(f"hf config {path}: '{name}' ({named_by}) is not a transformers model class")
    if (
        cls is not None
        and cls.config_class is not None
        and not isinstance(config, cls.config_class)
        and cls not in mapped
    ):
        raise GnnperfError(
            f"hf config {path}: '{name}' ({named_by}) takes a {cls.config_class.__name__}, not the "
            f"{type(config).__name__} of model_type '{cfg['model_type']}'"
        )
    try:
        built = cls or transformers.MODEL_MAPPING[type(config)]
    except KeyError:  # a config type without a base model class: told by vocab_size alone
        built = None
    main_input = getattr(built, "main_input_name", "input_ids")
    has_sdpa = built is not None and bool(getattr(built, "_supports_sdpa", False))
    if attention == "sdpa" and built is not None and not has_sdpa:
        raise GnnperfError(
            f"hf config {path}: {built.__name__} has no sdpa attention in transformers {transformers.__version__} "
            "(it runs eager attention: leave attn_implementation out)"
        )
    attention = attention or ("sdpa" if has_sdpa else "eager")  # transformers' own default
    if not hasattr(config, "vocab_size") or main_input != "input_ids":
        why = f"its input is {main_input}" if main_input != "input_ids" else "no vocab_size"
        # a multimodal config (Llama 4, Gemma 3, Qwen 3.5, ...) holds its language model's as text_config
        text = getattr(getattr(config, "text_config", None), "model_type", None)
        hint = f"; its language model alone is its text_config, model_type '{text}'" if text else ""
        raise GnnperfError(
            f"hf config {path}: a {cfg['model_type']} model takes no token ids ({why}); hf: references are text "
            f"models, export others to ONNX or give a package.module:factory{hint}"
        )
    if not isinstance(config.vocab_size, int) or config.vocab_size < 1:
        raise GnnperfError(f"hf config {path}: vocab_size must be at least 1, got {config.vocab_size!r}")

    def build(num_layers: int | None, attention: str = attention) -> nn.Module:
        c = make_config(num_layers)
        c._attn_implementation = attention
        for field in LAYERDROP:  # every layer runs (see _layerdrop)
            if getattr(c, field, 0):
                setattr(c, field, 0.0)
        model = cls._from_config(c) if cls is not None else transformers.AutoModel.from_config(c)
        return HFLogits(model, bool(getattr(c, "is_encoder_decoder", False)))

    depth = getattr(config, "num_hidden_layers", None)
    if isinstance(depth, int) and depth < 1:  # transformers builds an empty (or, below 0, the same) stack
        raise GnnperfError(f"hf config {path}: num_hidden_layers must be at least 1, got {depth}")
    is_encoder_decoder = bool(getattr(config, "is_encoder_decoder", False))
    positions = getattr(config, "max_position_embeddings", None)
    return ModelSpec(
        ref=f"hf:{path}" + (f"?{query}" if query else ""),
        family=cfg["model_type"],
        input_kind="tokens",
        default_input_shape=(min(int(positions or 512), 512),),
        input_names=("input_ids",),
        builder=build,
        vocab_size=int(config.vocab_size),
        excluded_token_ids=_pad_id(config),
        # Encoder-decoder stacks have two depths; they are always built whole.
        num_layers=None if is_encoder_decoder or not depth else int(depth),
        layer_scope=LAYER_SCOPE,
        max_positions=positions if isinstance(positions, int) else None,
        source_file=p,
        attention=attention,
        graph_builder=None if attention == "eager" else partial(build, attention="eager"),
        tracing=traced,
        assumptions=substituted
        + ((SDPA_TIME,) + (SDPA_CAUSAL,) * _causal(config) if attention == "sdpa" else ())
        + _layerdrop(config)
        + _experts(config, built)
        + (() if class_name or archs else _headless(config, built)),
    )


def _fields(cfg: dict[str, Any]) -> dict[str, Any]:
    """A config's fields as transformers is given them: the precision is the workload's (--precision), not the
    config's torch_dtype (most hub configs have one)."""
    return {k: v for k, v in cfg.items() if k not in ("model_type", "torch_dtype", "dtype")}


# LayerDrop: in training each layer is skipped with this probability, drawn at every step (M2M100, NLLB-MoE,
# SeamlessM4T; speech encoders)
LAYERDROP = ("layerdrop", "encoder_layerdrop", "decoder_layerdrop")


def _layerdrop(config: Any) -> tuple[str, ...]:
    """Built with LayerDrop off: an exported training graph would keep the layers one random draw kept, and the
    shape-only memory trace cannot draw; said where the config has it."""
    drop = {f: v for f in LAYERDROP if isinstance(v := getattr(config, f, 0), int | float) and v > 0}
    if not drop:
        return ()
    said = ", ".join(f"{f} {v:g}" for f, v in drop.items())
    return (
        f"LayerDrop off ({said}): every layer runs in the step predicted; training with it skips each layer with "
        "that probability, so a step is on average about that fraction shorter",
    )


def _options(path: str, query: str) -> dict[str, str]:
    """``class=X&n_layer=2`` -> ``{"class": "X", "n_layer": "2"}``; a part without a name or a value is an error."""
    options: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):  # as zoo: references are read
        if not key or not value or key in options:
            raise GnnperfError(
                f"hf:{path}?{query}: expected class=NAME or field=value options joined by &, each once; got "
                f"'{key}={value}'"
            )
        options[key] = value
    return options


def _value(text: str) -> Any:
    """A config field's value from a reference: JSON where it parses (2, 0.1, true, null), else the text (gelu)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _read_config(p: Path) -> dict[str, Any]:
    try:
        cfg = json.loads(p.read_text())
    except FileNotFoundError:
        raise GnnperfError(f"hf config not found: {p}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GnnperfError(f"cannot read hf config {p}: {e}") from None
    if not isinstance(cfg, dict) or "model_type" not in cfg:
        raise GnnperfError(
            f"hf config {p} has no 'model_type' (expected a JSON object of a transformers config)"
        )
    return cfg


def _mapped_classes(config: Any) -> list[type]:
    """The model classes transformers' auto classes build a config of this type with (every task's)."""
    from transformers.models.auto import modeling_auto

    mappings = [getattr(modeling_auto, n) for n in dir(modeling_auto) if n.endswith("_MAPPING")]
    return [m[type(config)] for m in mappings if hasattr(m, "_model_mapping") and type(config) in m]


def _same_head(name: str, mapped: list[type]) -> type | None:
    """Of ``mapped``, the class with the head ``name`` names (``XForCausalLM`` -> ``YForCausalLM``; ``XLMHeadModel``
    and ``XModel`` likewise), if any."""
    if "For" in name:
        head = name[name.index("For") :]
    elif name.endswith("Model"):
        head = "LMHeadModel" if name.endswith("LMHeadModel") else "Model"
    else:
        return None
    heads = [
        c for c in mapped if c.__name__.endswith(head) and (head != "Model" or "LMHead" not in c.__name__)
    ]
    return heads[0] if heads else None


def _headless(config: Any, built: type | None) -> tuple[str, ...]:
    """Where neither the reference nor the config names a class, transformers' base model is built: no language-
    model head, which a language model's training step has (LLaMA-7B's, 32,000 tokens, has two thirds of a layer's
    FLOPs; more, relatively, in smaller models); said, with the classes that add one."""
    import transformers

    mappings = (
        "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING",
        "MODEL_FOR_CAUSAL_LM_MAPPING",
        "MODEL_FOR_MASKED_LM_MAPPING",
    )
    heads = [getattr(transformers, m).get(type(config), None) for m in mappings]
    names = list(dict.fromkeys(h.__name__ for h in heads if h is not None and h is not built))
    if built is None or not names:
        return ()
    return (
        f"built as {built.__name__}, the base model without a language-model head (no class named by the reference "
        f"or the config): add class={' or class='.join(names[:2])} for a language model's training step",
    )


def _experts(config: Any, built: type | None) -> tuple[str, ...]:
    """What a mixture of experts is predicted with, for a config that routes each token to some: balanced routing
    where transformers runs the experts as grouped experts (:func:`~gnnperf.zoo.hf_tracing.traced`), else its model
    code as it runs."""
    per_token = getattr(config, "num_experts_per_tok", None) or getattr(config, "num_experts_per_token", None)
    counts = [getattr(config, a, None) for a in ("num_local_experts", "num_experts", "n_routed_experts")]
    experts = next((n for n in counts if isinstance(n, int) and n > 1), None)
    if experts is None:
        return ()
    # transformers' own test for a model whose experts run through its grouped-experts interface (the decorator
    # use_experts_implementation in the model's module); Llama 4's code, for one, runs every expert on every token
    grouped = getattr(built, "_can_set_experts_implementation", None)
    balanced = (grouped is not None and grouped()) or getattr(built, "__module__", "") in BALANCED_EXPERTS
    capacity = getattr(config, "expert_capacity", None)  # Switch Transformers: tokens per expert and sequence
    capped = f", up to its capacity of {capacity} a sequence" if isinstance(capacity, int) else ""
    how = (
        f"traced with each expert taking an equal share of the routed tokens{capped} (a skewed routing runs longer)"
        if balanced
        else "traced as transformers' code for this model runs them (with its random weights' routing where the "
        "code follows one)"
    )
    per = f", {per_token} per token" if isinstance(per_token, int) else ""
    return (
        f"a mixture of {experts} experts{per}: {how}; no model the shipped predictor learned from had experts",
    )


# Block index in ONNX node names ("/m/transformer/h.3/attn/MatMul") and parameter names ("m.model.layers.3.").
LAYER_SCOPE = r"[/.](?:h|layer|layers|block|blocks)\.(\d+)[/.]"


def _pad_id(config: Any) -> tuple[int, ...]:
    """The config's padding token, which the harness's inputs leave out (:attr:`ModelSpec.excluded_token_ids`)."""
    pad = getattr(config, "pad_token_id", None)
    return (pad,) if isinstance(pad, int) and 0 <= pad < config.vocab_size and config.vocab_size > 1 else ()


class HFLogits(nn.Module):
    """Calls a transformers model with token ids only and returns its first output (the logits).

    Exporters fill a forward's remaining defaults in as graph inputs (``logits_to_keep`` would become a tensor
    and cut the LM head to one position); this wrapper keeps the traced signature to ``input_ids``.
    """

    def __init__(self, model: nn.Module, encoder_decoder: bool) -> None:
        super().__init__()
        self.m = model
        self.encoder_decoder = encoder_decoder

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        extra = {"decoder_input_ids": input_ids} if self.encoder_decoder else {}
        return self.m(input_ids=input_ids, use_cache=False, return_dict=False, **extra)[0]
