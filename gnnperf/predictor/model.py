"""PerfGNN: a PyG batch of op graphs on devices -> predicted log milliseconds per graph.

Pipeline: standardise inputs with train-split statistics (buffers, so checkpoints carry them) -> encode nodes
(features + an op-type embedding) and edges -> hardware/workload conditioning (context + per-layer FiLM) ->
GNN backbone -> readout. Edges are used in both directions by default (an extra 0/1 column tells them
apart): an op's cost depends on what consumes its output (fusion, layout) as well as on its inputs.
Edge features reach the backbone standardised but not encoded: each layer's own linear edge projection sees
all they hold, and projecting 8 columns instead of ``hidden`` per edge and layer halves the cost of a forward.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch
from torch import Tensor, nn

from gnnperf.errors import GnnperfError
from gnnperf.graph.features import OP_VOCAB, WORKLOAD_FEATURES
from gnnperf.predictor.backbones import build
from gnnperf.predictor.conditioning import HardwareConditioning
from gnnperf.predictor.readout import build_readout
from gnnperf.predictor.roofline import RooflinePrior

STAT_KEYS = ("x", "edge_attr", "u", "hw", "agg")
Stats = Mapping[str, Sequence[Tensor]]
# Standardised rare one-hot features can reach |z| ~ 100; clipping keeps one odd op from dominating a layer.
_CLIP = 10.0


class Breakdown(NamedTuple):
    """Additive readout's prediction in ms: ``node_ms.sum() per graph + overhead_ms == total_ms``."""

    node_ms: Tensor  # [N]
    overhead_ms: Tensor  # [B]
    total_ms: Tensor  # [B]


