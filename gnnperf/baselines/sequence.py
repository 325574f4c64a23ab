"""Op-sequence baseline in the style of ETS: sliding windows of consecutive ops, each window's time summed.

Ops are taken in topological order (the ONNX node order). Every window of ``window`` consecutive ops (each graph
padded at its end with ``window - 1`` zero rows, so a graph with n ops has n windows) is flattened, joined with
the sample's context (``hw`` + ``agg``), and a small MLP predicts the window's log contribution ``c_w``; the
prediction is ``log sum_w exp(c_w)`` (a per-graph logsumexp), trained with MSE on log ms.

Two choices differ from a literal "MLP -> softplus -> sum": the window's first layer is factored into a shared
per-op linear projection (``op_dim`` per op) so the cost stays linear in the number of ops, and contributions are
``exp`` of the MLP output rather than softplus: inputs are log FLOPs and log bytes, and only an exponential
output lets a window with 10x the FLOPs take 10x the time across many decades; logsumexp keeps the sum stable.
Training: Adam with cosine decay for a fixed number of epochs on CPU, seeded (a forked torch RNG, so the global
seed is left alone). Features are standardised with train statistics; the state carries them. Fit and predict
use one torch thread by default (``num_threads``): the matrices are small, and on a shared CPU extra threads
spin-wait for each other and were several times slower here; one thread also keeps results machine-independent.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

from gnnperf.baselines.registry import Baseline, BaselineData, check_training_data, register_baseline
from gnnperf.data.stats import MIN_SPAN, STD_FLOOR
from gnnperf.errors import GnnperfError

PREDICT_CHUNK = 256  # graphs per forward pass at predict time
CLIP = 10.0  # standardised context values are clipped here, as the GNN's (gnnperf.predictor.model)


class _WindowNet(nn.Module):
    def __init__(self, n_op: int, n_ctx: int, window: int, op_dim: int, hidden: int) -> None:
        super().__init__()
        self.window = window
        self.op_proj = nn.Linear(n_op, op_dim)
        self.win_proj = nn.Linear(window * op_dim, hidden, bias=False)
        self.ctx_proj = nn.Linear(n_ctx, hidden)
        self.mlp = nn.Sequential(nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(
        self, rows: torch.Tensor, win_start: torch.Tensor, win_graph: torch.Tensor, ctx: torch.Tensor
    ) -> torch.Tensor:
        """Log of the summed window contributions, one per graph of ``ctx``."""
        emb = self.op_proj(rows)
        flat = torch.cat([emb[win_start + j] for j in range(self.window)], dim=1)
        out = self.mlp(self.win_proj(flat) + self.ctx_proj(ctx)[win_graph]).squeeze(1)
        n = ctx.shape[0]
        peak = torch.full((n,), -math.inf).scatter_reduce(0, win_graph, out.detach(), "amax")
        total = torch.zeros(n).index_add(0, win_graph, torch.exp(out - peak[win_graph]))
        return torch.log(total) + peak


@contextmanager
def _threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch CPU threads (None: leave as is), restoring the count afterwards."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _unvaried(std: np.ndarray, span: np.ndarray | None = None) -> np.ndarray:
    """``std`` with the columns that did not vary in training set to infinity, so they standardise to 0.

    With a std of 1 instead, a held-out device's value in a column every training row shared fed weights no
    gradient shaped; with the column's own tiny std (two CPU hosts' memory, 25.33 and 25.32 GB), a third host's
    25.28 GB was 16 deviations out: either way the baseline put a third CPU host 18x too fast
    (experiments/cpu_unseen_host). A column whose training values ``span`` under ``MIN_SPAN`` counts as unvaried, as a
    device column does for the GNN (``gnnperf.data.stats``).
    """
    still = std <= STD_FLOOR if span is None else (std <= STD_FLOOR) | (span < MIN_SPAN)
    return np.where(still, np.inf, std)


def _stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x.mean(axis=0), _unvaried(x.std(axis=0), np.ptp(x, axis=0))


def _seq_stats(seqs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_stats` of the rows of every sequence, without concatenating them (float64 sums per sequence)."""
    n = sum(len(s) for s in seqs)
    total = sum(s.sum(axis=0, dtype=np.float64) for s in seqs)
    mean = total / n
    var = sum(((s - mean) ** 2).sum(axis=0) for s in seqs) / n
    return mean, _unvaried(np.sqrt(var))


