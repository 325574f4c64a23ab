"""Hardware conditioning: (device spec vector, workload vector[, known-device id]) -> context + per-layer FiLM.

The standardised hardware vector ``hw`` [B, F_hw] and workload/graph vector ``u`` [B, F_graph] go through an MLP
to a per-graph context ``c`` [B, hidden]. A linear head turns ``c`` into one FiLM pair per backbone layer,
``gamma = 1 + dg`` and ``beta = db``, applied to every node's state, so the cost each op contributes depends on
the device (peak FLOP/s, bandwidth, threads...) and the workload (batch, precision, mode).

Known devices may also get a learned embedding (``num_devices`` > 0), added to the spec embedding before the
non-linearity. It lets the model absorb what the data sheet misses (e.g. a slow memory subsystem). A device the
model has not seen (``hw_id`` == -1 or >= ``num_devices``) gets a zero embedding: it is predicted from its spec
alone. Because the embedding starts at zero and is dropped at random during training (``device_dropout``), the
spec path stays a complete predictor on its own rather than leaning on the per-device correction.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class HardwareConditioning(nn.Module):
    """``forward(hw, u, hw_id) -> (context [B, hidden], [(gamma, beta)] * layers)``.

    Args:
        hw_dim: width of the hardware vector.
        graph_dim: width of the workload/graph vector ``u``.
        hidden: width of the context and of the backbone's node states.
        layers: number of backbone layers (one FiLM pair each).
        num_devices: known devices with a learned embedding; 0 for none.
        device_dropout: during training, the probability of hiding a known device's embedding (per graph).
    """

    def __init__(
        self,
        hw_dim: int,
        graph_dim: int,
        hidden: int,
        layers: int,
        num_devices: int = 0,
        device_dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.hidden, self.layers, self.num_devices = hidden, layers, num_devices
        self.device_dropout = device_dropout
        self.spec = nn.Sequential(nn.Linear(hw_dim + graph_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden))
        self.device_embedding = nn.Embedding(num_devices, hidden) if num_devices > 0 else None
        if self.device_embedding is not None:
            nn.init.zeros_(self.device_embedding.weight)
        self.film = nn.Linear(hidden, layers * 2 * hidden)
        # Start as the identity (gamma=1, beta=0) so conditioning does not disturb early training.
        nn.init.zeros_(self.film.weight)
        nn.init.zeros_(self.film.bias)

    def device_term(self, hw_id: Tensor | None, batch_size: int) -> Tensor | None:
        """The learned embedding of each graph's device [B, hidden]; zero rows for unseen or dropped devices."""
        if self.device_embedding is None or hw_id is None:
            return None
        hw_id = hw_id.view(-1).long()
        known = (hw_id >= 0) & (hw_id < self.num_devices)
        if self.training and self.device_dropout > 0:
            known = known & (torch.rand(batch_size, device=hw_id.device) >= self.device_dropout)
        emb = self.device_embedding(hw_id.clamp(0, self.num_devices - 1))
        return emb * known.unsqueeze(-1).to(emb.dtype)

    def forward(
        self, hw: Tensor, u: Tensor, hw_id: Tensor | None = None
    ) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """Context and per-layer FiLM pairs.

        Args:
            hw: standardised hardware vectors [B, hw_dim].
            u: standardised workload/graph vectors [B, graph_dim].
            hw_id: index of each graph's device in the training device list [B]; -1 for unseen; None to skip.
        """
        c = self.spec(torch.cat([hw, u], dim=-1))
        dev = self.device_term(hw_id, c.shape[0])
        if dev is not None:
            c = c + dev
        context = F.gelu(c)
        params = self.film(context).view(-1, self.layers, 2, self.hidden)
        film = [(1.0 + params[:, i, 0], params[:, i, 1]) for i in range(self.layers)]
        return context, film
