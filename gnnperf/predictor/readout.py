"""Readouts: node states + per-graph context -> predicted log milliseconds.

``additive``: each op predicts its own share of the iteration time, ``softplus(node_mlp(h_i))`` times a learned
per-graph scale ``exp(scale(ctx))``; the graph's time is the sum over its ops plus a learned per-graph overhead
``exp(overhead(ctx))`` (framework, optimizer and launch costs no single op owns). Sums are taken in log space
(log-sum-exp) so times from microseconds to minutes stay finite. The per-op terms are a breakdown of the
prediction, in ms.

``pooled``: sum, mean and max of node states, with the context, through an MLP straight to log ms.

``roofline``: additive, but each op's time is its roofline time on the device (``prior``, from
:class:`~gnnperf.predictor.roofline.RooflinePrior`) times a learned inefficiency bounded to
``[1/MAX_FACTOR, MAX_FACTOR]``, plus a learned fixed cost per op (launch, framework); the graph adds a learned
overhead. The device's speed enters through its data-sheet peak and bandwidth, so unseen devices extrapolate.
``roofline_scaled`` multiplies every op's time by a bounded factor from the context, aggregates included.
``roofline_overlap`` lets the ops' fixed (host) costs overlap their device time, as asynchronous launches do.

``power_law``: ``base + s * log(graph roofline ms)`` with a per-graph exponent ``s`` in (0, 1) from the pooled
node states and the context: how much of a faster device's data sheet a graph turns into speed.

``anchored``: a graph-level cost model, ``a * compute_ms + b * memory_ms + c`` over the graph's summed roofline
terms with rates ``a, b`` and overhead ``c`` learned from the device and workload context only, times a
correction from the pooled node states bounded to ``[1/MAX_CORRECTION, MAX_CORRECTION]``. A model from a family
never seen in training (an op type no training graph had) cannot move the prediction further than that bound
from the cost model, which is where an unbounded readout extrapolates worst (experiments/cpu_holdout_family).

``opcost``: the ``opcost`` baseline, fitted on the train split (each op its class's rates times its roofline terms
plus its class's launch cost; 19 rates shared by every graph and device), times a correction from the pooled node
states bounded to ``[1/2, 2]``. The network can only say how that model is off for a graph, not replace its
device dependence (experiments/torchvision_lodo).

All return ``(log_ms [B], node_contrib_ms [N] or None)``; readouts with ``needs_prior = True`` also take the
per-op ``(compute ms, memory ms)`` of :class:`~gnnperf.predictor.roofline.RooflinePrior`, and those with
``needs_op = True`` each op's index in ``OP_VOCAB`` (``op``). The context's first
``hidden`` columns are the device and workload (``HardwareConditioning``); the rest, if any, encode the graph's
aggregate features. Register more with :func:`register_readout`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from gnnperf.baselines.opcost import CLASS_OF, CLASSES
from gnnperf.errors import GnnperfError, suggest
from gnnperf.graph.features import OP_VOCAB

READOUTS: dict[str, Callable[..., nn.Module]] = {}


def register_readout(name: str) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator adding a readout under ``name``; a duplicate name raises."""

    def add(cls: type[nn.Module]) -> type[nn.Module]:
        if name in READOUTS:
            raise ValueError(f"readout {name!r} is already registered")
        READOUTS[name] = cls
        return cls

    return add


def _segment_logsumexp(log_node: Tensor, batch: Tensor, log_extra: Tensor) -> Tensor:
    """log(sum_i exp(log_node_i) over each graph + exp(log_extra_b)) [B], computed stably."""
    num_graphs = log_extra.shape[0]
    m = torch.full((num_graphs,), float("-inf"), dtype=log_node.dtype, device=log_node.device)
    m = m.scatter_reduce(0, batch, log_node, reduce="amax", include_self=True)
    m = torch.maximum(m, log_extra).detach()
    total = torch.zeros_like(m).index_add_(0, batch, torch.exp(log_node - m[batch]))
    return m + torch.log(total + torch.exp(log_extra - m))