def _unique(seqs: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    """(distinct arrays, each sequence's position among them): samples of one graph at one batch size share
    the dataset's cached feature array, so it is standardised and packed once, not once per device."""
    first: dict[tuple, int] = {}
    distinct: list[np.ndarray] = []
    where = np.empty(len(seqs), dtype=np.int64)
    for i, s in enumerate(seqs):  # views of one buffer are new array objects: key on the memory they show
        key = (s.__array_interface__["data"][0], s.shape, s.strides, s.dtype.str)
        j = first.setdefault(key, len(distinct))
        if j == len(distinct):
            distinct.append(s)
        where[i] = j
    return distinct, where


@register_baseline("sequence")
class SequenceBaseline(Baseline):
    """Sliding-window MLP over the op sequence with hardware/aggregate context."""

    def __init__(
        self,
        window: int = 3,
        op_dim: int = 16,
        hidden: int = 64,
        epochs: int = 30,
        batch_graphs: int = 32,
        lr: float = 3e-3,
        weight_decay: float = 1e-5,
        seed: int = 0,
        num_threads: int | None = 1,
    ) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.config = {
            "window": window,
            "op_dim": op_dim,
            "hidden": hidden,
            "epochs": epochs,
            "batch_graphs": batch_graphs,
            "lr": lr,
            "weight_decay": weight_decay,
            "seed": seed,
            "num_threads": num_threads,
        }
        self.net: _WindowNet | None = None
        self.stats: dict[str, np.ndarray] = {}
        self.op_columns: tuple[str, ...] = ()
        self.offset = 0.0  # log-ms shift so the untrained net starts at the train mean

    # -- data ----------------------------------------------------------------------------------------------
    def _context(self, data: BaselineData) -> np.ndarray:
        return np.concatenate([data.hw, data.agg], axis=1).astype(np.float32)

    def _pack(self, data: BaselineData) -> tuple[torch.Tensor, np.ndarray, np.ndarray, torch.Tensor]:
        """(standardised padded op rows, each graph's first row, op counts, standardised context)."""
        if data.op_seq is None:
            raise GnnperfError("baseline 'sequence' needs per-op features (op_seq)")
        if data.op_columns != self.op_columns:
            raise GnnperfError("baseline 'sequence': per-op feature columns differ from the fitted ones")
        ctx = self._context(data)
        if ctx.shape[1] != len(self.stats["ctx_mean"]):
            raise GnnperfError("baseline 'sequence': hardware/aggregate features differ from the fitted ones")
        pad = np.zeros((self.config["window"] - 1, len(self.op_columns)), dtype=np.float32)
        mean, std = self.stats["op_mean"], self.stats["op_std"]
        distinct, where = _unique(data.op_seq)
        parts = [p for s in distinct for p in (((s - mean) / std).astype(np.float32), pad)]
        lengths = np.array([len(s) for s in distinct])
        starts = np.concatenate([[0], np.cumsum(lengths + len(pad))[:-1]])[where]
        lengths = lengths[where]
        ctx = np.clip((ctx - self.stats["ctx_mean"]) / self.stats["ctx_std"], -CLIP, CLIP)
        return (
            torch.from_numpy(np.concatenate(parts)),
            starts,
            lengths,
            torch.from_numpy(ctx.astype(np.float32)),
        )

    def _index(
        self, starts: np.ndarray, lengths: np.ndarray, graphs: np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Row indices of ``graphs``' padded ops, and each window's local first row and local graph."""
        lens = lengths[graphs]
        padded = lens + self.config["window"] - 1
        local = np.cumsum(padded) - padded
        rows = np.repeat(starts[graphs] - local, padded) + np.arange(padded.sum())
        win_start = np.repeat(local, lens) + np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
        win_graph = np.repeat(np.arange(len(graphs)), lens)
        return torch.from_numpy(rows), torch.from_numpy(win_start), torch.from_numpy(win_graph)

    def _forward(self, packed: tuple, graphs: np.ndarray) -> torch.Tensor:
        x, starts, lengths, ctx = packed
        rows, win_start, win_graph = self._index(starts, lengths, graphs)
        return self.net(x[rows], win_start, win_graph, ctx[torch.from_numpy(graphs)]) + self.offset

    # -- API -----------------------------------------------------------------------------------------------
    def fit(self, train: BaselineData) -> SequenceBaseline:
        with _threads(self.config["num_threads"]):
            return self._fit(train)

    def _fit(self, train: BaselineData) -> SequenceBaseline:
        t = check_training_data(train, self.name)
        if train.op_seq is None:
            raise GnnperfError("baseline 'sequence' needs per-op features (op_seq)")
        cfg = self.config
        self.op_columns = tuple(train.op_columns)
        op_mean, op_std = _seq_stats(train.op_seq)
        ctx_mean, ctx_std = _stats(self._context(train).astype(np.float64))
        self.stats = {"op_mean": op_mean, "op_std": op_std, "ctx_mean": ctx_mean, "ctx_std": ctx_std}
        packed = self._pack(train)
        target = torch.from_numpy(np.log(t).astype(np.float32))
        # Untrained outputs are about 0 per window, so the sum starts near log(n_windows); shift to the mean.
        self.offset = float(np.mean(np.log(t)) - np.mean(np.log(packed[2])))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg["seed"])
            self.net = _WindowNet(
                len(self.op_columns), packed[3].shape[1], cfg["window"], cfg["op_dim"], cfg["hidden"]
            )
        rng = np.random.default_rng(cfg["seed"])
        n, size = len(train), cfg["batch_graphs"]
        steps = cfg["epochs"] * math.ceil(n / size)
        opt = torch.optim.Adam(self.net.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(steps, 1))
        self.net.train()
        for _ in range(cfg["epochs"]):
            order = rng.permutation(n)
            for lo in range(0, n, size):
                graphs = order[lo : lo + size]
                loss = torch.mean((self._forward(packed, graphs) - target[graphs]) ** 2)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
        self.net.eval()
        return self

    def predict(self, data: BaselineData) -> np.ndarray:
        self._require_fitted(self.net is not None)
        packed = self._pack(data)
        out = []
        with torch.no_grad(), _threads(self.config["num_threads"]):
            for lo in range(0, len(data), PREDICT_CHUNK):
                out.append(self._forward(packed, np.arange(lo, min(lo + PREDICT_CHUNK, len(data)))))
        return np.exp(torch.cat(out).double().numpy())

    def state_dict(self) -> dict[str, Any]:
        self._require_fitted(self.net is not None)
        return {
            "config": dict(self.config),
            "stats": {k: np.asarray(v) for k, v in self.stats.items()},
            "op_columns": list(self.op_columns),
            "offset": self.offset,
            "n_ctx": len(self.stats["ctx_mean"]),
            "net": {k: v.detach().cpu().numpy().copy() for k, v in self.net.state_dict().items()},
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SequenceBaseline:
        model = cls(**state["config"])
        cfg = model.config
        model.stats = {k: np.asarray(v) for k, v in state["stats"].items()}
        model.op_columns = tuple(state["op_columns"])
        model.offset = float(state["offset"])
        model.net = _WindowNet(
            len(model.op_columns), state["n_ctx"], cfg["window"], cfg["op_dim"], cfg["hidden"]
        )
        model.net.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in state["net"].items()})
        model.net.eval()
        return model
