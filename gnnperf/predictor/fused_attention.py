"""An sdpa model's step with its attention run by a fused kernel, composed from the eager graph's prediction.

PyTorch's ``scaled_dot_product_attention`` runs attention as one fused kernel on a GPU (flash or memory-efficient),
which never writes the score matrix (batch x heads x queries x keys). The exported graph holds eager attention
(:func:`~gnnperf.graph.attention.eager_attention_nodes`: the score and weighted-value MatMuls, the scaling and mask,
Softmax), and the predictor learned those ops from eager measurements (NeuSight's); at long sequences they are most
of a prediction and their traffic is what the fused kernel avoids (torchtitan's Llama 3.1 8B at 8,192 tokens:
``experiments/fsdp``). So the eager ops' predicted time is replaced by a price of the fused kernel, composed, not
learned:

- its work is the two products' FLOPs; in training the backward pass recomputes the scores (five products where
  eager attention's backward runs four), 3.5x the forward's FLOPs where a weight product's training step is 3x;
- causal attention (``is_causal``) skips the score tiles above the diagonal: (S + 1) / 2S of a square score matrix;
- that work is priced at the rate the predictor gives the same step's weight matrix products (their FLOPs, forward
  and backward where it trains, per predicted ms of its Gemm/MatMul nodes with parameters): the fused kernel is
  matrix products on the same units, in the same precision, of the same step;
- never more than the eager ops' own predicted time;
- on a Hopper GPU in 16 bits, at most PyTorch's default kernel's published rate (:data:`FLASH_PEAK_SHARE`);
- composed in every step the prediction consults (:func:`sdpa_steps`), before a batch's prediction is capped at a
  larger batch's or floored at a step it contains (the step without its update, one GPU's), so that those rules
  compare steps as they run.

Flash kernels reach less of a device's peak than a large GEMM does: on an H100 PyTorch's default FlashAttention-2
kernel runs at about half the step's GEMM rate (cuDNN's and FlashAttention-3's at about the same), by the
FlashAttention-3 paper's figures (``experiments/fused_attention``), hence the Hopper ceiling; on other GPUs the
composed price may lean fast. Against
torchtitan's published step the composed time is 0.70-1.11 of the measurement where the eager graph's was 1.5x+ above
it (``experiments/fsdp``); on a CPU, where PyTorch runs sdpa as its own flash kernel, the predicted speed-up over eager
attention followed the measured one from 256 to 2,048 tokens (``experiments/fused_attention``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gnnperf.graph.attention import eager_attention_nodes
from gnnperf.graph.cost import node_cost
from gnnperf.graph.ir import OpGraph
from gnnperf.hardware.table import HardwareSpec
from gnnperf.measure.workload import Workload

__all__ = ["fused_attention", "sdpa_attention", "sdpa_steps"]

# training FLOPs over forward FLOPs: a weight product (forward, input and weight gradients) and flash attention
# (forward two products; backward the score product again and four gradient products)
_WEIGHT_TRAIN, _FLASH_TRAIN = 3.0, 3.5
# PyTorch's default sdpa kernel in 16 bits is its flash backend, FlashAttention-2 (torch._C._get_sdp_priority_order():
# flash, memory-efficient, math, cuDNN; FlashAttention-3 off), whose Ampere kernels a Hopper GPU runs at a fraction
# of its dense 16-bit tensor peak: the FlashAttention-3 paper's H100 SXM5 figures (head dimension 128, 1k-16k tokens)
# give FlashAttention-2 about 360 TFLOP/s forward and 315 backward of 989, so (forward, training step) shares of
# 0.37 and 3.5 / (1 / 360 + 2.5 / 315) / 989 = 0.33 (experiments/fused_attention). No ceiling elsewhere: no published
# figure here says how far below the step's weight products it runs on other generations.
FLASH_PEAK_SHARE = {"hopper": (0.37, 0.33)}
SIXTEEN_BIT = ("fp16", "bf16", "amp_fp16", "amp_bf16")


def fused_attention(
    graph: OpGraph,
    ops_ms: Any,
    batch_size: int,
    causal: bool,
    train: bool,
    ceiling_tflops: float | None = None,
) -> dict[str, Any] | None:
    """The fused kernel's composed ms in place of the eager attention ops' predicted ``ops_ms`` (see the module doc).

    Args:
        graph: the exported (eager) graph.
        ops_ms: predicted ms of each of ``graph.nodes`` in the step.
        batch_size: the step's batch.
        causal: the attention is causal (the fused kernel skips the masked tiles).
        train: the step is a training step (forward and backward).
        ceiling_tflops: the most the fused kernel runs at (its step's FLOPs per second), where that is below the
            weight products' rate (:data:`FLASH_PEAK_SHARE`), else None.

    Returns:
        ``{"eager_ms", "fused_ms", "causal", "rate_tflops", "nodes"}``: the eager ops' predicted ms, the composed ms
        (at most the eager ms), the weight products' rate it is priced at (TFLOP/s of their step: forward and
        backward where it trains) and the eager ops (indices into ``graph.nodes``); None where the graph has no eager
        attention or no weight product to take a rate from.
    """
    attention = eager_attention_nodes(graph)
    if not attention:
        return None
    flops, weight_flops, weight_ms = 0.0, 0.0, 0.0
    for j, node in enumerate(graph.nodes):
        if node.op_type in ("MatMul", "Gemm") and node.params:
            weight_flops += node_cost(graph, node, batch_size).mat_flops
            weight_ms += float(ops_ms[j])
    inside = {o for j in attention for o in graph.nodes[j].outputs}
    for j in attention:
        node = graph.nodes[j]
        if node.op_type != "MatMul":
            continue
        mat = node_cost(graph, node, batch_size).mat_flops
        # queries x keys: the score product's output, the weighted-value product's first input (the probabilities,
        # made inside the attention; the score product's operands come from outside it)
        scores = node.inputs[0] if node.inputs[0] in inside else node.outputs[0]
        queries, keys = graph.values[scores].shape(batch_size)[-2:]
        if causal and queries == keys:
            mat *= (queries + 1) / (2 * queries)
        flops += mat
    eager_ms = float(ops_ms[attention].sum())
    if weight_flops <= 0 or weight_ms <= 0 or eager_ms <= 0:
        return None
    weight_passes, flash_passes = (_WEIGHT_TRAIN, _FLASH_TRAIN) if train else (1.0, 1.0)
    rate = (
        weight_passes * weight_flops / weight_ms
    )  # FLOPs per ms the weight products are predicted to run at
    capped = ceiling_tflops is not None and ceiling_tflops * 1e9 < rate
    rate = ceiling_tflops * 1e9 if capped else rate
    fused_ms = flash_passes * flops / rate
    return {
        "eager_ms": eager_ms,
        "fused_ms": min(fused_ms, eager_ms),
        "causal": causal,
        "rate_tflops": rate / 1e9,
        "flash_ceiling": capped,
        "nodes": attention,
    }


def sdpa_attention(
    graph: OpGraph, ops_ms: Any, spec: HardwareSpec, workload: Workload, assumptions: tuple[str, ...]
) -> dict[str, Any] | None:
    """:func:`fused_attention` for a prediction of ``workload`` on ``spec`` whose model reference assumed
    ``assumptions``: None unless it runs sdpa attention (:data:`~gnnperf.zoo.hf.SDPA_TIME`), causal where it said so,
    at most at PyTorch's flash kernel's rate in 16 bits on a generation :data:`FLASH_PEAK_SHARE` has."""
    from gnnperf.zoo.hf import SDPA_CAUSAL, SDPA_TIME

    if SDPA_TIME not in assumptions:
        return None
    causal, train = SDPA_CAUSAL in assumptions, workload.mode == "train"
    share = FLASH_PEAK_SHARE.get(spec.generation or "")
    peak = spec.peak_fp16_tensor_tflops
    ceiling = share[train] * peak if share and peak and workload.precision in SIXTEEN_BIT else None
    return fused_attention(graph, ops_ms, workload.batch_size, causal, train, ceiling)


def sdpa_steps(
    steps: Sequence[tuple[OpGraph, HardwareSpec, Workload]],
    node_ms: Sequence[Any] | None,
    assumptions: Mapping[str, tuple[str, ...]],
) -> tuple[list[dict[str, Any] | None], np.ndarray]:
    """:func:`sdpa_attention` for every predicted step, before a prediction is capped or floored at another step
    (so that a step is never faster than one it contains, each as it runs): per step ``(graph, workload)`` with its
    predicted ``node_ms``, the composition (None where the model runs no sdpa attention, or the readout has no
    per-op terms: ``node_ms`` None) and the ms it saves.
    ``assumptions``: each model reference's (:attr:`gnnperf.zoo.resolve.ModelSpec.assumptions`)."""
    fused = [
        None
        if node_ms is None
        else sdpa_attention(graph, node_ms[j], spec, workload, assumptions[graph.model_ref])
        for j, (graph, spec, workload) in enumerate(steps)
    ]
    saved = np.array([0.0 if f is None else f["eager_ms"] - f["fused_ms"] for f in fused])
    return fused, saved