class Standardize(nn.Module):
    """``clip((v - mean) / std)`` with mean/std buffers; features constant over the train split become 0.

    A feature that never varied in training (an op type no training graph has, a dtype never seen) carries
    nothing the model could have learned; passing it on would feed untrained weights (the held-out LSTM
    family in experiments/cpu_holdout_family). Its std is stored as infinity, so ``(v - mean) / std == 0``.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    def set_stats(self, mean: Tensor, std: Tensor, name: str) -> None:
        mean, std = torch.as_tensor(mean, dtype=torch.float32), torch.as_tensor(std, dtype=torch.float32)
        if mean.shape != self.mean.shape or std.shape != self.std.shape:
            raise ValueError(
                f"stats[{name!r}] has shape {tuple(mean.shape)}/{tuple(std.shape)}, model expects {tuple(self.mean.shape)}"
            )
        self.mean.copy_(mean)
        self.std.copy_(torch.where(std > 1e-6, std, torch.full_like(std, float("inf"))))

    @property
    def varied(self) -> Tensor:
        """[dim] bool: which features varied over the train split."""
        return torch.isfinite(self.std)

    def forward(self, v: Tensor) -> Tensor:
        return ((v - self.mean) / self.std).clamp(-_CLIP, _CLIP)


class PerfGNN(nn.Module):
    """Graph + device + workload -> log ms.

    Args:
        node_dim, edge_dim, graph_dim, hw_dim, agg_dim: widths of ``x``, ``edge_attr``, ``u``, ``hw``, ``agg``.
        hidden: width of node states and of the context.
        layers: backbone layers.
        backbone: a key of ``backbones.BACKBONES``.
        readout: a key of ``readout.READOUTS`` (``additive`` gives a per-op breakdown).
        dropout: dropout in the backbone and readout.
        num_devices: known devices with a learned embedding (``batch.hw_id`` indexes them); 0 for none.
        use_agg: feed the aggregate features ``batch.agg`` to the readout's context (ignored if ``agg_dim`` is 0).
        op_embedding_dim: width of the learned op-type embedding (0 for none).
        num_ops: size of the op vocabulary ``batch.op`` indexes.
        heads: attention heads of attention backbones.
        bidirectional: pass messages along and against data flow.
        device_dropout: see :class:`HardwareConditioning`.
        hardware_conditioning: feed the hardware vector (and device embedding) to the conditioning. False: the
            conditioning sees the workload alone, so every learned factor, fixed cost and overhead is the same on
            every device, and the device enters only through the roofline prior of a roofline readout: what an
            unseen GPU costs then follows its data sheet instead of an MLP extrapolating from a few training GPUs
            (experiments/torchvision_lodo). Needs a readout with a prior.
        op_dropout: during training, the probability of hiding each op type for a batch, the way an op type
            unseen in training is hidden (its one-hot column zero, no embedding), so that the network learns to
            cost an op from its numeric features alone (the held-out LSTMs of experiments/cpu_holdout_family).
        node_workload: append each graph's standardised workload features (the leading ``WORKLOAD_FEATURES``
            of ``u``: batch, precision, mode, timed region, layout...) to every op's encoder input, so that the
            first MLP can form per-op interactions such as grouped convolution x channels-last. FiLM scales all
            ops of a graph alike and did not learn that one (experiments/timm_train_family, grouped_conv.py).
            Tried there: no gain (13.7 vs 13.2% MAPE on held-out families), so off by default.
        stats: train-split ``{key: (mean, std)}`` for ``x, edge_attr, u, hw`` and ``agg``; None leaves the
            identity (e.g. before loading a state dict, which restores them).
    """

    def __init__(
        self,
        node_dim: int,
        edge_dim: int,
        graph_dim: int,
        hw_dim: int,
        agg_dim: int,
        hidden: int = 128,
        layers: int = 4,
        backbone: str = "gine",
        readout: str = "additive",
        dropout: float = 0.1,
        num_devices: int = 0,
        use_agg: bool = True,
        op_embedding_dim: int = 16,
        num_ops: int = len(OP_VOCAB),
        heads: int = 4,
        bidirectional: bool = True,
        device_dropout: float = 0.1,
        op_dropout: float = 0.0,
        hardware_conditioning: bool = True,
        node_workload: bool = False,
        stats: Stats | None = None,
    ) -> None:
        super().__init__()
        if hidden < 1 or layers < 1 or not 0 <= dropout < 1 or heads < 1:
            raise GnnperfError(
                f"bad model size: hidden={hidden}, layers={layers}, heads={heads} must be at least 1 and "
                f"dropout={dropout} in [0, 1)"
            )
        self.num_ops, self.op_dropout = num_ops, op_dropout
        self.node_workload = len(WORKLOAD_FEATURES) if node_workload else 0
        self.hardware_conditioning = hardware_conditioning
        self.use_agg = use_agg and agg_dim > 0
        self.bidirectional = bidirectional
        dims = {"x": node_dim, "edge_attr": edge_dim, "u": graph_dim, "hw": hw_dim, "agg": agg_dim}
        self.standardize = nn.ModuleDict({k: Standardize(d) for k, d in dims.items()})
        if stats is not None:
            self.set_stats(stats)
        self.op_embedding = nn.Embedding(num_ops, op_embedding_dim) if op_embedding_dim > 0 else None
        self.node_encoder = nn.Sequential(
            nn.Linear(node_dim + op_embedding_dim + self.node_workload, hidden),
            nn.GELU(),
            nn.Linear(hidden, hidden),
        )
        self.conditioning = HardwareConditioning(
            hw_dim, graph_dim, hidden, layers, num_devices, device_dropout
        )
        self.agg_encoder = nn.Sequential(nn.Linear(agg_dim, hidden), nn.GELU()) if self.use_agg else None
        self.backbone = build(
            backbone, hidden, layers, dropout, edge_dim=edge_dim + bidirectional, heads=heads
        )
        self.readout = build_readout(readout, hidden, hidden * (2 if self.use_agg else 1), dropout)
        self.prior = RooflinePrior() if getattr(self.readout, "needs_prior", False) else None
        if self.prior is None and not hardware_conditioning:
            raise GnnperfError(
                f"hardware_conditioning=false leaves readout {readout!r} blind to the device; "
                "use a readout with a roofline prior (roofline*, power_law, anchored, opcost)"
            )

    def set_stats(self, stats: Stats) -> None:
        """Load train-split normalisation statistics ``{key: (mean, std)}`` into the buffers."""
        required = [k for k in STAT_KEYS if k != "agg" or self.use_agg]
        missing = [k for k in required if k not in stats]
        if missing:
            raise ValueError(f"stats lack {missing}; expected keys {list(STAT_KEYS)}")
        for key in STAT_KEYS:
            if key in stats:
                mean, std = stats[key]
                self.standardize[key].set_stats(mean, std, key)

    @property
    def seen_ops(self) -> Tensor:
        """[num_ops] bool: op types present in the train split (the others get no embedding)."""
        return self.standardize["x"].varied[: self.num_ops]

    def _encode(self, batch) -> tuple[Tensor, Tensor, Tensor]:
        """(node states [N, hidden], readout context [B, C], graph index of each node [N])."""
        x = self.standardize["x"](batch.x)
        # The op one-hot columns lead x in OP_VOCAB order: an op type unseen in training gets no embedding.
        known = self.seen_ops
        if self.training and self.op_dropout > 0:
            hide = torch.rand(self.num_ops, device=x.device) < self.op_dropout
            known = known & ~hide
            x = torch.cat([x[:, : self.num_ops] * ~hide, x[:, self.num_ops :]], dim=-1)
        if self.op_embedding is not None:
            x = torch.cat([x, self.op_embedding(batch.op) * known[batch.op].unsqueeze(-1)], dim=-1)
        node_batch = getattr(batch, "batch", None)
        if node_batch is None:  # a single Data, not a Batch
            node_batch = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        u = self.standardize["u"](batch.u)
        if self.node_workload:
            x = torch.cat([x, u[node_batch, : self.node_workload]], dim=-1)
        h = self.node_encoder(x)
        edge_index = batch.edge_index
        edge_attr = self.standardize["edge_attr"](batch.edge_attr)
        if self.bidirectional:
            edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
            along, against = (torch.full_like(edge_attr[:, :1], v) for v in (0.0, 1.0))
            edge_attr = torch.cat([torch.cat([edge_attr, along], 1), torch.cat([edge_attr, against], 1)])
        hw, hw_id = self.standardize["hw"](batch.hw), getattr(batch, "hw_id", None)
        if not self.hardware_conditioning:  # every device looks like the train-split mean (0, standardised)
            hw, hw_id = torch.zeros_like(hw), None
        context, film = self.conditioning(hw, u, hw_id)
        h = self.backbone(h, edge_index, edge_attr, node_batch, film)
        if self.agg_encoder is not None:
            context = torch.cat([context, self.agg_encoder(self.standardize["agg"](batch.agg))], dim=-1)
        return h, context, node_batch

    def _readout_inputs(self, batch, node_batch: Tensor) -> dict[str, Tensor | tuple[Tensor, Tensor]]:
        """What the readout takes beyond node states and context: the roofline prior, the op types."""
        inputs = {}
        if self.prior is not None:
            inputs["prior"] = self.prior(batch, node_batch)
        if getattr(self.readout, "needs_op", False):
            inputs["op"] = batch.op
        return inputs

    def forward(self, batch) -> tuple[Tensor, Tensor | None]:
        """``(log_ms [B], per-node contribution in ms [N] or None)`` for a PyG batch (see issue 4's format)."""
        h, context, node_batch = self._encode(batch)
        return self.readout(h, context, node_batch, **self._readout_inputs(batch, node_batch))

    @torch.no_grad()
    def breakdown(self, batch) -> Breakdown:
        """Per-op predicted ms, per-graph overhead ms and total ms (additive readout only; call ``eval()`` first)."""
        if not hasattr(self.readout, "parts"):
            raise GnnperfError(
                "this predictor's readout has no per-op breakdown; train with readout=additive, roofline* or opcost"
            )
        h, context, node_batch = self._encode(batch)
        log_node, log_overhead = self.readout.parts(
            h, context, node_batch, **self._readout_inputs(batch, node_batch)
        )
        node_ms, overhead_ms = torch.exp(log_node), torch.exp(log_overhead)
        total_ms = overhead_ms.clone().index_add_(0, node_batch, node_ms)
        return Breakdown(node_ms, overhead_ms, total_ms)


# Nodes per forward pass at prediction time: a CLI query over many devices and batches (and each batch's cap,
# gnnperf.predictor.batch_cap) is thousands of graphs; one pass over all of them would hold every activation.
NODES_PER_PASS = 200_000


@torch.inference_mode()
def predict_samples(model: nn.Module, samples: Sequence) -> tuple[Tensor, list[Tensor] | None]:
    """Predicted ms per sample (float64) and, from readouts with per-op terms, each sample's per-op ms.

    The samples (PyG ``Data`` of :func:`gnnperf.data.dataset.sample_data`) go through ``model`` in passes of at
    most :data:`NODES_PER_PASS` nodes (or one sample), in order.
    """
    from torch_geometric.data import Batch

    passes: list[list] = [[]]
    nodes = 0
    for sample in samples:
        if passes[-1] and nodes + sample.num_nodes > NODES_PER_PASS:
            passes.append([])
            nodes = 0
        passes[-1].append(sample)
        nodes += sample.num_nodes
    total, per_op = [], []
    for part in passes:
        batch = Batch.from_data_list(part)
        log_ms, node_ms = model(batch)
        total.append(torch.exp(log_ms).double())
        if node_ms is not None:
            per_op += list(torch.split(node_ms, batch.ptr.diff().tolist()))
    return torch.cat(total), per_op or None
