"""The timing harness: one training (or inference) iteration of a model on synthetic data.

One training iteration is ``optimizer.zero_grad(set_to_none=True)``, forward (under autocast for ``amp_*``),
loss, backward and optimizer step; ``Workload.timed`` says which of these the time covers. Inference is the
forward pass under ``torch.inference_mode()`` in eval mode. Inputs (and loss targets) are made once and already
sit on the device, unless ``h2d`` puts the copy from pinned host memory inside the timed region.

Timing (:mod:`gnnperf.measure.timing`): ``warmup`` untimed iterations, then timed iterations until the 95%
confidence bound of the median lies within ``target_rel_ci`` of it, or ``max_iters``, or ``max_time_s`` (after
``min_iters``). CPU runs at a fixed thread count; CUDA with cudnn autotuning (fixed shapes) and tf32 only for
precision ``tf32``.

The model is modified in place (device, dtype, memory format, train/eval mode, gradients).
"""

from __future__ import annotations

import gc
import importlib.metadata
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gnnperf.errors import GnnperfError
from gnnperf.measure.timing import median_rel_ci, result, time_cpu, time_cuda
from gnnperf.measure.workload import MeasureSettings, Workload

__all__ = [
    "AUTOCAST_DTYPE",
    "MODEL_DTYPE",
    "build_model",
    "check_supported",
    "classify_error",
    "library_versions",
    "measure",
    "median_rel_ci",
    "result",
    "software_tag",
]

# The model's type (its weights and activations) per precision, and autocast's; other precisions run fp32 weights
# (``tf32``: fp32 with TF32 matmuls). The memory traces build their shape-only models the same way.
MODEL_DTYPE = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}
AUTOCAST_DTYPE = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}
# Plain, common hyper-parameters; the values do not change the time of a step.
_OPTIMIZERS: dict[str, Callable[[list[nn.Parameter]], torch.optim.Optimizer]] = {
    "sgd": lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3),
}
_OOM_TEXT = ("out of memory", "can't allocate memory")
_ERROR_CHARS = 500


def check_supported(workload: Workload, settings: MeasureSettings) -> None:
    """Raise :class:`GnnperfError` for a workload this machine or harness cannot measure at all."""
    if workload.num_devices != 1:
        raise GnnperfError(f"the harness measures one device; got num_devices={workload.num_devices}")
    if settings.device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise GnnperfError(f"device {settings.device} requested but CUDA is not available here")
        index = torch.device(settings.device).index or 0
        if index >= torch.cuda.device_count():
            raise GnnperfError(
                f"device {settings.device} not found: {torch.cuda.device_count()} CUDA device(s)"
            )
    elif workload.h2d:
        raise GnnperfError("a timed host-to-device copy (h2d) needs a CUDA device")
    elif workload.precision == "tf32":  # its rows would carry another label for the fp32 computation
        raise GnnperfError("precision tf32 is a CUDA tensor-core mode: on a CPU it runs fp32; measure fp32")


MODEL_LIBRARIES = ("timm", "torchvision", "transformers")


def library_versions() -> str | None:
    """The installed versions of the libraries that build models, e.g. ``timm=1.0.31;torchvision=0.29.1``.

    Read from the package metadata (nothing is imported); ``None`` when none is installed.
    """
    found = []
    for name in MODEL_LIBRARIES:
        try:
            found.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ";".join(found) or None


def software_tag() -> str:
    """The software identity of a sample, e.g. ``torch=2.14.1+cu130;cudnn=91000``."""
    tag = f"torch={torch.__version__}"
    if torch.cuda.is_available() and torch.backends.cudnn.is_available():
        tag += f";cudnn={torch.backends.cudnn.version()}"
    return tag


def measure(
    spec_or_model: Any,
    workload: Workload,
    settings: MeasureSettings,
    model: nn.Module | None = None,
) -> dict[str, Any]:
    """Measure one iteration; returns the result fields of a sample (:func:`result`).

    Args:
        spec_or_model: a :class:`gnnperf.zoo.resolve.ModelSpec` (inputs from ``make_inputs``) or an
            ``nn.Module`` (float inputs of shape ``(batch_size, *workload.input_shape)``).
        workload: what to measure.
        settings: how to measure.
        model: an already built model for ``spec_or_model``; built with ``spec.build()`` when omitted.

    A failure of the model (out of memory, any exception) becomes status ``oom``/``error`` with a one-line
    message; only a request this machine cannot serve at all (see :func:`check_supported`) raises.
    """
    check_supported(workload, settings)
    is_spec = hasattr(spec_or_model, "make_inputs")
    if not is_spec and not isinstance(spec_or_model, nn.Module):
        raise TypeError(f"expected a ModelSpec or nn.Module, got {type(spec_or_model).__name__}")
    if not is_spec and not workload.input_shape:
        raise GnnperfError("measuring a bare nn.Module needs workload.input_shape")
    device = torch.device(settings.device)
    failure: tuple[str, str] | None = None
    with ExitStack() as stack:
        _fix_global_state(stack, workload, settings, device)
        try:
            return _measure(spec_or_model, is_spec, model, workload, settings, device)
        except Exception as e:  # noqa: BLE001 - every model failure is a sample, never a crash
            failure = classify_error(e)
    # Outside the except clause the traceback (and the tensors its frames hold) is gone.
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result(*failure)