@register_readout("additive")
class AdditiveReadout(nn.Module):
    """Sum of per-op times plus a per-graph overhead; see the module docstring."""

    def __init__(self, hidden: int, context_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.node_mlp = nn.Sequential(
            nn.Linear(hidden, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, 1)
        )
        self.log_scale = nn.Linear(context_dim, 1)
        self.log_overhead = nn.Linear(context_dim, 1)

    def parts(self, h: Tensor, context: Tensor, batch: Tensor) -> tuple[Tensor, Tensor]:
        """(log ms of each op [N], log ms of each graph's overhead [B])."""
        share = F.softplus(self.node_mlp(h).squeeze(-1)).clamp_min(1e-20)
        log_node = torch.log(share) + self.log_scale(context).squeeze(-1)[batch]
        return log_node, self.log_overhead(context).squeeze(-1)

    def forward(self, h: Tensor, context: Tensor, batch: Tensor) -> tuple[Tensor, Tensor]:
        log_node, log_overhead = self.parts(h, context, batch)
        return _segment_logsumexp(log_node, batch, log_overhead), torch.exp(log_node)


@register_readout("pooled")
class PooledReadout(nn.Module):
    """MLP over [sum, mean, max pooled node states (LayerNorm-ed), context] -> log ms; no breakdown."""

    def __init__(self, hidden: int, context_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        # Sum pooling grows with graph size; the norm keeps the MLP's input scale bounded.
        self.norm = nn.LayerNorm(3 * hidden)
        self.mlp = nn.Sequential(
            nn.Linear(3 * hidden + context_dim, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, 1)
        )

    def pooled(self, h: Tensor, context: Tensor, batch: Tensor) -> Tensor:
        """The MLP's input [B, 3 * hidden + context_dim]."""
        from torch_geometric.nn import global_add_pool, global_max_pool, global_mean_pool

        size = context.shape[0]
        pooled = torch.cat(
            [
                global_add_pool(h, batch, size),
                global_mean_pool(h, batch, size),
                global_max_pool(h, batch, size),
            ],
            dim=-1,
        )
        return torch.cat([self.norm(pooled), context], dim=-1)

    def forward(self, h: Tensor, context: Tensor, batch: Tensor) -> tuple[Tensor, None]:
        return self.mlp(self.pooled(h, context, batch)).squeeze(-1), None


@register_readout("power_law")
class PowerLawReadout(PooledReadout):
    """``base + s * log(the graph's roofline ms on the device)``, ``s`` in (0, 1) per graph; no breakdown.

    The scaling law of experiments/torchvision_lodo (``transfer.py``: per model an offset, and a slope on the
    device's log peak set by the model's FLOPs per op) as a readout: the pooled node states and the context give a
    base and an exponent ``s = sigmoid(.)``, and the device enters through the graph's summed roofline time, so a
    graph with ``s`` near 1 speeds up with the data sheet and one near 0 (bound by the host: many small ops) does
    not. With ``model.hardware_conditioning=false`` the device enters only there.
    """

    needs_prior = True

    def __init__(self, hidden: int, context_dim: int, dropout: float = 0.0) -> None:
        super().__init__(hidden, context_dim, dropout)
        self.mlp[-1] = nn.Linear(hidden, 2)

    def forward(
        self, h: Tensor, context: Tensor, batch: Tensor, prior: tuple[Tensor, Tensor]
    ) -> tuple[Tensor, None]:
        minus_inf = torch.full((context.shape[0],), float("-inf"), dtype=h.dtype, device=h.device)
        log_roofline = _segment_logsumexp(torch.log(prior[0] + prior[1] + 1e-7), batch, minus_inf)
        base, exponent = self.mlp(self.pooled(h, context, batch)).unbind(-1)
        return base + torch.sigmoid(exponent) * log_roofline, None


@register_readout("roofline")
class RooflineReadout(nn.Module):
    """Per-op roofline time x bounded learned factor + learned fixed cost, summed; see the module docstring."""

    needs_prior = True
    MAX_FACTOR = 100.0

    def __init__(self, hidden: int, context_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.node_mlp = nn.Sequential(
            nn.Linear(hidden, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, 2)
        )
        self.log_overhead = nn.Linear(context_dim, 1)
        with torch.no_grad():  # start near: twice the roofline time, about 10 us fixed cost per op
            self.node_mlp[-1].bias.copy_(torch.tensor([0.7, -11.5]))

    def terms(self, h: Tensor, prior: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """(log ms each op runs on the device [N], log ms of its fixed cost [N])."""
        prior = torch.log(prior[0] + prior[1] + 1e-7)  # 0.1 ns floor: ops without cost keep a finite log
        factor, fixed = self.node_mlp(h).unbind(-1)
        bound = math.log(self.MAX_FACTOR)
        return prior + bound * torch.tanh(factor / bound), fixed.clamp(-25.0, 10.0)

    def parts(
        self, h: Tensor, context: Tensor, batch: Tensor, prior: tuple[Tensor, Tensor]
    ) -> tuple[Tensor, Tensor]:
        """(log ms of each op [N], log ms of each graph's overhead [B])."""
        log_device, log_fixed = self.terms(h, prior)
        log_overhead = self.log_overhead(context).squeeze(-1).clamp(-25.0, 10.0)
        return torch.logaddexp(log_device, log_fixed), log_overhead

    def forward(
        self, h: Tensor, context: Tensor, batch: Tensor, prior: tuple[Tensor, Tensor]
    ) -> tuple[Tensor, Tensor]:
        log_node, log_overhead = self.parts(h, context, batch, prior)
        return _segment_logsumexp(log_node, batch, log_overhead), torch.exp(log_node)


@register_readout("roofline_scaled")
class ScaledRooflineReadout(RooflineReadout):
    """``roofline`` times a bounded graph-level factor from the context (device, workload and aggregates).

    The roofline readout's per-op factors see only node states, and the aggregate features reach only its
    overhead. A whole-graph effect the aggregates describe, such as a network's grouped convolutions running
    slowly in channels-last layout (experiments/timm_train_family, ``grouped_conv.py``), then has to be learned
    op by op. Here ``exp(bound * tanh(scale(context) / bound))`` multiplies every op's time (so the breakdown
    still sums to the total), bounded to ``[1/MAX_SCALE, MAX_SCALE]`` and starting at 1.
    """

    MAX_SCALE = 4.0

    def __init__(self, hidden: int, context_dim: int, dropout: float = 0.0) -> None:
        super().__init__(hidden, context_dim, dropout)
        self.log_scale = nn.Linear(context_dim, 1)
        nn.init.zeros_(self.log_scale.weight)
        nn.init.zeros_(self.log_scale.bias)

    def parts(
        self, h: Tensor, context: Tensor, batch: Tensor, prior: tuple[Tensor, Tensor]
    ) -> tuple[Tensor, Tensor]:
        log_node, log_overhead = super().parts(h, context, batch, prior)
        bound = math.log(self.MAX_SCALE)
        log_scale = bound * torch.tanh(self.log_scale(context).squeeze(-1) / bound)
        return log_node + log_scale[batch], log_overhead


@register_readout("roofline_overlap")
class OverlapRooflineReadout(RooflineReadout):
    """``roofline`` with the ops' fixed costs overlapping their device time instead of adding to it.

    PyTorch launches kernels asynchronously: while the GPU runs one op, the host is already issuing the next. A
    network of many small ops (DenseNet at batch 12: thousands of launches) is then bound by the host, and a
    faster GPU does not speed it up; the torchvision benchmark's A100 runs DenseNet-169 no faster than an RTX 2080
    Ti (experiments/torchvision_lodo). Summing both terms per op, as ``roofline`` does, lets a model fitted on
    slower GPUs explain such a network's time with device time, which then shrinks on a faster GPU. Here a graph
    takes ``smoothmax(sum fixed, sum device) + overhead``, the smooth maximum ``(a^k + b^k)^(1/k)`` with
    ``k = SHARPNESS``; each op's share of the breakdown is its ``fixed + device`` time scaled so the shares sum to
    that maximum.
    """

    SHARPNESS = 4.0

    def parts(
        self, h: Tensor, context: Tensor, batch: Tensor, prior: tuple[Tensor, Tensor]
    ) -> tuple[Tensor, Tensor]:
        log_device, log_fixed = self.terms(h, prior)
        num_graphs = context.shape[0]
        minus_inf = torch.full((num_graphs,), float("-inf"), dtype=h.dtype, device=h.device)
        log_host_total = _segment_logsumexp(log_fixed, batch, minus_inf)
        log_device_total = _segment_logsumexp(log_device, batch, minus_inf)
        k = self.SHARPNESS
        log_busy = torch.logaddexp(k * log_host_total, k * log_device_total) / k
        log_sum = torch.logaddexp(log_host_total, log_device_total)
        log_node = torch.logaddexp(log_device, log_fixed) + (log_busy - log_sum)[batch]
        return log_node, self.log_overhead(context).squeeze(-1).clamp(-25.0, 10.0)


@register_readout("anchored")
class AnchoredReadout(nn.Module):
    """Graph-level cost model from device and workload, times a bounded GNN correction; see the module docstring."""

    needs_prior = True
    MAX_CORRECTION = 2.0

    def __init__(self, hidden: int, context_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.hidden = hidden
        self.rates = nn.Linear(hidden, 3)  # log compute factor, log memory factor, log overhead ms
        with torch.no_grad():  # start near: 3x the compute time, the memory time, 1 ms overhead
            self.rates.bias.copy_(torch.tensor([1.1, 0.0, 0.0]))
        self.pool = PooledReadout(hidden, context_dim, dropout)

    def forward(
        self, h: Tensor, context: Tensor, batch: Tensor, prior: tuple[Tensor, Tensor]
    ) -> tuple[Tensor, None]:
        size = context.shape[0]
        compute_ms, memory_ms = (
            torch.zeros(size, dtype=p.dtype, device=p.device).index_add_(0, batch, p) for p in prior
        )
        a, b, c = self.rates(context[:, : self.hidden]).unbind(-1)
        log_cost = torch.logsumexp(
            torch.stack(
                [torch.log(compute_ms + 1e-9) + a, torch.log(memory_ms + 1e-9) + b, c.clamp(-25.0, 10.0)]
            ),
            0,
        )
        bound = math.log(self.MAX_CORRECTION)
        correction, _ = self.pool(h, context, batch)
        return log_cost + bound * torch.tanh(correction / bound), None


@register_readout("opcost")
class OpCostReadout(nn.Module):
    """The ``opcost`` baseline's rates, fitted on the train split, times a bounded graph correction.

    An op of class ``k`` costs ``a_k * compute_ms + b_k * memory_ms + c_k`` and a graph adds ``d``: the classes,
    terms and rates of :mod:`gnnperf.baselines.opcost`, which ``gnnperf-train`` fits on the train split (non-negative
    least squares) and sets with :meth:`fit_rates` before the network trains. They are buffers, not weights: no
    graph or device moves them, and the network learns only the correction. (Learning the rates with the network,
    from a generic start, scored worse on experiments/torchvision_lodo: 27.1% mean against 25.2.)
    """

    needs_prior = True
    needs_op = True
    MAX_CORRECTION = 2.0

    def __init__(self, hidden: int, context_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        op_class = [CLASSES.index(CLASS_OF.get(t, "other")) for t in OP_VOCAB]
        self.register_buffer("op_class", torch.tensor(op_class))
        # until fitted: twice the compute time, the memory time, 10 us per op launch; 1 ms per graph
        self.register_buffer(
            "log_rates", torch.tensor([math.log(2.0), 0.0, math.log(0.01)]).repeat(len(CLASSES), 1)
        )
        self.register_buffer("log_overhead", torch.zeros(()))
        self.pool = PooledReadout(hidden, context_dim, dropout)

    def fit_rates(self, coef: Sequence[float]) -> None:
        """Set the rates to a fitted ``opcost`` baseline's ``coef`` (in its feature order)."""
        coef = torch.as_tensor(coef, dtype=self.log_rates.dtype).clamp_min(1e-12)  # a zero rate: no cost
        if coef.shape != (3 * len(CLASSES) + 1,):
            raise GnnperfError(
                f"opcost coefficients: expected {3 * len(CLASSES) + 1}, got {tuple(coef.shape)}"
            )
        self.log_rates.copy_(torch.log(coef[:-1]).view(len(CLASSES), 3))
        self.log_overhead.copy_(torch.log(coef[-1]))

    def parts(
        self, h: Tensor, context: Tensor, batch: Tensor, prior: tuple[Tensor, Tensor], op: Tensor
    ) -> tuple[Tensor, Tensor]:
        """(log ms of each op [N], log ms of each graph's overhead [B]), the correction included."""
        terms = torch.stack(
            [torch.log(prior[0] + 1e-9), torch.log(prior[1] + 1e-9), torch.zeros_like(prior[0])], -1
        )
        log_node = torch.logsumexp(terms + self.log_rates[self.op_class[op]], -1)
        bound = math.log(self.MAX_CORRECTION)
        correction, _ = self.pool(h, context, batch)
        correction = bound * torch.tanh(correction / bound)
        return log_node + correction[batch], self.log_overhead + correction

    def forward(
        self, h: Tensor, context: Tensor, batch: Tensor, prior: tuple[Tensor, Tensor], op: Tensor
    ) -> tuple[Tensor, Tensor]:
        log_node, log_overhead = self.parts(h, context, batch, prior, op)
        return _segment_logsumexp(log_node, batch, log_overhead), torch.exp(log_node)


def build_readout(name: str, hidden: int, context_dim: int, dropout: float = 0.0) -> nn.Module:
    """The readout ``name`` (a key of :data:`READOUTS`)."""
    if name not in READOUTS:
        raise GnnperfError(
            f"unknown readout {name!r}; choose from {sorted(READOUTS)}{suggest(name, READOUTS)}"
        )
    return READOUTS[name](hidden, context_dim, dropout)
