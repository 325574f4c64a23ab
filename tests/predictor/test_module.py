from functools import partial

import pytest
import pytorch_lightning as pl
import torch
from torch_geometric.loader import DataLoader

from gnnperf.errors import GnnperfError
from gnnperf.graph.features import FEATURE_VERSION
from gnnperf.predictor.module import PerfModule
from tests.predictor import make_graph, stats_of


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A module fitted 2 epochs on 40 synthetic graphs whose time grows with a node feature, and its checkpoint."""
    pl.seed_everything(0, verbose=False)
    graphs = [make_graph(5 + i % 11, seed=i, hw_id=i % 2) for i in range(40)]
    train, val = graphs[:32], graphs[32:]
    module = PerfModule(
        hidden=32,
        layers=2,
        loss="huber",
        loss_kwargs={"delta": 1.0},
        optimizer=partial(torch.optim.AdamW, lr=3e-3),
        scheduler=partial(torch.optim.lr_scheduler.StepLR, step_size=1, gamma=0.5),
        stats=stats_of(train),
        devices=["cpu-a", "cpu-b"],
    )
    trainer = pl.Trainer(
        max_epochs=2,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    val_loader = DataLoader(val, batch_size=8)
    trainer.fit(module, DataLoader(train, batch_size=8, shuffle=True), val_loader)
    path = tmp_path_factory.mktemp("ckpt") / "perf.ckpt"
    trainer.save_checkpoint(path)
    return trainer, module, val_loader, path


def test_fit_logs_epoch_metrics(fitted):
    trainer, module, val_loader, _ = fitted
    metrics = trainer.callback_metrics
    for key in ("train/loss", "val/loss", "val/mape", "val/median_ape", "val/rmse_ms", "val/spearman"):
        assert key in metrics and torch.isfinite(metrics[key]), key
    test = trainer.test(module, val_loader, verbose=False)[0]
    assert test["test/mape"] > 0 and 0 <= test["test/within_20"] <= 1
    preds = torch.cat(trainer.predict(module, val_loader))
    assert preds.shape == (8,) and (preds > 0).all()  # milliseconds, not log


def test_checkpoint_roundtrip(fitted):
    _, module, val_loader, path = fitted
    loaded = PerfModule.load(path)
    batch = next(iter(val_loader))
    module.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(batch), module(batch), rtol=0, atol=0)
    assert loaded.hparams.devices == ["cpu-a", "cpu-b"]
    assert loaded.hparams.feature_version == FEATURE_VERSION
    assert len(loaded.hparams.node_features) == batch.x.shape[1]
    torch.testing.assert_close(loaded.model.standardize["x"].mean, module.model.standardize["x"].mean)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("feature_version", FEATURE_VERSION + 1, f"checkpoint FEATURE_VERSION {FEATURE_VERSION + 1} != code"),
        ("hardware_table_version", "deadbeef", "checkpoint HARDWARE_TABLE_VERSION deadbeef != code"),
    ],
)
def test_incompatible_checkpoint_is_refused(fitted, tmp_path, key, value, message):
    checkpoint = torch.load(fitted[3], weights_only=True)
    checkpoint["hyper_parameters"][key] = value
    torch.save(checkpoint, tmp_path / "old.ckpt")
    with pytest.raises(GnnperfError, match=message):
        PerfModule.load(tmp_path / "old.ckpt")
    with pytest.raises(GnnperfError, match="not found"):
        PerfModule.load(tmp_path / "missing.ckpt")


def test_another_hardware_table_is_compatible_while_the_trained_devices_keep_their_specs(tmp_path):
    from gnnperf.predict import SHIPPED_CHECKPOINT
    from gnnperf.predictor.checkpoint import load_model

    checkpoint = torch.load(SHIPPED_CHECKPOINT, weights_only=True)
    checkpoint["hyper_parameters"]["hardware_table_version"] = (
        "deadbeef"  # e.g. an unseen GPU's spec corrected
    )
    torch.save(checkpoint, tmp_path / "table.ckpt")
    assert load_model(tmp_path / "table.ckpt")[1]["hardware_table_version"] == "deadbeef"
    checkpoint["gnnperf"]["trained_on"]["hardware_specs"]["rtx-3090"]["peak_fp32_tflops"] = 1.0
    torch.save(checkpoint, tmp_path / "specs.ckpt")
    with pytest.raises(
        GnnperfError, match=r"deadbeef != code \w+ \(hardware features changed for rtx-3090\)"
    ):
        load_model(tmp_path / "specs.ckpt")
    with pytest.raises(GnnperfError, match="hardware features changed for rtx-3090"):
        PerfModule.load(tmp_path / "specs.ckpt")


def test_a_checkpoint_of_a_cost_ablation_loads_only_under_the_same_ablation(tmp_path, monkeypatch):
    from gnnperf.graph.cost import ABLATE_VAR
    from gnnperf.predict import SHIPPED_CHECKPOINT
    from gnnperf.predictor.checkpoint import check_compatible, load_model

    monkeypatch.setenv(ABLATE_VAR, "views")  # the shipped one was costed with every rule on
    with pytest.raises(GnnperfError, match=rf"switched off \[\] != {ABLATE_VAR} \['views'\]"):
        load_model(SHIPPED_CHECKPOINT)
    checkpoint = torch.load(SHIPPED_CHECKPOINT, weights_only=True)
    checkpoint["gnnperf"]["cost_ablations"] = ["views"]  # what training under the variable records
    torch.save(checkpoint, tmp_path / "ablated.ckpt")
    assert load_model(tmp_path / "ablated.ckpt")
    check_compatible(checkpoint["hyper_parameters"], None)  # Lightning's checkpoint of the run itself
    monkeypatch.delenv(ABLATE_VAR)
    with pytest.raises(GnnperfError, match=rf"switched off \['views'\] != {ABLATE_VAR} \[\]"):
        load_model(tmp_path / "ablated.ckpt")
