"""Shape-only convolution and linear kernels for tracing (no ``from __future__``: torch reads the annotations).

The TorchScript tracer runs the model's forward pass on real tensors, and on this CPU the convolutions and
matrix products of that pass are most of an export (resnet50 at batch 2: 0.93 of 1.55 s in ``conv2d``). Their
values are never read: the exporter only needs each op and its output shape. While exporting,
``torch.nn.functional.conv2d`` and ``linear`` are replaced by custom ops that return zeros of the right shape
and whose ONNX symbolic functions are the exporter's own ones for ``aten::_convolution`` and ``aten::linear``,
so the exported graph is the same (checked in ``tests/graph/test_real_models.py``). They reject what the real
kernels reject (mismatched channels or features), so a model that cannot run still fails to export. Anything
else (string padding, other ranks) goes to the real kernel.
"""

import contextlib
from collections.abc import Iterator
from typing import Optional

import torch
import torch.nn.functional as F
from torch.onnx._internal.torchscript_exporter import symbolic_opset9


@torch.library.custom_op("gnnperf::conv2d_shape", mutates_args=())
def _conv2d_shape(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],  # noqa: UP045 - torch's schema inference reads typing.Optional
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    groups: int,
) -> torch.Tensor:
    sizes = zip(input.shape[2:], weight.shape[2:], stride, padding, dilation)
    spatial = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in sizes]
    if input.shape[1] != weight.shape[1] * groups or min(spatial) < 1:  # what the real kernel would reject
        raise RuntimeError(
            f"conv2d of input {tuple(input.shape)} with weight {tuple(weight.shape)} is invalid"
        )
    return input.new_zeros([input.shape[0], weight.shape[0], *spatial])


@torch.library.custom_op("gnnperf::linear_shape", mutates_args=())
def _linear_shape(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],  # noqa: UP045
) -> torch.Tensor:
    if input.shape[-1] != weight.shape[1]:
        raise RuntimeError(
            f"linear of input {tuple(input.shape)} with weight {tuple(weight.shape)} is invalid"
        )
    return input.new_zeros([*input.shape[:-1], weight.shape[0]])


def _conv2d_symbolic(g, input, weight, bias, stride, padding, dilation, groups):
    transposed = g.op("Constant", value_t=torch.tensor(False))
    output_padding = g.op("Constant", value_t=torch.tensor([0, 0]))
    return symbolic_opset9._convolution(
        g, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
        None, None, None, None,
    )  # fmt: skip


def register_symbolics(opset: int) -> None:
    """Export the shape-only ops as the exporter exports the real ones (at the export's opset)."""
    torch.onnx.register_custom_op_symbolic("gnnperf::conv2d_shape", _conv2d_symbolic, opset)
    torch.onnx.register_custom_op_symbolic("gnnperf::linear_shape", symbolic_opset9.linear, opset)


def _pair(v: int | tuple[int, ...] | list[int]) -> list[int]:
    return [int(x) for x in v] if isinstance(v, (tuple, list)) else [int(v), int(v)]


@contextlib.contextmanager
def shape_only_kernels() -> Iterator[None]:
    """Within the block, ``F.conv2d`` (4-D input, numeric padding) and ``F.linear`` compute shapes only."""
    real_conv, real_linear = F.conv2d, F.linear

    def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        if isinstance(padding, str) or input.dim() != 4:
            return real_conv(input, weight, bias, stride, padding, dilation, groups)
        args = (_pair(stride), _pair(padding), _pair(dilation), int(groups))
        return torch.ops.gnnperf.conv2d_shape(input, weight, bias, *args)

    def linear(input, weight, bias=None):
        return torch.ops.gnnperf.linear_shape(input, weight, bias)

    F.conv2d, F.linear = conv2d, linear
    try:
        yield
    finally:
        F.conv2d, F.linear = real_conv, real_linear


# on the meta device (an export traced without memory) the same functions: they read shapes only
_conv2d_shape.register_fake(_conv2d_shape._init_fn)
_linear_shape.register_fake(_linear_shape._init_fn)
