"""An sdpa model's attention priced as the fused kernel in place of the eager graph's attention ops."""

import numpy as np
import pytest

from gnnperf.graph.attention import eager_attention_nodes
from gnnperf.graph.build import build_graph
from gnnperf.graph.cost import node_cost
from gnnperf.hardware.table import get_spec
from gnnperf.measure.workload import Workload
from gnnperf.predictor.fused_attention import FLASH_PEAK_SHARE, fused_attention, sdpa_attention
from gnnperf.zoo.hf import SDPA_TIME

GPT2 = "hf:gpt2?class=GPT2LMHeadModel&n_layer=2&n_embd=64&n_head=4&vocab_size=500"
SEQ, BATCH, HEADS, WIDTH = 32, 3, 4, 16  # tokens, samples, heads, head width


@pytest.fixture(scope="module")
def graph():
    return build_graph(GPT2, (SEQ,), cache=None)


def test_the_fused_kernel_is_its_products_at_the_steps_weight_product_rate(graph):
    ops_ms = np.full(len(graph.nodes), 1.0)
    weights = [n for n in graph.nodes if n.op_type in ("MatMul", "Gemm") and n.params]
    rate = sum(node_cost(graph, n, BATCH).mat_flops for n in weights) / len(weights)  # forward FLOPs per ms
    # two layers, each a score and a weighted-value product of 2 x queries x keys x width per sample and head
    products = 2 * 2 * (2 * BATCH * HEADS * SEQ * SEQ * WIDTH)
    out = fused_attention(graph, ops_ms, BATCH, causal=False, train=True)
    assert out["nodes"] == eager_attention_nodes(graph) and out["eager_ms"] == len(out["nodes"])
    # the backward recomputes the scores: 3.5x the forward's FLOPs where a weight product's step is 3x
    assert out["fused_ms"] == pytest.approx(products * 3.5 / 3 / rate)
    assert out["rate_tflops"] == pytest.approx(3 * rate / 1e9)  # the weight products' forward and backward
    infer = fused_attention(graph, ops_ms, BATCH, causal=False, train=False)
    assert infer["fused_ms"] == pytest.approx(products / rate)
    # causal: the score tiles on and below the diagonal, (S + 1) / 2S of them
    causal = fused_attention(graph, ops_ms, BATCH, causal=True, train=True)
    assert causal["fused_ms"] / out["fused_ms"] == pytest.approx((SEQ + 1) / (2 * SEQ))


def test_the_fused_kernel_is_never_priced_above_the_eager_ops(graph):
    ops_ms = np.full(len(graph.nodes), 1e-9)
    ops_ms[[j for j, n in enumerate(graph.nodes) if n.params]] = 1e9  # weight products predicted very slow
    out = fused_attention(graph, ops_ms, BATCH, causal=True, train=True)
    assert out["fused_ms"] == out["eager_ms"]


def test_a_graph_without_eager_attention_has_nothing_to_fuse():
    graph = build_graph("timm:resnet18", (3, 64, 64), cache=None)
    assert fused_attention(graph, np.ones(len(graph.nodes)), 2, causal=False, train=True) is None


def test_on_hopper_in_16_bits_the_kernel_runs_at_most_at_pytorchs_flash_kernels_rate(graph):
    """PyTorch's default 16-bit sdpa kernel (FlashAttention-2) reaches about a third of an H100's dense peak in a
    training step, below the rate its GEMMs run at; elsewhere no published figure caps the step's weight rate."""
    ops_ms = np.full(len(graph.nodes), 1e-6)  # weight products predicted at a rate far above any kernel's
    bf16 = Workload(batch_size=BATCH, input_shape=(SEQ,), precision="amp_bf16")
    h100, a100 = get_spec("h100-sxm"), get_spec("a100-sxm4-80gb")
    train = sdpa_attention(graph, ops_ms, h100, bf16, (SDPA_TIME,))
    forward, training = FLASH_PEAK_SHARE["hopper"]
    assert train["flash_ceiling"] and train["rate_tflops"] == pytest.approx(training * 989.4)
    fp16_infer = Workload(batch_size=BATCH, input_shape=(SEQ,), mode="infer", precision="fp16")
    infer = sdpa_attention(graph, ops_ms, h100, fp16_infer, (SDPA_TIME,))
    assert infer["flash_ceiling"] and infer["rate_tflops"] == pytest.approx(forward * 989.4)
    fp32 = Workload(batch_size=BATCH, input_shape=(SEQ,), precision="fp32")  # sdpa's fp32 kernel is another
    for spec, workload in ((a100, bf16), (h100, fp32)):
        out = sdpa_attention(graph, ops_ms, spec, workload, (SDPA_TIME,))
        assert not out["flash_ceiling"] and out["rate_tflops"] > 1e3
    slow = np.full(
        len(graph.nodes), 1.0
    )  # a step whose weight products run below the ceiling keeps their rate
    assert not sdpa_attention(graph, slow, h100, bf16, (SDPA_TIME,))["flash_ceiling"]
