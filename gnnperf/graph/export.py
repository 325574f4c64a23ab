"""PyTorch -> ONNX in training mode with a symbolic batch axis.

The TorchScript exporter is tried first (fast, keeps module scopes in node names, can leave parameters out);
where it fails the dynamo exporter is tried before giving up, and the graph records which one produced it.
Export happens at batch 2: BatchNorm in training mode rejects one value per channel.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import onnx
import torch

from gnnperf.errors import GnnperfError
from gnnperf.graph.shape_only import register_symbolics, shape_only_kernels
from gnnperf.zoo.resolve import ModelSpec

OPSET = 17
EXPORT_BATCH = 2
EXPORTERS = ("torchscript", "dynamo")
log = logging.getLogger(__name__)


@dataclass
class Exported:
    model: onnx.ModelProto
    exporter: str
    model_inputs: list[str]
    trainable: set[str] | None


@contextlib.contextmanager
def _quiet():
    """The exporters warn and print a lot (tracer warnings, dynamo progress, graph dumps from C++ on some
    failures); keep the CLI's output clean. File descriptors 1 and 2 are redirected too, since the C++ side
    writes there directly; errors still arrive as exceptions."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo", "torch.fx")]
    levels = [lg.level for lg in loggers]
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    with warnings.catch_warnings(), open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        warnings.simplefilter("ignore")
        for lg in loggers:
            lg.setLevel(logging.CRITICAL)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (*saved, devnull):
                os.close(fd)
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)


@contextlib.contextmanager
def _no_random_init():
    """Skip random parameter initialisation while a model is built for export only.

    Tracing needs real tensors of the right shapes but never looks at weight values, and drawing them is
    the slowest part of building a large model (ViT-B/16: ~0.4 of its 1.2 s). Buffers that carry structure
    (Swin's relative position index) are computed with other ops and stay intact. The harness builds its
    models normally.
    """
    names = ("uniform_", "normal_", "trunc_normal_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_")
    names += ("xavier_normal_", "orthogonal_")
    # transformers keeps torch's own trunc_normal_ and calls it; its body redraws normal_ (skipped here) until every
    # value is in range, which never happens where the uninitialised memory holds values out of it (memory an earlier
    # model used: a survey of 200 models hung there)
    names += ("_no_grad_trunc_normal_",)
    saved_init = {n: getattr(torch.nn.init, n) for n in names}
    saved_tensor = {n: getattr(torch.Tensor, n) for n in ("uniform_", "normal_")}

    # timm's truncated normal draws uniform_ (skipped) and then maps the whole tensor through erfinv_
    # (ViT-B/16: 0.4 s); every timm initialiser goes through this module-level helper.
    timm_init = sys.modules.get("timm.layers.weight_init")
    saved_timm = getattr(timm_init, "_trunc_normal_", None)

    def keep(tensor, *args, **kwargs):
        return tensor

    try:
        for n in names:
            setattr(torch.nn.init, n, keep)
        for n in saved_tensor:
            setattr(torch.Tensor, n, keep)
        if saved_timm is not None:
            timm_init._trunc_normal_ = keep
        yield
    finally:
        for n, f in saved_init.items():
            setattr(torch.nn.init, n, f)
        for n, f in saved_tensor.items():
            setattr(torch.Tensor, n, f)
        if saved_timm is not None:
            timm_init._trunc_normal_ = saved_timm


def _diff_symbolic(g, x, n, dim, prepend, append):
    """``torch.diff`` (first order), which the TorchScript exporter lacks; transformers' mask code uses it."""
    from torch.onnx import symbolic_helper as sh

    axis = sh._get_const(dim, "i", "dim")
    parts = [p for p in (prepend, x, append) if not sh._is_none(p)]
    if len(parts) > 1:
        x = g.op("Concat", *parts, axis_i=axis)

    def const(v: int):
        return g.op("Constant", value_t=torch.tensor([v], dtype=torch.long))

    return g.op(
        "Sub",
        g.op("Slice", x, const(1), const(2**62), const(axis)),
        g.op("Slice", x, const(0), const(-1), const(axis)),
    )


def _uniform_symbolic(g, x, low, high, generator):
    """In-place ``uniform_`` (Switch Transformers' router jitter in training), which the exporter lacks."""
    from torch.onnx import symbolic_helper as sh

    low_f, high_f = sh._get_const(low, "f", "from"), sh._get_const(high, "f", "to")
    return g.op("RandomUniformLike", x, low_f=low_f, high_f=high_f)


torch.onnx.register_custom_op_symbolic("aten::diff", _diff_symbolic, OPSET)
torch.onnx.register_custom_op_symbolic("aten::uniform", _uniform_symbolic, OPSET)
register_symbolics(OPSET)


