"""Exporting on the meta device, for models whose traced forward pass would not fit in this machine's memory.

The TorchScript exporter runs the model's forward pass on real tensors, and a graph needs none of their values. At
long sequences that pass is large: LLaMA-3 8B at 8,192 tokens (two blocks, batch 2, the eager attention that is
exported) holds two 17 GB score tensors at once, and the kernel's out-of-memory killer ends the process without a
word. On the meta device the same trace takes shapes only and no memory. Three things the exporter reads from
values are supplied here (:func:`on_meta`):

- Tensor constants the forward pass creates (a mask's fill value, rotary frequencies) are written into the graph
  with their values; on the meta device there are none. Floating-point ones are written as zeros (the graph's
  features read shapes, never these values); an integer one may be a shape the graph computes with, so the export
  is refused.
- Tensor constants are compared for equality (to merge common subexpressions): as the zeros they are written as, two
  of one shape and type are equal.
- Parameters are deduplicated by where their data lies, and every meta tensor lies at address 0: each is given a
  one-element stand-in, shared by the names of one tied weight, so that the exporter merges those and no others.
- The shape-only kernels of :mod:`gnnperf.graph.shape_only` have meta implementations there.

The graphs are the ones a trace with values exports (``tests/graph/test_meta_export.py`` compares them node by
node and feature by feature); code that reads a value (``.item()``, data-dependent branches) cannot run on the
meta device and fails to export there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.onnx._internal.torchscript_exporter import registration, symbolic_helper, symbolic_opset9

from gnnperf.errors import GnnperfError

__all__ = ["on_meta", "trace_peak_bytes"]


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
