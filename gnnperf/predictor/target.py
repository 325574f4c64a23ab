"""The one target transform (log milliseconds) and the losses defined on it.

Every predictor learns ``to_target(iteration_time_ms)`` and reports ``from_target(prediction)``; nothing else in
the project scales targets. Log space makes a 10% error cost the same on a 5 ms and on a 5 s iteration.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeVar

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from gnnperf.errors import GnnperfError, suggest

ArrayT = TypeVar("ArrayT", Tensor, np.ndarray, float)
LossFn = Callable[[Tensor, Tensor], Tensor]


def to_target(ms: ArrayT) -> ArrayT:
    """Milliseconds -> training target: ``log(ms)``; keeps the type (tensor, array or float)."""
    return torch.log(ms) if isinstance(ms, Tensor) else np.log(ms)


def from_target(t: ArrayT) -> ArrayT:
    """Training target -> milliseconds: ``exp(t)``; keeps the type (tensor, array or float)."""
    return torch.exp(t) if isinstance(t, Tensor) else np.exp(t)


def mse_loss(pred: Tensor, target: Tensor) -> Tensor:
    """Mean squared error of log milliseconds."""
    return F.mse_loss(pred, target)


def huber_loss(pred: Tensor, target: Tensor, delta: float = 0.5) -> Tensor:
    """Huber loss of log milliseconds: quadratic within ``delta`` (0.5 ~ a factor of 1.65), linear beyond."""
    return F.huber_loss(pred, target, delta=delta)


def mape_loss(pred: Tensor, target: Tensor, max_log_ratio: float = 3.0) -> Tensor:
    """MAPE-like loss on log predictions: mean ``|exp(pred - target) - 1|`` (a fraction, not percent).

    For over-predictions beyond ``exp(max_log_ratio)`` the ratio continues linearly instead of exponentially,
    so a badly initialised model neither overflows nor loses its gradient.
    """
    d = pred - target
    cap = float(np.exp(max_log_ratio))
    ratio = torch.where(
        d > max_log_ratio, cap * (1.0 + d - max_log_ratio), torch.exp(d.clamp(max=max_log_ratio))
    )
    return (ratio - 1.0).abs().mean()


LOSSES: dict[str, Callable[..., Tensor]] = {"mse": mse_loss, "huber": huber_loss, "mape": mape_loss}


def get_loss(name: str, **kwargs: float) -> LossFn:
    """The loss ``name`` (one of :data:`LOSSES`) with its keyword options bound, e.g. ``get_loss("huber", delta=1)``."""
    if name not in LOSSES:
        raise GnnperfError(f"unknown loss {name!r}; choose from {sorted(LOSSES)}{suggest(name, LOSSES)}")
    return partial(LOSSES[name], **kwargs) if kwargs else LOSSES[name]
