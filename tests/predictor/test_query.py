"""Query: a prediction request, from its fields or from a sample row."""

from __future__ import annotations

import pytest

from gnnperf.errors import GnnperfError
from gnnperf.predict import Query


def test_a_sample_row_gives_the_query_of_its_own_step():
    row = {
        "model_ref": "torchvision:resnet50", "hardware": "titan-rtx", "batch_size": 12, "input_shape": "3,224,224",
        "mode": "train", "precision": "fp16", "optimizer": "unknown", "timed": "h2d+fwd+bwd",
        "memory_format": "unknown", "num_devices": 2,
    }  # fmt: skip
    q = Query.from_sample(row)
    assert q == Query(
        "torchvision:resnet50", "titan-rtx", 12, input_shape=(3, 224, 224), precision="fp16", optimizer="none",
        timed="fwd+bwd", h2d=True, num_devices=2,
    )  # fmt: skip
    assert q.workload(q.input_shape).timed_label == "h2d+fwd+bwd"
    assert Query.from_sample(row, "a100-sxm4-40gb").hardware == "a100-sxm4-40gb"


def test_an_input_shape_given_as_a_list_is_the_tuple_of_its_dims():
    import numpy as np

    listed = Query("timm:resnet18", "h200", 32, input_shape=[3, 224, 224])
    assert listed == Query("timm:resnet18", "h200", 32, input_shape=np.array([3, 224, 224]))
    assert listed.input_shape == (3, 224, 224) and hash(listed) == hash(
        Query("timm:resnet18", "h200", 32, (3, 224, 224))
    )


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"grad_accum": 0}, "bad grad_accum 0"),
        ({"grad_accum": 2, "mode": "infer"}, "needs a training step that times one"),
        ({"fsdp_param_dtype": "fp8", "parallel": "fsdp"}, "bad fsdp_param_dtype 'fp8'"),
        ({"fsdp_param_dtype": "bf16"}, "needs --parallel fsdp"),
        ({"fsdp_param_dtype": "bf16", "parallel": "fsdp", "precision": "amp_bf16"}, "--precision fp32"),
    ],
)
def test_a_query_that_cannot_run_is_one_clear_error(fields, says):
    with pytest.raises(GnnperfError, match=says):
        Query("timm:resnet18", "a100-sxm4-40gb", 8, **fields)
