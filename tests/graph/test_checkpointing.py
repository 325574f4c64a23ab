"""Activation checkpointing in the shape-only trace: which blocks, what a checkpointed step keeps and recomputes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gnnperf.errors import GnnperfError
from gnnperf.graph.checkpointing import (
    ATTENTION_OPS,
    checkpoint_blocks,
    library_checkpointing,
    selective_checkpointing,
    selective_policy,
)
from gnnperf.graph.memory import training_memory
from gnnperf.graph.saved import trace_saved
from gnnperf.measure.workload import Workload


def _block() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 8))


def test_the_blocks_are_the_innermost_repeated_composite_modules():
    # two stages of blocks: the blocks, not the stages; a Sequential of single layers has none
    stages = nn.ModuleList([nn.Sequential(_block(), _block()), nn.Sequential(_block(), _block(), _block())])
    model = nn.ModuleDict(
        {"stages": stages, "head": nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))}
    )
    names = [name for name, _ in checkpoint_blocks(model)]
    assert names == ["stages.0.0", "stages.0.1", "stages.1.0", "stages.1.1", "stages.1.2"]
    assert checkpoint_blocks(nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3))) == []
    # conv-norm-act units are layers, not blocks
    unit = [nn.Sequential(nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8), nn.ReLU()) for _ in range(3)]
    assert checkpoint_blocks(nn.Sequential(*unit)) == []


def test_transformers_and_timm_blocks_are_their_layers():
    from gnnperf.zoo.resolve import resolve

    gpt2 = resolve("hf:gpt2?n_layer=3&n_embd=64&n_head=4&vocab_size=100").build()
    assert [n for n, _ in checkpoint_blocks(gpt2)] == ["m.h.0", "m.h.1", "m.h.2"]
    resnet = resolve("timm:resnet18").build()  # as timm's set_grad_checkpointing: each BasicBlock
    assert len(checkpoint_blocks(resnet)) == 8


def test_a_checkpointed_step_keeps_the_block_inputs_and_one_block_at_a_time():
    model = nn.Sequential(_block(), _block(), _block())
    x = torch.randn(4, 8)
    trace = trace_saved(model, (x,), by_block=True)
    row, hidden = 4 * 8 * 4, 4 * 32 * 4  # bytes of a block's input/output and of a ReLU's output
    # every Linear saves its input, each ReLU its output (which the next Linear saves too)
    assert trace.plain_bytes() == 3 * row + 3 * 2 * hidden
    # the three block inputs, and one block's two ReLU outputs while it is recomputed
    assert trace.checkpointed_bytes() == 3 * row + 2 * hidden
    assert trace.blocks == 3 and trace.recompute_share() == pytest.approx(1.0)


def test_training_memory_with_checkpointing():
    ref = "zoo:resnet?depths=1,2&width=12&image_size=32&stem=cifar&num_classes=10"
    workload = Workload(input_shape=(3, 32, 32), batch_size=8)
    plain = training_memory(ref, workload)
    checked = training_memory(ref, workload, checkpointing=True)
    assert plain.checkpointing is None
    ck = checked.checkpointing
    # stage 0's one block is the stage itself; stage 1's two blocks each
    assert ck.blocks == 3 and 0.5 < ck.recompute_share < 1.0
    assert ck.activations_plain_mb == pytest.approx(plain.activations_mb)
    assert checked.activations_mb < plain.activations_mb
    assert checked.backward_mb < plain.backward_mb and checked.held_mb == pytest.approx(plain.held_mb)


def test_the_library_switch_needs_a_transformers_or_timm_model():
    with pytest.raises(GnnperfError, match="no checkpointing switch"):
        library_checkpointing(nn.Linear(2, 2), True)


def _bare_block() -> nn.Module:  # Linears without bias run as aten.mm, which the selective policy counts
    return nn.Sequential(
        nn.Linear(8, 32, bias=False),
        nn.ReLU(),
        nn.Linear(32, 32, bias=False),
        nn.ReLU(),
        nn.Linear(32, 8, bias=False),
    )


def test_the_selective_policy_keeps_every_odd_product_and_attention():
    from torch.utils.checkpoint import CheckpointPolicy

    class Ctx:
        is_recompute = False

    policy, mm, keep = selective_policy(), torch.ops.aten.mm.default, CheckpointPolicy.MUST_SAVE
    forward = [policy(Ctx, mm) == keep for _ in range(5)]
    assert forward == [True, False, True, False, True]
    Ctx.is_recompute = True  # the recomputation counts again from one
    assert [policy(Ctx, mm) == keep for _ in range(2)] == [True, False]
    assert policy(Ctx, ATTENTION_OPS[0]) == keep and policy(Ctx, torch.ops.aten.relu.default) != keep


def test_selective_checkpointing_leaves_the_gradients_as_they_are():
    torch.manual_seed(0)
    plain = nn.Sequential(_bare_block(), _bare_block())
    checked = nn.Sequential(_bare_block(), _bare_block())
    checked.load_state_dict(plain.state_dict())
    selective_checkpointing(checked)
    x = torch.randn(4, 8)
    for model in (plain, checked):
        model(x).square().sum().backward()
    for a, b in zip(plain.parameters(), checked.parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad)


def test_a_selective_step_also_keeps_what_the_policy_selects():
    model = nn.Sequential(_bare_block(), _bare_block(), _bare_block())
    trace = trace_saved(model, (torch.randn(4, 8),), by_block=True)
    row, hidden = 4 * 8 * 4, 4 * 32 * 4
    # kept: the block inputs, each block's first product's output (hidden) and its third's (a row: the next block's
    # input, and the last block's output); recomputed: one block's two ReLU outputs
    assert trace.checkpointed_bytes(selective=True) == 4 * row + 3 * hidden + 2 * hidden
    # per block, the products' forward FLOPs 2 x 4 x (8 x 32 + 32 x 32 + 32 x 8); the first and third kept
    assert trace.recompute_share(selective=True) == pytest.approx(2 / 3)
    assert trace.recompute_share() == pytest.approx(1.0)


def test_selective_checkpointing_of_an_llm_keeps_less_than_none_and_more_than_full():
    ref = (
        "hf:llama?num_hidden_layers=2&hidden_size=64&intermediate_size=128&num_attention_heads=4"
        "&num_key_value_heads=2&vocab_size=100&attn_implementation=sdpa"
    )
    workload = Workload(input_shape=(64,), batch_size=2)
    plain, full, selective = (
        training_memory(ref, workload, checkpointing=c) for c in (False, True, "selective")
    )
    assert full.activations_mb < selective.activations_mb < plain.activations_mb
    ck = selective.checkpointing
    assert ck.selective and not full.checkpointing.selective
    assert 0 < ck.recompute_share < full.checkpointing.recompute_share


def test_fused_attention_counts_its_products_flops_which_a_selective_step_keeps():
    from gnnperf.graph.as_on_gpu import attention_flops

    q, k, v = torch.empty(2, 4, 16, 8), torch.empty(2, 4, 16, 8), torch.empty(2, 4, 16, 8)
    assert attention_flops(q, k, v, causal=False) == 2 * 2 * 4 * 16 * 16 * (8 + 8)
    assert attention_flops(q, k, v, causal=True) == 2 * 2 * 4 * 16 * 16 * 16 * 17 // 32

    class Attend(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(32, 96, bias=False)
            self.out = nn.Linear(32, 32, bias=False)

        def forward(self, x):
            q, k, v = self.qkv(x).view(2, 16, 3, 4, 8).permute(2, 0, 3, 1, 4)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out(a.transpose(1, 2).reshape(2, 16, 32))

    block = lambda: nn.Sequential(Attend(), nn.ReLU(), Attend())  # noqa: E731
    trace = trace_saved(nn.Sequential(block(), block()), (torch.randn(2, 16, 32),), by_block=True)
    attention = 4 * attention_flops(q, k, v, causal=True)  # two blocks of two
    assert trace.attention_flops == trace.block_attention_flops == attention
    products = 2 * 2 * (2 * 32 * 32 * (96 + 32))  # two blocks of two Attends: the qkv and out products
    assert trace.recompute_share() == pytest.approx(1.0)
    # kept: the odd products (each Attend's qkv: the first and third of a block) and the attentions
    kept = 2 * 2 * (2 * 32 * 32 * 96) + attention
    assert trace.recompute_share(selective=True) == pytest.approx(1 - kept / (products + attention))