def build_model(spec: Any, workload: Workload) -> nn.Module:
    """``spec``'s model with random weights drawn from seed 0, so that a re-measurement times the same numbers.

    The values matter on CPUs: subnormal floats are slow there and PyTorch leaves flush-to-zero off (a small
    GRU's fastest training steps took 30 ms at one thread, 21 ms with it on; 2026-12-04), and how many arise
    depends on the weights. The caller's random state is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return spec.build(input_shape=workload.input_shape or None)


def classify_error(e: BaseException) -> tuple[str, str]:
    """``(status, one-line message)`` for a failed measurement: ``oom`` for out-of-memory, else ``error``."""
    text = str(e).strip()
    first = text.splitlines()[0] if text else ""
    message = f"{type(e).__name__}: {first}" if first else type(e).__name__
    oom = isinstance(e, (torch.OutOfMemoryError, MemoryError)) or (
        isinstance(e, RuntimeError) and any(s in text.lower() for s in _OOM_TEXT)
    )
    return ("oom" if oom else "error"), message[:_ERROR_CHARS]


def _fix_global_state(stack: ExitStack, workload: Workload, settings: MeasureSettings, device: torch.device):
    """Set thread count and matmul precision for the measurement; the stack restores them."""
    threads = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    stack.callback(torch.set_num_threads, threads)
    if device.type != "cuda":
        return  # tf32 is a CUDA tensor-core mode; on CPU fp32 and tf32 are the same computation
    stack.enter_context(torch.cuda.device(device))
    precision = "tf32" if workload.precision == "tf32" else "ieee"
    # cuDNN's RNNs have their own switch, TF32 by default: an fp32 LSTM would run in TF32 without it
    backends = [torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn]
    saved = [b.fp32_precision for b in backends]
    for b in backends:
        b.fp32_precision = precision
    stack.callback(lambda: [setattr(b, "fp32_precision", p) for b, p in zip(backends, saved, strict=True)])
    benchmark = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True  # fixed shapes: autotune during warm-up, as training scripts do
    stack.callback(setattr, torch.backends.cudnn, "benchmark", benchmark)


def _measure(
    spec_or_model: Any,
    is_spec: bool,
    model: nn.Module | None,
    workload: Workload,
    settings: MeasureSettings,
    device: torch.device,
) -> dict[str, Any]:
    cuda = device.type == "cuda"
    if cuda:
        gc.collect()  # an earlier model kept alive by a reference cycle would count in this one's peak
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)  # the peak covers weights, optimizer state and activations
    gen = torch.Generator().manual_seed(0)
    if is_spec:
        model = model if model is not None else build_model(spec_or_model, workload)
        inputs = spec_or_model.make_inputs(workload.batch_size, workload.input_shape or None, "cpu", gen)
    else:
        model = spec_or_model
        inputs = (torch.randn((workload.batch_size, *workload.input_shape), generator=gen),)
    dtype = MODEL_DTYPE.get(workload.precision)
    memory_format = torch.channels_last if workload.memory_format == "channels_last" else None
    model.to(device)
    if dtype is not None:
        model.to(dtype)
    if memory_format is not None:
        _channels_last(model)
    train = workload.mode == "train"
    model.train(train)

    inputs = tuple(_prepare(t, dtype, memory_format) for t in inputs)
    if workload.h2d:
        host = tuple(t.pin_memory() for t in inputs)  # as a DataLoader with pin_memory=True delivers them

        def get_inputs() -> tuple[torch.Tensor, ...]:
            return tuple([t.to(device, non_blocking=True) for t in host])
    else:
        on_device = tuple(t.to(device) for t in inputs)

        def get_inputs() -> tuple[torch.Tensor, ...]:
            return on_device

    autocast_dtype = AUTOCAST_DTYPE.get(workload.precision)
    amp = torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype else nullcontext()
    with ExitStack() as stack:
        if train:
            step = _train_step(
                model, get_inputs, workload, amp, TrainingLoss(dtype is not None and dtype != torch.float64)
            )
        else:
            stack.enter_context(torch.inference_mode())
            stack.enter_context(amp)

            def step() -> None:
                model(*get_inputs())

        for _ in range(settings.warmup):
            step()
        times_ns = time_cuda(step, settings, device) if cuda else time_cpu(step, settings)
    peak_mb = torch.cuda.max_memory_allocated(device) / 2**20 if cuda else None
    return result("ok", None, times_ns, peak_mb)


def _channels_last(model: nn.Module) -> None:
    """Every 4-D weight or buffer to ``channels_last``, every 5-D one to ``channels_last_3d``.

    ``Module.to(memory_format=...)`` takes one format and refuses tensors of the other rank: a video model's
    Conv3d weights failed with ``channels_last`` ("required rank 4 tensor").
    """
    for t in (*model.parameters(), *model.buffers()):
        if t.dim() in (4, 5):
            t.data = t.data.contiguous(
                memory_format=torch.channels_last if t.dim() == 4 else torch.channels_last_3d
            )


def _prepare(t: torch.Tensor, dtype: torch.dtype | None, memory_format: torch.memory_format | None):
    if dtype is not None and t.is_floating_point():
        t = t.to(dtype)
    if memory_format is not None and t.dim() in (4, 5):
        t = t.contiguous(memory_format=memory_format if t.dim() == 4 else torch.channels_last_3d)
    return t


def _train_step(model: nn.Module, get_inputs, workload: Workload, amp, loss_fn) -> Callable[[], None]:
    """A closure for one training iteration with every decision taken outside it (a lean timed loop)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if workload.timed == "fwd":

        def step() -> None:
            with amp:
                loss_fn(model(*get_inputs()))

        return step
    if workload.timed == "fwd+bwd":

        def step() -> None:
            for p in params:  # what zero_grad(set_to_none=True) does, without an optimizer
                p.grad = None
            with amp:
                loss = loss_fn(model(*get_inputs()))
            loss.backward()

        return step
    opt = _OPTIMIZERS[workload.optimizer](params)
    if workload.precision == "amp_fp16":
        scaler = torch.amp.GradScaler(next(iter(params)).device.type)  # fp16 training needs loss scaling

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            with amp:
                loss = loss_fn(model(*get_inputs()))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

        return step

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with amp:
            loss = loss_fn(model(*get_inputs()))
        loss.backward()
        opt.step()

    return step


