"""What one measurement covers (:class:`Workload`) and how it is taken (:class:`MeasureSettings`).

Both are plain frozen/validated dataclasses with ``to_dict``/``from_dict`` so they travel as JSON to the
isolated runner. The allowed values below are also the allowed values of the sample schema
(:mod:`gnnperf.data.schema`). Importing this module does not import torch.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from typing import Any

from gnnperf.errors import GnnperfError, suggest

MODES = ("train", "infer")
PRECISIONS = ("fp32", "tf32", "amp_fp16", "amp_bf16", "fp16", "bf16", "fp64")
OPTIMIZERS = ("sgd", "adam", "adamw", "none")
TIMED = ("fwd+bwd+opt", "fwd+bwd", "fwd")
MEMORY_FORMATS = ("contiguous", "channels_last")
H2D_PREFIX = "h2d+"

_DEVICE_RE = re.compile(r"cpu|cuda(:\d+)?")


def _choice(what: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise GnnperfError(
            f"bad {what} '{value}': expected one of {', '.join(allowed)}{suggest(str(value), allowed)}"
        )


def parse_timed_label(label: str) -> tuple[str, bool]:
    """``"h2d+fwd+bwd"`` -> ``("fwd+bwd", True)``; ``"fwd"`` -> ``("fwd", False)``."""
    h2d = label.startswith(H2D_PREFIX)
    timed = label[len(H2D_PREFIX) :] if h2d else label
    _choice("timed", timed, TIMED)
    return timed, h2d


@dataclass(frozen=True)
class Workload:
    """One measured configuration of a model (everything but the model and the hardware).

    ``optimizer`` and ``timed`` default from ``mode``: train -> ``sgd`` / ``fwd+bwd+opt``, infer -> ``none`` /
    ``fwd``. An optimizer that is not timed must be ``none`` (it would not change the time, and two names for
    one measurement would give two sample ids).

    Attributes:
        batch_size: samples per iteration (per device).
        input_shape: per-sample input shape, e.g. ``(3, 224, 224)`` or ``(512,)`` for tokens; ``()`` means the
            model's default.
        mode: ``train`` (autograd on, train mode) or ``infer`` (``inference_mode``, eval mode).
        precision: ``fp32``/``tf32`` (matmul precision), ``amp_fp16``/``amp_bf16`` (autocast),
            ``fp16``/``bf16``/``fp64`` (model and inputs cast).
        optimizer: ``sgd`` | ``adam`` | ``adamw`` | ``none``.
        timed: what the time covers: ``fwd+bwd+opt`` | ``fwd+bwd`` | ``fwd``.
        h2d: whether the host-to-device copy of the inputs is inside the timed region.
        memory_format: ``contiguous`` | ``channels_last``.
        num_devices: devices the iteration runs on (the harness measures 1; public tables may have more).
    """

    batch_size: int
    input_shape: tuple[int, ...] = ()
    mode: str = "train"
    precision: str = "fp32"
    optimizer: str | None = None
    timed: str | None = None
    h2d: bool = False
    memory_format: str = "contiguous"
    num_devices: int = 1

    def __post_init__(self) -> None:
        # Frozen: normalised values are written through object.__setattr__.
        set_ = object.__setattr__
        _choice("mode", self.mode, MODES)
        _choice("precision", self.precision, PRECISIONS)
        _choice("memory_format", self.memory_format, MEMORY_FORMATS)
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise GnnperfError(f"bad batch_size {self.batch_size!r}: expected a positive integer")
        if (
            isinstance(self.num_devices, bool)
            or not isinstance(self.num_devices, int)
            or self.num_devices < 1
        ):
            raise GnnperfError(f"bad num_devices {self.num_devices!r}: expected a positive integer")
        try:
            shape = tuple(int(d) for d in self.input_shape)
        except (TypeError, ValueError):
            raise GnnperfError(
                f"bad input_shape {self.input_shape!r}: expected a tuple of integers"
            ) from None
        if any(d <= 0 for d in shape):
            raise GnnperfError(f"bad input_shape {self.input_shape!r}: dimensions must be positive")
        set_(self, "input_shape", shape)

        timed = self.timed
        if timed is not None and timed.startswith(H2D_PREFIX):  # accept the label form, e.g. "h2d+fwd"
            timed, _ = parse_timed_label(timed)
            set_(self, "h2d", True)
        if timed is None:
            if self.mode == "infer":
                timed = "fwd"
            else:
                timed = "fwd+bwd" if self.optimizer == "none" else "fwd+bwd+opt"
        _choice("timed", timed, TIMED)
        set_(self, "timed", timed)
        if self.mode == "infer" and timed != "fwd":
            raise GnnperfError(f"mode infer times only the forward pass; got timed={timed}")

        optimizer = self.optimizer
        if optimizer is None:
            optimizer = "sgd" if timed == "fwd+bwd+opt" else "none"
        _choice("optimizer", optimizer, OPTIMIZERS)
        set_(self, "optimizer", optimizer)
        if timed == "fwd+bwd+opt" and optimizer == "none":
            raise GnnperfError(
                "timed fwd+bwd+opt needs an optimizer (sgd, adam or adamw), got optimizer none"
            )
        if timed != "fwd+bwd+opt" and optimizer != "none":
            raise GnnperfError(f"optimizer {optimizer} is not timed with timed={timed}; use optimizer none")
        set_(self, "h2d", bool(self.h2d))

    @property
    def timed_label(self) -> str:
        """The schema's ``timed`` value: ``fwd+bwd+opt``, ``h2d+fwd+bwd``, ..."""
        return f"{H2D_PREFIX}{self.timed}" if self.h2d else str(self.timed)

    @property
    def input_shape_str(self) -> str:
        """The schema's ``input_shape`` value: ``"3,224,224"`` (``""`` for the model default)."""
        return ",".join(map(str, self.input_shape))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["input_shape"] = list(self.input_shape)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Workload:
        return cls(**_known(cls, d, "workload"))