@contextlib.contextmanager
def _lean_export():
    """Three savings for the TorchScript exporter, none of which changes the exported graph (tested).

    - No autograd while tracing: the exporter traces with gradients on, so every activation is kept for a
      backward pass that never comes (EfficientNet-B5 at 456 px: 3.4 GB peak, 1.1 GB without; ~20% faster).
    - No whole-graph ONNX type inference (run twice per export): it only annotates the exported graph, which
      :mod:`gnnperf.graph.shapes` types again at concrete batches; the per-node inference the symbolic
      functions rely on still runs. It was about half of the export time of transformers (ViT-B/16: 0.8 of
      1.8 s).
    - Shape-only convolutions and linear layers while tracing (:mod:`gnnperf.graph.shape_only`): their values
      are never read, and they were most of the remaining time of CNN exports.
    """
    saved = torch._C._jit_pass_onnx_graph_shape_type_inference
    torch._C._jit_pass_onnx_graph_shape_type_inference = lambda *args, **kwargs: None
    try:
        with torch.no_grad(), shape_only_kernels():
            yield
    finally:
        torch._C._jit_pass_onnx_graph_shape_type_inference = saved


def _torchscript(model: torch.nn.Module, args: tuple, names: list[str]) -> onnx.ModelProto:
    buf = io.BytesIO()
    try:
        with _lean_export():
            _torchscript_to(buf, model, args, names)
    except Exception:  # noqa: BLE001 - retried as the exporter ships; a real failure raises there
        log.debug("fast TorchScript export failed; retrying as the exporter ships", exc_info=True)
        buf = io.BytesIO()
        _torchscript_to(buf, model, args, names)
    return onnx.load_from_string(buf.getvalue())


def _torchscript_to(buf: io.BytesIO, model: torch.nn.Module, args: tuple, names: list[str]) -> None:
    # the exporter switches autocast's weight-cast cache off while it traces and back on after, but not when the
    # model raises: the process's later autocast steps (a measurement, a memory profile) would re-cast every weight
    cache = torch.is_autocast_cache_enabled()
    try:
        torch.onnx.export(
            model,
            args,
            buf,
            dynamo=False,
            export_params=False,
            training=torch.onnx.TrainingMode.TRAINING,
            do_constant_folding=False,
            opset_version=OPSET,
            input_names=names,
            dynamic_axes={n: {0: "batch"} for n in names},
        )
    finally:
        torch.set_autocast_cache_enabled(cache)


def _dynamo(model: torch.nn.Module, args: tuple, names: list[str]) -> onnx.ModelProto:
    batch = torch.export.Dim("batch", min=1, max=1 << 16)
    program = torch.onnx.export(
        model,
        args,
        dynamo=True,
        input_names=names,
        dynamic_shapes=tuple({0: batch} for _ in args),
        opset_version=max(OPSET, 18),
        optimize=False,
        verify=False,
    )
    return program.model_proto


def _past_positions(spec: ModelSpec, input_shape: tuple[int, ...]) -> str | None:
    """The usual cause of an embedding's IndexError, where the sequence is longer than the config's positions."""
    seq = spec.input_shape(input_shape)[0] if spec.input_kind == "tokens" else 0
    if spec.max_positions and seq > spec.max_positions:
        return f"the sequence length {seq} is past the config's max_position_embeddings {spec.max_positions}"
    return None


def _run_eagerly(model: torch.nn.Module, args: tuple) -> None:
    """One forward before the dynamo exporter, which traces with fake tensors: an error that depends on values
    (a token position past the position table) would not stop it, and the graph would price a model that
    cannot run. TorchScript traces with the real inputs and stops there itself."""
    with torch.no_grad():
        model(*args)


def _built(
    spec: ModelSpec,
    num_layers: int | None,
    input_shape: tuple[int, ...],
    export_batch: int,
    on_meta: bool = False,
) -> tuple[torch.nn.Module, tuple]:
    """``spec`` built for export with random weights (in training mode), and its example inputs, on the meta
    device with ``on_meta``."""
    try:
        with _no_random_init(), torch.device("meta") if on_meta else contextlib.nullcontext():
            model = spec.build(num_layers, input_shape, graph=True)
    except GnnperfError:
        raise
    except Exception as e:
        raise GnnperfError(f"cannot build {spec.ref}: {type(e).__name__}: {_first_line(e)}") from None
    model.train()
    try:
        args = spec.make_inputs(export_batch, input_shape, generator=torch.Generator().manual_seed(0))
    except (RuntimeError, ValueError, MemoryError) as e:  # a negative or huge size (zoo:resnet?image_size=-1)
        shape = ",".join(map(str, spec.input_shape(input_shape)))
        raise GnnperfError(f"cannot make inputs of shape {shape} for {spec.ref}: {_first_line(e)}") from None
    if on_meta:
        args = tuple(a.to("meta") for a in args)
    if any(isinstance(p, torch.nn.parameter.UninitializedParameter) for p in model.parameters()):
        with torch.no_grad():  # lazy modules (nn.LazyLinear) get their shapes from a first forward
            model(*args)
    return model, args


