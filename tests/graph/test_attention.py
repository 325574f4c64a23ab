"""The ops of eager attention found in exported graphs."""

from collections import Counter

import pytest

from gnnperf.graph.attention import eager_attention_nodes
from gnnperf.graph.build import build_graph


@pytest.mark.parametrize(
    "ref, shape, attentions, between",
    [
        # the scaling Mul, the causal mask's Add (its Where and Casts), and the probabilities' Dropout
        (
            "hf:gpt2?class=GPT2LMHeadModel&n_layer=2&n_embd=64&n_head=4&vocab_size=500",
            (32,),
            2,
            {"Mul", "Add"},
        ),
        # self-attention in the encoder and the decoder, cross-attention in the decoder
        (
            "hf:t5?class=T5ForConditionalGeneration&num_layers=1&d_model=64&d_ff=128&num_heads=2&d_kv=32",
            (16,),
            3,
            {"Add"},
        ),
        # the scaling on the queries, before the product: nothing between
        ("timm:vit_tiny_patch16_224", (3, 224, 224), 12, set()),
        # each window's mask added between two reshapes
        ("timm:swin_tiny_patch4_window7_224", (3, 224, 224), 12, {"Add", "Reshape"}),
        ("timm:resnet18", (3, 64, 64), 0, set()),
    ],
)
def test_every_softmax_between_two_products_of_activations_is_an_attention(ref, shape, attentions, between):
    graph = build_graph(ref, shape, cache=None)
    ops = Counter(graph.nodes[i].op_type for i in eager_attention_nodes(graph))
    assert ops["Softmax"] == attentions and ops["MatMul"] == 2 * attentions
    assert between <= set(ops)
    # the products are of activations: no projection (a MatMul with a weight) among them (a bias added to the
    # scores, T5's and Swin's relative positions, is a weight)
    products = [graph.nodes[i] for i in eager_attention_nodes(graph) if graph.nodes[i].op_type == "MatMul"]
    assert not any(n.params for n in products)