class TrainingLoss:
    """Cross-entropy for (B, C) and (B, L, V) logits, else mean of squares; set up on the first call.

    HF ``ModelOutput`` and other dicts give ``logits`` (else their first tensor), tuples their first tensor.
    Targets are random integers made once, on the output's device.
    """

    def __init__(self, upcast: bool) -> None:
        self.upcast = upcast  # fp16/bf16 models: loss in fp32, as mixed-precision recipes do
        self.fn: Callable[[Any], torch.Tensor] | None = None

    def __call__(self, out: Any) -> torch.Tensor:
        fn = self.fn
        if fn is None:
            fn = self.fn = self._setup(out)
        return fn(out)

    def _setup(self, out: Any) -> Callable[[Any], torch.Tensor]:
        pick = _picker(out)
        t = pick(out)
        upcast = self.upcast
        if t.is_floating_point() and t.dim() in (2, 3) and t.shape[-1] > 1:
            classes = t.shape[-1]
            gen = torch.Generator().manual_seed(1)
            target = torch.randint(0, classes, (t.numel() // classes,), generator=gen).to(t.device)

            flat = t.dim() == 3  # (B, L, V) -> (B*L, V); a reshape on (B, C) would add an autograd node

            def ce(o: Any) -> torch.Tensor:
                logits = pick(o)
                if flat:
                    logits = logits.reshape(-1, classes)
                return F.cross_entropy(logits.float() if upcast else logits, target)

            return ce

        def mean_square(o: Any) -> torch.Tensor:
            x = pick(o)
            return (x.float() if upcast else x).square().mean()

        return mean_square


def _picker(out: Any) -> Callable[[Any], torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return lambda o: o
    if isinstance(out, dict):  # includes transformers' ModelOutput
        keys = [k for k, v in out.items() if isinstance(v, torch.Tensor)]
        if keys:
            key = "logits" if "logits" in keys else keys[0]
            return lambda o: o[key]
    if isinstance(out, (tuple, list)):
        for i, v in enumerate(out):
            if isinstance(v, torch.Tensor):
                return lambda o: o[i]
    raise TypeError(f"model output {type(out).__name__} holds no tensor to compute a loss from")
