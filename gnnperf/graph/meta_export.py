"""Exporting on the meta device: transformers models first, and models whose traced forward pass would not fit in
this machine's memory (:func:`exported_on_meta`, which :func:`gnnperf.graph.export.export_model` asks first).

The TorchScript exporter runs the model's forward pass on real tensors, and a graph needs none of their values. At
long sequences that pass is large: LLaMA-3 8B at 8,192 tokens (two blocks, batch 2, the eager attention that is
exported) holds two 17 GB score tensors at once, and the kernel's out-of-memory killer ends the process without a
word; and deep transformer stacks trace slowly (GPT-3 XL's 24 blocks at 512 tokens: 38 s, 1 s on the meta device).
On the meta device the same trace takes shapes only and no memory. What the exporter reads from values is supplied
here (:func:`on_meta`):

- Tensor constants the forward pass creates (a mask's fill value, rotary frequencies) are written into the graph
  with their values; on the meta device there are none. Floating-point ones are written as zeros (the graph's
  features read shapes, never these values); an integer one may be a shape the graph computes with, so the export
  is refused.
- Tensor constants are compared for equality (to merge common subexpressions): as the zeros they are written as, two
  of one shape and type are equal.
- Parameters are deduplicated by where their data lies, and every meta tensor lies at address 0: each is given a
  one-element stand-in, shared by the names of one tied weight, so that the exporter merges those and no others.
- The shape-only kernels of :mod:`gnnperf.graph.shape_only` have meta implementations there.

The graphs are the ones a trace with values exports (``experiments/meta_export``: all 159 of 257 models that export
so, node by node and feature by feature; ``tests/graph/test_meta_export.py``); code that reads a value (``.item()``,
data-dependent branches, timm's shape asserts) cannot run on the meta device and fails to export there.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import torch
from torch.onnx._internal.torchscript_exporter import registration, symbolic_helper, symbolic_opset9

from gnnperf.errors import GnnperfError
from gnnperf.graph.export import OPSET, Exported, _built, _first_line, _past_positions, _quiet, _torchscript
from gnnperf.zoo.resolve import ModelSpec

__all__ = ["available_memory_bytes", "exported_on_meta", "memory_shortfall", "on_meta", "trace_peak_bytes"]
log = logging.getLogger(__name__)

# The weights, plus 1.5 times as much for what tracing and the exporter hold beside them (the initializers
# serialised into the ONNX proto, the dynamo exporter's copy of the program, the activations of builders the meta
# device cannot run): a rough bound, meant to catch models far too large, not to predict a peak. 2.0 let NeuSight's
# Switch-XL config (5.3 billion bf16 parameters, 9.8 GiB, 22 GiB available) through, and its export was killed for
# memory at 23.9 GB.
MEMORY_PER_WEIGHT_BYTE = 2.5


class _Refused(Exception):
    """What the meta device could not export (the first sentence of the error)."""


def exported_on_meta(
    spec: ModelSpec,
    input_shape: tuple[int, ...],
    num_layers: int | None,
    export_batch: int,
    exporter: str,
    meta: bool | None,
) -> Exported | None:
    """``spec`` exported on the meta device where :func:`gnnperf.graph.export.export_model`'s ``meta`` says so (see
    there), or None: to be traced with values.

    Raises:
        GnnperfError: what neither way can export: refused on the meta device (``meta=True``, or where tracing with
            values would not fit), or a sequence past the model's position table.
    """
    refused = None
    if meta or (meta is None and spec.attention is not None and exporter != "dynamo"):
        try:
            return _export(spec, num_layers, input_shape, export_batch)
        except _Refused as e:
            if meta:
                raise GnnperfError(f"on the meta device the export of {spec.ref} failed: {e}") from None
            refused = str(e)
    shortfall = None if meta is False else memory_shortfall(spec, num_layers, input_shape, export_batch)
    if shortfall is None:
        return None
    if refused is None:
        try:
            exported = _export(spec, num_layers, input_shape, export_batch)
            log.info("%s; exported on the meta device", shortfall)
            return exported
        except _Refused as e:
            refused = str(e)
    raise GnnperfError(f"{shortfall}, and on the meta device (no memory) its export failed: {refused}")


def _export(
    spec: ModelSpec, num_layers: int | None, input_shape: tuple[int, ...], export_batch: int
) -> Exported:
    """``spec`` exported by the TorchScript exporter on the meta device (:func:`on_meta`).

    Raises:
        GnnperfError: a sequence past the model's position table, which a trace with values would refuse too.
        _Refused: code that reads a value, which the meta device does not have, or a model it cannot build.
    """
    try:
        model, args = _built(spec, num_layers, input_shape, export_batch, on_meta=True)
    except GnnperfError as e:  # a builder that needs values, or a bad input the trace with values will name
        raise _Refused(str(e)) from None
    # which the meta device, reading no token position, would not catch: where the model has a position table
    # (rotary positions have none), a row of it per position (OPT's and RoBERTa's two more)
    tables = [m.num_embeddings for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    if (past := _past_positions(spec, input_shape)) and any(0 <= n - spec.max_positions <= 2 for n in tables):
        raise GnnperfError(f"export of {spec.ref} failed; {past}")
    names = list(spec.input_names)
    try:
        with _quiet(), spec.tracing(), on_meta(OPSET):
            proto = _torchscript(model, args, names)
    except Exception as e:
        log.debug("the meta device cannot export %s", spec.ref, exc_info=True)
        raise _Refused(_first_line(e).split(". ")[0]) from None  # torch's meta errors run long
    trainable = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    return Exported(proto, "torchscript", names, trainable)


def memory_shortfall(
    spec: ModelSpec, num_layers: int | None, input_shape: tuple[int, ...], export_batch: int
) -> str | None:
    """Why tracing ``spec`` with values would not fit in this machine's memory (one line), or None.

    Read from a build on the meta device (no memory, about 0.1 s): the weights (:data:`MEMORY_PER_WEIGHT_BYTE`)
    and, where they leave room, the most tensors the trace's forward pass holds at once (:func:`trace_peak_bytes`).
    The alternative is the kernel's out-of-memory killer ending the whole process, a survey of a thousand models
    included (timm's eva02_enormous has 4.4 billion parameters, 17 GB in fp32; LLaMA-3 8B's two exported blocks at
    8,192 tokens hold 34 GB of attention scores). None where the memory or the model's size cannot be read (a builder
    that needs real tensors: the real build is left to fail or not).
    """
    available = available_memory_bytes()
    if available is None:
        return None
    try:
        model, args = _built(spec, num_layers, input_shape, export_batch, on_meta=True)
    except Exception:  # noqa: BLE001
        return None
    lazy = torch.nn.parameter.UninitializedTensorMixin  # sized by a first forward: not counted
    tensors = [t for t in (*model.parameters(), *model.buffers()) if not isinstance(t, lazy)]
    weight_bytes = sum(t.numel() * t.element_size() for t in tensors)
    need = weight_bytes * MEMORY_PER_WEIGHT_BYTE
    if need <= available:
        with _quiet(), spec.tracing():
            need += trace_peak_bytes(model, args) or 0
    if need <= available:
        return None
    params = sum(t.numel() for t in model.parameters() if not isinstance(t, lazy))
    return (
        f"{spec.ref} has {params / 1e9:.2f} billion parameters ({weight_bytes / 2**30:.1f} GiB); tracing it "
        f"with values needs about {need / 2**30:.0f} GiB and {available / 2**30:.1f} GiB is available"
    )


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux); None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def trace_peak_bytes(model: torch.nn.Module, args: tuple) -> int | None:
    """The most bytes of tensors one forward pass of ``model`` (built on the meta device) holds at once, as the
    exporter's trace runs it (without autograd, shape-only kernels); None where the meta device cannot run it."""
    from gnnperf.graph.inference_memory import LiveBytes
    from gnnperf.graph.shape_only import shape_only_kernels

    live = LiveBytes()
    try:
        with torch.no_grad(), shape_only_kernels(), live:
            model(*args)
    except Exception:  # noqa: BLE001 - code that reads a value cannot run on the meta device
        return None
    return live.peak