def export_model(
    spec: ModelSpec,
    input_shape: tuple[int, ...],
    exporter: str = "auto",
    num_layers: int | None = None,
    export_batch: int = EXPORT_BATCH,
    meta: bool | None = None,
) -> Exported:
    """Build ``spec`` with random weights and export it.

    Args:
        exporter: ``auto`` (TorchScript, then dynamo), ``torchscript`` or ``dynamo``.
        num_layers: build a shallower copy (see :mod:`gnnperf.graph.repeat`).
        export_batch: batch of the example input (the graph's batch axis stays symbolic either way).
        meta: trace on the meta device (:mod:`gnnperf.graph.meta_export`) rather than with values. ``None``
            (the default): first on it for transformers models (``hf:``), whose traces with values are slow and
            large (GPT-3 XL's 24 blocks at 512 tokens: 38 s, on the meta device 1 s, the same graph), with values
            where it cannot; for other models with values, on the meta device where that would not fit in memory.
    """
    if exporter not in ("auto", *EXPORTERS):
        raise GnnperfError(f"unknown exporter '{exporter}'; choose auto, torchscript or dynamo")
    from gnnperf.graph import meta_export  # it builds on this module

    exported = meta_export.exported_on_meta(spec, input_shape, num_layers, export_batch, exporter, meta)
    if exported is not None:
        return exported
    names = list(spec.input_names)
    model, args = _built(spec, num_layers, input_shape, export_batch)
    # every name of a tied weight (GPT-2's lm_head and wte): the dynamo exporter may name it by either
    trainable = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    errors = []
    for name in EXPORTERS if exporter == "auto" else (exporter,):
        try:
            with _quiet(), spec.tracing():
                if name == "dynamo":
                    _run_eagerly(model, args)
                proto = (_torchscript if name == "torchscript" else _dynamo)(model, args, names)
            return Exported(proto, name, names, trainable)
        except Exception as e:
            log.debug("%s exporter failed on %s", name, spec.ref, exc_info=True)
            # the dynamo exporter's own message is advice ("step 1/3 ... Next steps:"); its cause says what failed
            if isinstance(e, torch.onnx.OnnxExporterError) and e.__cause__ is not None:
                e = e.__cause__
            errors.append(f"{name} exporter: {type(e).__name__}: {_first_line(e)}")
    if past := _past_positions(spec, input_shape):
        errors.append(past)
    raise GnnperfError(f"export of {spec.ref} failed; " + "; ".join(errors))


def load_onnx(path: Path) -> Exported:
    """Read an existing ONNX file; its batch axis is dim 0 of every non-initializer input."""
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as e:
        raise GnnperfError(f"cannot read ONNX file {path}: {type(e).__name__}: {_first_line(e)}") from None
    inits = {i.name for i in proto.graph.initializer}
    inputs = [vi for vi in proto.graph.input if vi.name not in inits]
    # Files exported without parameters list them as inputs too; data inputs are the ones with a batch symbol.
    symbolic = [
        vi.name
        for vi in inputs
        if vi.type.tensor_type.shape.dim[:1] and vi.type.tensor_type.shape.dim[0].dim_param
    ]
    names = symbolic or [vi.name for vi in inputs[:1]]
    if not names:
        raise GnnperfError(f"ONNX file {path} has no graph input")
    return Exported(proto, "file", names, None)


def onnx_input_shape(exported: Exported) -> tuple[int, ...]:
    """Per-sample shape of the first data input of an ONNX file (dims after the batch axis)."""
    vi = next(v for v in exported.model.graph.input if v.name == exported.model_inputs[0])
    dims = vi.type.tensor_type.shape.dim[1:]
    if not all(d.HasField("dim_value") for d in dims):
        raise GnnperfError(f"ONNX input '{vi.name}' has symbolic non-batch dims; give --input-shape")
    return tuple(int(d.dim_value) for d in dims)


def fix_input_shape(exported: Exported, shape: tuple[int, ...]) -> None:
    """Give the symbolic non-batch dims of an ONNX file's first data input the values of ``shape``, in place.

    A symbol named there (``seq``) takes its value in every data input that uses it (an attention mask beside
    the token ids), so that shape inference sees one concrete model at each probed batch.
    """
    vi = next(v for v in exported.model.graph.input if v.name == exported.model_inputs[0])
    dims = vi.type.tensor_type.shape.dim[1:]
    if len(dims) != len(shape):
        raise GnnperfError(
            f"ONNX input '{vi.name}' has {len(dims)} dims after the batch axis; the input shape "
            f"{','.join(map(str, shape))} has {len(shape)}"
        )
    fixed = [(i, d.dim_value, n) for i, (d, n) in enumerate(zip(dims, shape), 1) if d.HasField("dim_value")]
    for i, was, given in fixed:
        if was != given:
            raise GnnperfError(f"ONNX input '{vi.name}' has {was} at dim {i}; the input shape gives {given}")
    values = {d.dim_param: n for d, n in zip(dims, shape) if d.dim_param}
    for v in exported.model.graph.input:
        if v.name in exported.model_inputs:
            for d in v.type.tensor_type.shape.dim[1:]:
                if d.dim_param in values:
                    d.dim_value = values[d.dim_param]  # a oneof: clears dim_param


def _first_line(e: BaseException) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip().splitlines()
    return text[0][:300] if text else type(e).__name__
