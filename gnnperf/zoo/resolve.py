"""Model references: the strings users type, resolved to a buildable model with random weights.

Forms (GUIDE "Model reference"):

- ``timm:NAME`` (deprecated aliases resolve through timm), ``torchvision:NAME``
- ``hf:PATH/TO/config.json[?class=NAME]``: ``transformers`` builds the class named in ``architectures`` (else the
  base model), or ``NAME``, with ``from_config``; deep configs can be built shallower (see ``ModelSpec.num_layers``)
- ``hf:MODEL_TYPE[?class=NAME&field=value...]``: a transformers model type with its config class's defaults
  (:mod:`gnnperf.zoo.hf`)
- ``zoo:FAMILY?key=value&...``: a parametric family from :mod:`gnnperf.zoo.registry`
- ``path/to/model.onnx``: an existing ONNX graph (nothing to build)
- ``package.module:factory``: a callable returning an ``nn.Module``
- ``path/to/file.py:factory``: the same, from a Python file that is not an importable module

Nothing here downloads weights: every builder asks for random initialisation.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import os
import re
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import torch
from torch import nn

from gnnperf.errors import GnnperfError, suggest

# What a model of each kind takes, and each dim of its per-sample input shape (the error for a wrong rank).
INPUT_DIMS = {
    "image": ("images", "channels, height, width"),
    "video": ("video clips", "channels, frames, height, width"),
}


@dataclass
class ModelSpec:
    """A resolved model reference.

    Attributes:
        ref: canonical reference (cache key component; zoo params are completed and sorted).
        family: architecture family (timm module, torchvision module, HF model type, zoo family).
        input_kind: ``image`` | ``video`` | ``tokens`` | ``sequence`` | ``vector`` | ``onnx``.
        default_input_shape: per-sample input shape used when the workload gives none.
        input_names: ONNX input names, one per model input.
        vocab_size: upper bound of token ids for ``tokens`` models.
        excluded_token_ids: ids below ``vocab_size`` that inputs never hold: an hf config's ``pad_token_id``, since
            a padded position takes other branches in some models' code (FSMT's padding mask, XLM's lengths) and a
            training batch of packed text has none.
        num_layers: depth of the repeated block for models that can be built shallower (HF configs);
            ``None`` when the model cannot.
        layer_scope: regex with one group matching the block index in ONNX node names (``layers.3``).
        onnx_path: set for ``.onnx`` references.
        max_positions: the config's ``max_position_embeddings`` (hf references), named when an export at a longer
            sequence fails (a learned position table has no row past it; rotary models run on).
        sized_builder: builds the model for a per-sample input shape other than the default, for models whose
            input size is fixed at build (timm's ``fixed_input_size``, torchvision's ViTs).
        source_file: the file the model is built from (an hf config, a factory's module), which can change under
            the same reference: the graph cache keys on its digest.
        attention: how an hf model computes attention (:data:`gnnperf.zoo.hf.ATTENTION`); None for other models.
        graph_builder: builds the model as its time graph is exported, where that differs from what runs: an hf
            model with ``sdpa`` attention is exported with eager attention, which the predictor learned (the
            exporter writes the fused op as the same MatMul and Softmax, with mask guards no training graph had).
        tracing: a context under which the model is traced (exported, or run shape-only for its memory), where
            that differs from running it: for hf models, :func:`gnnperf.zoo.hf_tracing.traced` (token positions of one
            sequence per row, mixture-of-experts routing balanced).
        assumptions: what predictions of the model assume where its code leaves it to the values it runs on, said
            with them (an hf mixture of experts: balanced routing).
    """

    ref: str
    family: str
    input_kind: str
    default_input_shape: tuple[int, ...]
    input_names: tuple[str, ...]
    builder: Callable[[int | None], nn.Module] | None = None
    vocab_size: int | None = None
    excluded_token_ids: tuple[int, ...] = ()
    num_layers: int | None = None
    layer_scope: str | None = None
    onnx_path: Path | None = None
    max_positions: int | None = None
    sized_builder: Callable[[int | None, tuple[int, ...]], nn.Module] | None = None
    source_file: Path | None = None
    attention: str | None = None
    graph_builder: Callable[[int | None], nn.Module] | None = None
    tracing: Callable[[], AbstractContextManager[Any]] = nullcontext
    assumptions: tuple[str, ...] = ()

    def build(
        self, num_layers: int | None = None, input_shape: tuple[int, ...] | None = None, graph: bool = False
    ) -> nn.Module:
        """The model with random weights; ``num_layers`` builds a shallower copy where supported.

        ``input_shape`` other than the default builds a model whose input size is fixed at build (a ViT's position
        table, a Swin's windows) for that shape, where the spec has a ``sized_builder``; other models take any size.
        ``graph``: the model as its time graph is exported (``graph_builder``, where the spec has one).
        """
        if self.builder is None:
            raise GnnperfError(f"{self.ref} is an ONNX file; there is no PyTorch model to build")
        if num_layers is not None and self.num_layers is None:
            raise ValueError(f"{self.ref} cannot be built with a different depth")
        if input_shape and self.sized_builder and tuple(input_shape) != self.default_input_shape:
            return self.sized_builder(num_layers, tuple(input_shape))
        return (self.graph_builder if graph and self.graph_builder else self.builder)(num_layers)

    def input_shape(self, shape: tuple[int, ...] | None) -> tuple[int, ...]:
        if shape and self.input_kind == "tokens" and len(shape) != 1:  # (3, 224) would be 3x the batch
            raise GnnperfError(
                f"{self.ref} takes token ids: its input shape is one sequence length, got {','.join(map(str, shape))}"
            )
        default = self.default_input_shape
        if shape and self.input_kind in INPUT_DIMS and default and len(shape) != len(default):
            takes, dims = INPUT_DIMS[self.input_kind]
            raise GnnperfError(
                f"{self.ref} takes {takes}: its input shape is {len(default)} dims ({dims}) such as "
                f"{','.join(map(str, default))}, got {','.join(map(str, shape))}"
            )
        return tuple(shape) if shape else self.default_input_shape

    def make_inputs(
        self,
        batch_size: int,
        input_shape: tuple[int, ...] | None = None,
        device: str | torch.device = "cpu",
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, ...]:
        """Synthetic inputs for one batch: float tensors, or token ids below ``vocab_size``, uniform over those not
        in ``excluded_token_ids``."""
        shape = (batch_size, *self.input_shape(input_shape))
        if self.input_kind == "tokens":
            excluded = sorted(set(self.excluded_token_ids))
            ids = torch.randint(0, (self.vocab_size or 2) - len(excluded), shape, generator=generator)
            for e in excluded:  # ascending: each shifts the ids at or above it past it
                ids += ids >= e
            return (ids.to(device),)
        return (torch.randn(shape, generator=generator).to(device),)


def parse_input_shape(text: str | None) -> tuple[int, ...] | None:
    """``"3,224,224"`` -> ``(3, 224, 224)``; ``None``/empty stays ``None``."""
    if text is None or str(text).strip() == "":
        return None
    if isinstance(text, (list, tuple)):
        parts = [str(p) for p in text]
    else:
        body = str(text).strip().strip("()[]").strip()
        if not re.fullmatch(r"\d+(\s*[,x]\s*\d+)*,?", body):
            raise GnnperfError(f"bad input shape '{text}': expected positive integers such as 3,224,224")
        parts = [p for p in re.split(r"\s*[,x]\s*", body) if p]
    shape = tuple(int(p) for p in parts)
    if not shape or any(d <= 0 for d in shape):
        raise GnnperfError(f"bad input shape '{text}': expected positive integers such as 3,224,224")
    return shape


def resolve_hf(ref: str) -> ModelSpec | None:
    """The spec of an hf reference, else None: where only hf specs carry what a caller reads again after the
    model was built (``attention``, ``assumptions``), and resolving another reference again is not free (a factory
    file would run a second time)."""
    return resolve(ref) if ref.startswith("hf:") else None


def resolve(ref: str) -> ModelSpec:
    """Resolve a model reference string; a bad reference raises :class:`GnnperfError`."""
    ref = ref.strip()
    if ref.startswith("timm:"):
        return _timm(ref[5:])
    if ref.startswith("torchvision:"):
        from gnnperf.zoo.tv import torchvision_spec

        return torchvision_spec(ref[12:])
    if ref.startswith("hf:"):
        from gnnperf.zoo.hf import hf_spec  # transformers is imported only for hf: references

        return hf_spec(ref[3:])
    if ref.startswith("zoo:"):
        return _zoo(ref[4:])
    if ref.lower().endswith(".onnx"):
        return _onnx(ref)
    if re.fullmatch(r".+\.py:[A-Za-z_]\w*", ref):  # before modules: ``net.py:build`` names a file
        return _file_factory(ref)
    if re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", ref):
        return _factory(ref)
    raise GnnperfError(
        f"unknown model reference '{ref}': expected timm:NAME, torchvision:NAME, hf:config.json, hf:MODEL_TYPE, "
        "zoo:FAMILY?k=v, path/to/model.onnx, package.module:factory or path/to/file.py:factory"
    )


def _timm(name: str) -> ModelSpec:
    from gnnperf.imports import import_timm

    timm = import_timm()
    from timm.models import get_pretrained_cfg_value, is_model
    from timm.models._registry import get_deprecated_models

    # Deprecated names (benchmark tables use many) map to their current name and pretrained tag.
    canonical = get_deprecated_models().get(name) or name
    arch = canonical.split(".")[0]
    if not is_model(arch):
        raise GnnperfError(f"unknown timm model '{name}'{suggest(name, timm.list_models())}")
    try:
        input_size = get_pretrained_cfg_value(canonical, "input_size") or (3, 224, 224)
    except RuntimeError as e:  # an alias to a pretrained tag timm no longer has
        raise GnnperfError(f"timm model '{name}' cannot be created: {e}") from None
    # every timm model in the benchmark tables is at its own fixed size (checked over all 27 tables on 2026-12-03),
    # so building at another size changes no graph of their rows
    fixed = get_pretrained_cfg_value(canonical, "fixed_input_size")
    return ModelSpec(
        ref=f"timm:{name}",
        family=_timm_module(arch),
        input_kind="image",
        default_input_shape=tuple(input_size),
        input_names=("input",),
        builder=lambda _depth: timm.create_model(canonical, pretrained=False),
        sized_builder=(
            (lambda _depth, shape: timm.create_model(canonical, pretrained=False, img_size=shape[1:]))
            if fixed
            else None
        ),
    )


def _timm_module(arch: str) -> str:
    from timm.models._registry import _model_to_module  # the module that registered the architecture

    return _model_to_module.get(arch, "timm")


def zoo_params(ref: str) -> tuple[str, dict[str, Any]]:
    """``zoo:FAMILY?key=value&...`` (or without ``zoo:``) -> the family's name and its complete, checked parameters.

    Raises:
        GnnperfError: an unknown family or parameter, or a value of the wrong type or out of range.
    """
    from gnnperf.zoo.registry import coerce, get_family

    name, _, query = ref.removeprefix("zoo:").partition("?")
    family = get_family(name)
    overrides = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in family.defaults:
            family.params({key: value})  # raises the user error with suggestions
        try:
            overrides[key] = _in_range(key, coerce(value, family.defaults[key]), family.defaults[key])
        except GnnperfError as e:
            raise GnnperfError(f"zoo:{name} parameter '{key}': {e}") from None
    return name, family.params(overrides)


def _zoo(body: str) -> ModelSpec:
    from gnnperf.zoo.registry import format_query, get_family

    name, params = zoo_params(body)
    family = get_family(name)
    return ModelSpec(
        ref=f"zoo:{name}?{format_query(params)}",
        family=name,
        input_kind=family.input_kind,
        default_input_shape=tuple(family.input_shape(params)),
        input_names=("input",),
        builder=lambda _depth: family.build(**params),
        vocab_size=family.vocab_size(params) if family.vocab_size else None,
    )


# Sizes whose 0 the families define as "no such layer" (vgg.py: one linear classifier; mobilenet.py: no 1x1 head).
ZERO_MEANS_NONE = frozenset({"fc_width", "head_width"})


def _in_range(key: str, value: Any, default: Any) -> Any:
    """``value`` of a zoo parameter, refused where it would build a degenerate model that still exports.

    A count or size whose default is positive (channels, classes, widths, image size) must be at least 1, a
    ``*_ratio`` above 0, and every float finite: ``in_chans=0`` gave a graph of a model that takes no input.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise GnnperfError(f"{value} is not a finite number")
    positive_count = isinstance(default, int) and not isinstance(default, bool) and default > 0
    if positive_count and key not in ZERO_MEANS_NONE and value < 1:
        raise GnnperfError(f"expected at least 1, got {value}")
    if key.endswith("ratio") and value <= 0:
        raise GnnperfError(f"expected a ratio above 0, got {value}")
    return value


def _onnx(path: str) -> ModelSpec:
    p = Path(path)
    if not p.is_file():
        raise GnnperfError(f"ONNX file not found: {path}")
    return ModelSpec(
        ref=str(p),
        family="onnx",
        input_kind="onnx",
        default_input_shape=(),
        input_names=(),
        onnx_path=p,
    )


def _import_from_cwd_too(module_name: str):
    """``importlib.import_module``, looking in the working directory last when nothing else has the module.

    ``python -m`` puts the working directory first on the path; a console script (``gnnperf predict``) puts its own
    ``bin`` directory there instead, and a model file beside the user would not be found.
    """
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        cwd = os.getcwd()
        if e.name != module_name.partition(".")[0] or cwd in sys.path or "" in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(module_name)


def _factory(ref: str) -> ModelSpec:
    module_name, _, attr = ref.partition(":")
    try:
        module = _import_from_cwd_too(module_name)
    except ImportError as e:
        raise GnnperfError(f"cannot import module '{module_name}' for {ref}: {e}") from None
    return _factory_spec(ref, module, module_name, attr)


def _file_factory(ref: str) -> ModelSpec:
    """``path/to/file.py:factory``: a factory in a Python file that is not an importable module.

    The reference is made absolute (the cache key; the graph cache also keys on the file's digest), and the file
    runs as a module of its own, registered in ``sys.modules`` as its classes may need (dataclasses do).
    """
    import importlib.util

    text, _, attr = ref.rpartition(":")
    path = Path(text).expanduser().resolve()
    if not path.is_file():
        raise GnnperfError(f"no such Python file: {text} (for {ref})")
    # one module per path and content: an edited file runs again, in this process too
    name = f"gnnperf_user_model_{hashlib.sha256(str(path).encode() + path.read_bytes()).hexdigest()[:16]}"
    module = sys.modules.get(name)
    if module is None:
        loader_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        if str(path.parent) not in sys.path:  # as for a script: the modules beside it import
            sys.path.append(str(path.parent))
        try:
            loader_spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001 - the user's file: any error it raises is one line
            del sys.modules[name]
            raise GnnperfError(f"cannot run {path} for {ref}: {type(e).__name__}: {e}") from None
    return _factory_spec(f"{path}:{attr}", module, path.stem, attr)


def _factory_spec(ref: str, module: Any, module_name: str, attr: str) -> ModelSpec:
    """The spec of the callable ``attr`` of ``module`` (an ``nn.Module`` factory with no arguments)."""
    factory = getattr(module, attr, None)
    if not hasattr(module, attr):
        raise GnnperfError(f"module '{module_name}' has no '{attr}'{suggest(attr, dir(module))}")
    if not callable(factory) or isinstance(factory, nn.Module):
        what = "an nn.Module instance" if isinstance(factory, nn.Module) else "not a callable"
        raise GnnperfError(
            f"'{attr}' in module '{module_name}' is {what}: give a function that returns the nn.Module"
        )

    def build(_depth: int | None) -> nn.Module:
        model = factory()
        if not isinstance(model, nn.Module):
            raise GnnperfError(f"{ref} returned {type(model).__name__}, not a torch.nn.Module")
        return model

    return ModelSpec(
        ref=ref,
        family=module_name.rsplit(".", 1)[-1],
        input_kind="image",
        default_input_shape=(),
        input_names=("input",),
        builder=build,
        source_file=Path(module.__file__) if getattr(module, "__file__", None) else None,
    )
