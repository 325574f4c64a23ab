"""GNN backbones over op graphs, one registry; every backbone uses edge features and per-graph FiLM.

A backbone maps encoded node states ``h`` [N, hidden] to new node states of the same width. Each layer is
``h + dropout(gelu(FiLM(LayerNorm(conv(h)))))``: the residual keeps deep stacks trainable, LayerNorm keeps the
scale of states independent of fan-in, and FiLM lets the device and workload scale every op's features
(``gamma[batch] * m + beta[batch]``), so the same op costs differently on different hardware.
``gps`` already has residuals and norms inside GPSConv; FiLM is applied to its output.

Register a new backbone with :func:`register_backbone`; a duplicate name raises.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torch import Tensor, nn
from torch.nn import functional as F

from gnnperf.errors import GnnperfError, suggest

Film = Sequence[tuple[Tensor, Tensor]]
# factory(hidden, edge_dim, heads, dropout) -> one block
BlockFactory = Callable[[int, int, int, float], nn.Module]

BACKBONES: dict[str, BlockFactory] = {}


def register_backbone(name: str) -> Callable[[BlockFactory], BlockFactory]:
    """Decorator adding a block factory under ``name``; registering a name twice is a bug and raises."""

    def add(factory: BlockFactory) -> BlockFactory:
        if name in BACKBONES:
            raise ValueError(f"backbone {name!r} is already registered")
        BACKBONES[name] = factory
        return factory

    return add


def _film(m: Tensor, batch: Tensor, film: tuple[Tensor, Tensor] | None) -> Tensor:
    if film is None:
        return m
    gamma, beta = film
    return m * gamma[batch] + beta[batch]


class ConvBlock(nn.Module):
    """``h + dropout(gelu(FiLM(LayerNorm(conv(h, edge_index, edge_attr)))))``."""

    def __init__(self, conv: nn.Module, hidden: int, dropout: float) -> None:
        super().__init__()
        self.conv = conv
        self.norm = nn.LayerNorm(hidden)
        self.dropout = dropout

    def forward(
        self,
        h: Tensor,
        edge_index: Tensor,
        edge_attr: Tensor,
        batch: Tensor,
        film: tuple[Tensor, Tensor] | None,
    ) -> Tensor:
        m = _film(self.norm(self.conv(h, edge_index, edge_attr)), batch, film)
        return h + F.dropout(F.gelu(m), self.dropout, self.training)


class GPSBlock(nn.Module):
    """GPSConv (local GINE + global multi-head attention, residuals and node-wise LayerNorm inside), then FiLM."""

    def __init__(self, gps: nn.Module) -> None:
        super().__init__()
        self.gps = gps

    def forward(
        self,
        h: Tensor,
        edge_index: Tensor,
        edge_attr: Tensor,
        batch: Tensor,
        film: tuple[Tensor, Tensor] | None,
    ) -> Tensor:
        return _film(self.gps(h, edge_index, batch, edge_attr=edge_attr), batch, film)


def _gine(hidden: int, edge_dim: int):
    from torch_geometric.nn import GINEConv

    mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, hidden))
    return GINEConv(mlp, train_eps=True, edge_dim=edge_dim)


def _head_dim(hidden: int, heads: int) -> int:
    if heads < 1 or hidden % heads:
        raise GnnperfError(f"hidden={hidden} must be a positive multiple of heads={heads}")
    return hidden // heads


@register_backbone("gine")
def gine_block(hidden: int, edge_dim: int, heads: int, dropout: float) -> nn.Module:
    """GINEConv: sum of ReLU(x_j + W e_ji) over inputs, then a 2-layer MLP; ``heads`` is unused."""
    return ConvBlock(_gine(hidden, edge_dim), hidden, dropout)


@register_backbone("gatv2")
def gatv2_block(hidden: int, edge_dim: int, heads: int, dropout: float) -> nn.Module:
    """GATv2Conv: dynamic attention over inputs (and a self loop) with edge features, ``heads`` concatenated."""
    from torch_geometric.nn import GATv2Conv

    conv = GATv2Conv(hidden, _head_dim(hidden, heads), heads=heads, edge_dim=edge_dim, dropout=dropout)
    return ConvBlock(conv, hidden, dropout)


@register_backbone("transformer")
def transformer_block(hidden: int, edge_dim: int, heads: int, dropout: float) -> nn.Module:
    """TransformerConv: scaled dot-product attention over inputs with edge features in keys and values."""
    from torch_geometric.nn import TransformerConv

    conv = TransformerConv(
        hidden, _head_dim(hidden, heads), heads=heads, edge_dim=edge_dim, beta=True, dropout=dropout
    )
    return ConvBlock(conv, hidden, dropout)


@register_backbone("gps")
def gps_block(hidden: int, edge_dim: int, heads: int, dropout: float) -> nn.Module:
    """GPSConv wrapping GINEConv with multi-head attention over all nodes of a graph.

    Attention is dense per graph (memory ~ batch x max_nodes^2 x heads); prefer the others for very large graphs.
    """
    from torch_geometric.nn import GPSConv

    _head_dim(hidden, heads)
    gps = GPSConv(
        hidden,
        _gine(hidden, edge_dim),
        heads=heads,
        dropout=dropout,
        act="gelu",
        norm="layer_norm",
        norm_kwargs={"mode": "node"},
        attn_kwargs={"dropout": dropout},
    )
    return GPSBlock(gps)


class Backbone(nn.Module):
    """A stack of registered blocks; ``forward(h, edge_index, edge_attr, batch, film) -> h``."""

    def __init__(self, blocks: Sequence[nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(
        self, h: Tensor, edge_index: Tensor, edge_attr: Tensor, batch: Tensor, film: Film | None = None
    ) -> Tensor:
        """Node states after all layers.

        Args:
            h: encoded node states [N, hidden].
            edge_index: [2, E] source -> destination.
            edge_attr: encoded edge features [E, edge_dim].
            batch: graph index of each node [N].
            film: one (gamma, beta) pair of [B, hidden] tensors per layer, or None for no conditioning.
        """
        if film is not None and len(film) != len(self.blocks):
            raise ValueError(f"film has {len(film)} layers, backbone has {len(self.blocks)}")
        for i, block in enumerate(self.blocks):
            h = block(h, edge_index, edge_attr, batch, None if film is None else film[i])
        return h


def build(
    name: str, hidden: int, layers: int, dropout: float, edge_dim: int | None = None, heads: int = 4
) -> Backbone:
    """The backbone ``name`` with ``layers`` blocks of width ``hidden``.

    Args:
        name: a key of :data:`BACKBONES` (``gine``, ``gatv2``, ``transformer``, ``gps``).
        hidden: node state width.
        layers: number of message-passing blocks.
        dropout: dropout on each block's update (and attention weights where there are any).
        edge_dim: width of ``edge_attr`` given to forward (default ``hidden``).
        heads: attention heads (``gatv2``, ``transformer``, ``gps``); must divide ``hidden``.
    """
    if name not in BACKBONES:
        raise GnnperfError(
            f"unknown backbone {name!r}; choose from {sorted(BACKBONES)}{suggest(name, BACKBONES)}"
        )
    if layers < 1:
        raise GnnperfError(f"backbone needs at least one layer, got layers={layers}")
    factory = BACKBONES[name]
    return Backbone([factory(hidden, edge_dim or hidden, heads, dropout) for _ in range(layers)])


__all__ = ["BACKBONES", "Backbone", "build", "register_backbone"]