@dataclass(frozen=True)
class MeasureSettings:
    """How a measurement is taken.

    Attributes:
        warmup: untimed iterations first (allocator, autotuning, lazy init).
        min_iters: timed iterations always taken (wins over ``max_time_s``).
        max_iters: hard cap on timed iterations.
        max_time_s: stop once the timed phase has run this long (after ``min_iters``).
        target_rel_ci: stop when the 95% distribution-free confidence bound of the median lies within this
            fraction of the median (0 disables the early stop).
        threads: CPU threads for the measurement (fixed; restored afterwards).
        device: ``cpu`` | ``cuda`` | ``cuda:N``.
        isolate: measure in a fresh subprocess (:func:`gnnperf.measure.runner.run_isolated`).
    """

    warmup: int = 5
    min_iters: int = 10
    max_iters: int = 200
    max_time_s: float = 10.0
    target_rel_ci: float = 0.01
    threads: int = 1
    device: str = "cpu"
    isolate: bool = False

    def __post_init__(self) -> None:
        for name in ("warmup", "min_iters", "max_iters", "threads"):
            value = getattr(self, name)
            low = 0 if name == "warmup" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise GnnperfError(f"bad {name} {value!r}: expected an integer >= {low}")
        if self.max_iters < self.min_iters:
            raise GnnperfError(f"max_iters ({self.max_iters}) is below min_iters ({self.min_iters})")
        if not self.max_time_s > 0:
            raise GnnperfError(f"bad max_time_s {self.max_time_s!r}: expected a positive number of seconds")
        if not 0 <= self.target_rel_ci < 1:
            raise GnnperfError(f"bad target_rel_ci {self.target_rel_ci!r}: expected a fraction in [0, 1)")
        if not isinstance(self.device, str) or not _DEVICE_RE.fullmatch(self.device):
            raise GnnperfError(f"bad device '{self.device}': expected cpu, cuda or cuda:N")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MeasureSettings:
        return cls(**_known(cls, d, "measure settings"))


def _known(cls: type, d: dict[str, Any], what: str) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise GnnperfError(f"unknown {what} field '{unknown[0]}'{suggest(unknown[0], names)}")
    return dict(d)
