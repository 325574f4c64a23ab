"""PerfModule: the LightningModule that trains :class:`PerfGNN` on log milliseconds and reports ms metrics.

The checkpoint is self-describing: hyper-parameters hold the feature name lists, op vocabulary, device list,
``feature_version`` and ``hardware_table_version``; the model's buffers hold the train-split normalisation
statistics. Loading checks versions and feature names against the running code and fails with a
:class:`GnnperfError` saying what differs. Optimizer and scheduler come in as partials (Hydra ``_partial_:
true``) and are not saved: they are needed to train, not to predict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch import Tensor

from gnnperf.predictor.checkpoint import build_model, check_compatible, code_versions, read_checkpoint
from gnnperf.predictor.model import Stats
from gnnperf.predictor.target import from_target, get_loss, to_target

OptimizerFactory = Callable[..., torch.optim.Optimizer]
SchedulerFactory = Callable[..., Any]
_STAGES = ("val", "test")


class PerfModule(pl.LightningModule):
    """Trains :class:`PerfGNN`; logs ``train/loss`` and ``{val,test}/loss`` plus ``gnnperf.eval.metrics.METRICS``.

    Args:
        hidden, layers, backbone, readout, dropout, use_agg, op_embedding_dim, heads, bidirectional,
            device_dropout, op_dropout, hardware_conditioning, node_workload: see :class:`PerfGNN`.
        device_embedding: learn an embedding per device in ``devices`` (unseen devices use the spec alone).
        loss: ``mse``, ``huber`` or ``mape`` (on log ms); ``loss_kwargs`` e.g. ``{"delta": 0.5}``.
        optimizer: partial taking ``params``; default AdamW(lr=1e-3).
        scheduler: optional partial taking ``optimizer``; stepped per epoch, ``scheduler_monitor`` for plateau.
        stats: train-split ``{key: (mean, std)}``; stored as model buffers, not hyper-parameters.
        devices: the dataset's device list (``batch.hw_id`` indexes it).
        node_features ... op_vocab, feature_version, hardware_table_version: default to the running code's;
            a checkpoint keeps its own and is checked against the code on load.
    """

    def __init__(
        self,
        hidden: int = 128,
        layers: int = 4,
        backbone: str = "gine",
        readout: str = "additive",
        dropout: float = 0.1,
        use_agg: bool = True,
        op_embedding_dim: int = 16,
        heads: int = 4,
        bidirectional: bool = True,
        device_dropout: float = 0.1,
        op_dropout: float = 0.0,
        hardware_conditioning: bool = True,
        node_workload: bool = False,
        device_embedding: bool = True,
        loss: str = "mse",
        loss_kwargs: dict[str, float] | None = None,
        optimizer: OptimizerFactory | None = None,
        scheduler: SchedulerFactory | None = None,
        scheduler_monitor: str = "val/loss",
        stats: Stats | None = None,
        devices: Sequence[str] | None = None,
        node_features: Sequence[str] | None = None,
        edge_features: Sequence[str] | None = None,
        graph_features: Sequence[str] | None = None,
        hw_features: Sequence[str] | None = None,
        agg_features: Sequence[str] | None = None,
        op_vocab: Sequence[str] | None = None,
        feature_version: int | None = None,
        hardware_table_version: str | None = None,
    ) -> None:
        super().__init__()
        code = code_versions()
        # Resolve defaults before saving so the checkpoint records what was used, not "None".
        devices = list(devices or [])
        node_features = list(node_features or code["node_features"])
        edge_features = list(edge_features or code["edge_features"])
        graph_features = list(graph_features or code["graph_features"])
        hw_features = list(hw_features or code["hw_features"])
        agg_features = list(code["agg_features"] if agg_features is None else agg_features)
        op_vocab = list(op_vocab or code["op_vocab"])
        feature_version = code["feature_version"] if feature_version is None else feature_version
        if hardware_table_version is None:
            hardware_table_version = code["hardware_table_version"]
        loss_kwargs = dict(loss_kwargs or {})
        self.save_hyperparameters(ignore=["optimizer", "scheduler", "stats"], logger=False)

        self.loss_fn = get_loss(loss, **loss_kwargs)
        self.optimizer_factory = optimizer or partial(torch.optim.AdamW, lr=1e-3)
        self.scheduler_factory = scheduler
        self.model = build_model(self.hparams, stats)
        self._outputs: dict[str, list[tuple[Tensor, Tensor]]] = {s: [] for s in _STAGES}
        self.extras: dict[str, Any] = {}  # a loaded predictor checkpoint's ``gnnperf`` entry

    def forward(self, batch) -> Tensor:
        """Predicted log ms [B]."""
        return self.model(batch)[0]

    def training_step(self, batch, batch_idx: int) -> Tensor:
        loss = self.loss_fn(self(batch), to_target(batch.y))
        self.log("train/loss", loss, on_step=False, on_epoch=True, prog_bar=True, batch_size=batch.num_graphs)
        return loss

    def _eval_step(self, batch, stage: str) -> None:
        self._outputs[stage].append((self(batch).detach(), to_target(batch.y).detach()))

    def validation_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def test_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def _epoch_end(self, stage: str) -> None:
        """Metrics over the whole epoch's predictions (a mean of per-batch MAPEs would weight batches, not samples)."""
        from gnnperf.eval.metrics import regression_metrics

        outputs, self._outputs[stage] = self._outputs[stage], []
        if not outputs:
            return
        pred = torch.cat([p for p, _ in outputs]).float()
        target = torch.cat([t for _, t in outputs]).float()
        metrics = regression_metrics(from_target(pred).cpu().numpy(), from_target(target).cpu().numpy())
        metrics["loss"] = self.loss_fn(pred, target).item()
        for key, value in metrics.items():
            if key != "n":
                self.log(f"{stage}/{key}", float(value), prog_bar=key == "mape")

    def on_validation_epoch_end(self) -> None:
        self._epoch_end("val")

    def on_test_epoch_end(self) -> None:
        self._epoch_end("test")

    def predict_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> Tensor:
        """Predicted iteration time in ms [B]."""
        return from_target(self(batch))

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer_factory(params=self.parameters())
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(optimizer=optimizer)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {
                "scheduler": scheduler,
                "monitor": self.hparams.scheduler_monitor,
                "interval": "epoch",
            },
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Refuse a checkpoint made with other features, or specs of its devices (also on Trainer resume).

        A predictor checkpoint's ``gnnperf`` entry (see :func:`gnnperf.predictor.checkpoint.save_predictor`) is kept as
        ``self.extras``.
        """
        check_compatible(checkpoint.get("hyper_parameters", {}), checkpoint.get("gnnperf"))
        self.extras = dict(checkpoint.get("gnnperf", {}))

    @classmethod
    def load(cls, path: str | Path, map_location: str | torch.device = "cpu", **overrides: Any) -> PerfModule:
        """A trained module from a checkpoint, in eval mode; GnnperfError if missing or incompatible."""
        read_checkpoint(path)  # a user error in one line for a file that is not a predictor checkpoint
        module = cls.load_from_checkpoint(path, map_location=map_location, weights_only=True, **overrides)
        return module.eval()
