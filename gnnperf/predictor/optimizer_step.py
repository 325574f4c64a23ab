"""The optimizer update's least time, and the floor it sets under a step that times one (:data:`UPDATE_FLOOR_NOTE`).

An update reads and writes every parameter's tensors, once per elementwise operation of torch's default
implementation (a loop over the parameters on a CPU, ``foreach`` over lists of them on a GPU: the same operations),
counted in parameter-sized tensors read plus written:

- SGD with momentum (the harness's and timm's benchmark's): ``buf.mul_(m).add_(grad)`` 2 + 3, ``param.add_(buf)`` 3;
- Adam: ``exp_avg.lerp_(grad)`` 3, ``exp_avg_sq.mul_(b2).addcmul_(grad, grad)`` 2 + 3, ``denom =
  (exp_avg_sq.sqrt() / c).add_(eps)`` 2 + 2 + 2, ``param.addcdiv_(exp_avg, denom)`` 4;
- AdamW: Adam's and the decoupled weight decay ``param.mul_(1 - lr * wd)`` 2.

At a GPU's data-sheet bandwidth, which bounds every kernel, that is a floor: no launch latency, no per-tensor cost,
full bandwidth (weights small enough to be served from the L2 give a floor of microseconds, under the launches of the
update's kernels). The network learned the
optimizer as a one-hot from sources that each timed one optimizer on other models (timm's GPU tables SGD, NeuSight
and the torchvision benchmark none), so it can price an update below nothing: the shipped v20 predicts GPT-2's fp32
SGD step 10% faster than the same step without an update on an A100. ``Predictor.predict`` therefore floors such a
step at the step without the update plus this least time (:mod:`gnnperf.predictor.floors`, ``floored_at_update``).

On a CPU it is no floor (``experiments/optimizer_step``, on ``datasets/cpu_optimizers``: each
model timed with no optimizer, SGD, Adam and AdamW): where the update is 5% of the step or more it took a median
1.3-1.4x this time at the probed copy rate, but on weights larger than the 300 MB L3 SGD's in-place update ran at
twice that rate (0.40-0.52x) and Adam's, which writes two temporaries per tensor, near it (0.84-1.41x); smaller
weights sit in the cache. So the floor is for GPUs only.
"""

from __future__ import annotations

from gnnperf.predictor.parallel import GRAD_BYTES

# parameter-sized tensors each default implementation reads plus writes per step (see the module docstring)
UPDATE_TENSORS = {"sgd": 8, "adam": 18, "adamw": 20, "none": 0}

UPDATE_FLOOR_NOTE = (
    "predicted faster with the optimizer update than without one, so given the step without it plus the update's "
    "least memory traffic"
)


def update_bytes(num_params: int, optimizer: str, precision: str) -> float:
    """Bytes the optimizer's update moves: parameter-sized tensors (:data:`UPDATE_TENSORS`) x parameters x width.

    The parameters' width is the precision's (``fp16``/``bf16`` 2 bytes, ``fp64`` 8); autocast (``amp_*``) keeps
    fp32 weights, so 4 bytes as ``fp32``.
    """
    return float(UPDATE_TENSORS[optimizer] * num_params * GRAD_BYTES.get(precision, 4))


def update_floor_ms(num_params: int, optimizer: str, precision: str, bandwidth_gbs: float | None) -> float:
    """The update's least time in ms: :func:`update_bytes` at ``bandwidth_gbs`` (0 when the device has none)."""
    if not bandwidth_gbs:
        return 0.0
    return update_bytes(num_params, optimizer, precision) / (bandwidth_gbs * 1e9) * 1e3