@contextlib.contextmanager
def on_meta(opset: int) -> Iterator[None]:
    """Within the block, the TorchScript exporter (at ``opset``) exports a model whose tensors are on the meta device."""
    dedup = torch._C._jit_pass_onnx_deduplicate_initializers

    def by_identity(graph, params: dict[str, torch.Tensor], training: bool) -> dict[str, torch.Tensor]:
        standins: dict[int, torch.Tensor] = {}
        proxies = {name: standins.setdefault(id(t), torch.empty(1)) for name, t in params.items()}
        return {name: params[name] for name in dedup(graph, proxies, training)}

    torch._C._jit_pass_onnx_deduplicate_initializers = by_identity
    registration.registry.register("prim::Constant", opset, _constant, custom=True)
    # the exporter's common-subexpression pass compares tensor constants: written as zeros (below), two of one shape and
    # type are equal
    equal = torch.library.Library("aten", "IMPL")
    equal.impl("equal", lambda a, b: a.shape == b.shape and a.dtype == b.dtype, "Meta")
    try:
        yield
    finally:
        torch._C._jit_pass_onnx_deduplicate_initializers = dedup
        registration.registry.unregister("prim::Constant", opset)
        equal._destroy()


def _constant(g, *inputs, **attrs):
    node = g.original_node
    if not node.mustBeNone() and node.kindOf("value") == "t":
        value = symbolic_helper._node_get(node, "value")
        if value.is_meta:
            if not value.is_floating_point():
                raise GnnperfError(
                    f"an integer tensor constant of shape {tuple(value.shape)} has no value on the meta device"
                )
            return g.op("Constant", value_t=torch.zeros(value.shape, dtype=value.dtype))
    return symbolic_opset9.prim_constant(g, *inputs, **attrs)
