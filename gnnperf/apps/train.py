"""``gnnperf-train``: fit the GNN, test it beside the baselines, save a self-describing predictor checkpoint."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from gnnperf.apps import CONF_DIR, check_command_line, check_data_split, user_errors
from gnnperf.errors import GnnperfError, number

log = logging.getLogger("gnnperf.train")


def check_before_fit(cfg: DictConfig) -> None:
    """Values that would otherwise fail (or train nothing) only after the data is processed: one line now.

    It needs no data, so it also runs on every job of a sweep before the first one starts.
    """
    from gnnperf.baselines import get_baseline
    from gnnperf.predictor.fallback import check_fallback_name

    if cfg.get("unseen_op_fallback"):
        check_fallback_name(str(cfg.unseen_op_fallback))
    if not 0 < number(cfg.interval, "interval", float) < 1:
        raise GnnperfError(f"interval: expected a coverage between 0 and 1, got {cfg.interval}")
    check_data_split(cfg)
    number(cfg.trainer.max_epochs, "trainer.max_epochs", minimum=1)  # 0 would save an untrained network
    for key in ("hidden", "layers", "heads"):  # the network's own check runs after the data is processed
        if cfg.model.get(key) is not None:
            number(cfg.model[key], f"model.{key}", minimum=1)
    for key in ("dropout", "device_dropout", "op_dropout"):
        value = cfg.model.get(key)
        if value is not None and not 0 <= number(value, f"model.{key}", float) < 1:
            raise GnnperfError(f"model.{key}: expected a rate in [0, 1), got {value!r}")
    lr = (cfg.model.get("optimizer") or {}).get("lr")
    if lr is not None and not number(lr, "model.optimizer.lr", float) > 0:
        raise GnnperfError(f"model.optimizer.lr: expected a positive learning rate, got {lr!r}")
    for name in cfg.get("baselines") or []:
        get_baseline(str(name))
    target = str((cfg.get("logger") or {}).get("_target_", ""))
    if target.endswith("TensorBoardLogger"):
        import importlib.util

        if not any(importlib.util.find_spec(m) for m in ("tensorboard", "tensorboardX")):
            raise GnnperfError("logger=tensorboard needs the tensorboard package: pip install tensorboard")


def train(cfg: DictConfig) -> dict[str, Any]:
    """Fit, test and compare; returns the flat metrics (``val/mape``, ``test/mape``, ``baseline/<name>/mape``...)."""
    import numpy as np
    import pytorch_lightning as pl
    import torch
    from hydra.utils import instantiate

    from gnnperf.baselines import get_baseline
    from gnnperf.eval.compare import baseline_data, compare
    from gnnperf.eval.tables import print_table
    from gnnperf.graph.cost import ablated
    from gnnperf.hardware.table import spec_to_dict
    from gnnperf.predictor.checkpoint import save_predictor
    from gnnperf.predictor.coverage import coverage, input_ranks
    from gnnperf.predictor.fallback import UnseenOpFallback
    from gnnperf.predictor.interval import conformal_bounds, covered, group_intervals, groups_of, rows_needed

    check_before_fit(cfg)
    pl.seed_everything(int(cfg.seed), workers=True)
    torch.set_num_threads(number(cfg.get("threads", 1) or 1, "threads"))
    dm = instantiate(cfg.data)
    dm.setup()
    for part in ("train", "val", "test"):
        if len(dm.split[part]) == 0:
            raise GnnperfError(f"the {part} part of split '{cfg.split.name}' is empty")
    # again: processing the dataset (exporting models with random weights) draws from the global generators, so
    # without this a run that processes trains another network than one that loads the processed data
    pl.seed_everything(int(cfg.seed), workers=True, verbose=False)
    model = instantiate(cfg.model, stats=dm.stats, devices=list(dm.dataset.devices))
    train_data = baseline_data(dm, "train")
    if hasattr(model.model.readout, "fit_rates"):  # readout=opcost starts from the baseline fitted here
        model.model.readout.fit_rates(get_baseline("opcost")().fit(train_data).coef)
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values()]
    logger = instantiate(cfg.logger) if cfg.get("logger") else False
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=logger)
    trainer.fit(model, datamodule=dm)

    best = getattr(trainer.checkpoint_callback, "best_model_path", "") if trainer.checkpoint_callback else ""
    if best:
        model = type(model).load(best)
    val_metrics = {k: float(v) for k, v in trainer.validate(model, datamodule=dm, verbose=False)[0].items()}
    test_metrics = {k: float(v) for k, v in trainer.test(model, datamodule=dm, verbose=False)[0].items()}

    val_pred = torch.cat(trainer.predict(model, dataloaders=dm.val_dataloader())).numpy()
    samples = dm.dataset.samples
    val_true = samples["iteration_time_ms"].to_numpy()[dm.split["val"]]
    test_pred = torch.cat(trainer.predict(model, datamodule=dm)).numpy()
    test_data = baseline_data(dm, "test")
    fallback = None
    if cfg.get("unseen_op_fallback"):
        fallback = UnseenOpFallback.fit(
            model.model.seen_ops.cpu().numpy(), train_data, baseline=str(cfg.unseen_op_fallback)
        )
    # the interval is for what gnnperf predict reports: the network's time, blended where the fallback applies
    blended_val = fallback.apply(val_pred, baseline_data(dm, "val"))[0] if fallback else val_pred
    blended_test = fallback.apply(test_pred, test_data)[0] if fallback else test_pred
    # split-conformal: val residuals give the interval, over every row and per device, mode and precision
    groups = {part: groups_of(samples.iloc[dm.split[part]]) for part in ("val", "test")}
    log_ratio = np.log(val_true) - np.log(blended_val)
    interval = conformal_bounds(log_ratio, float(cfg.interval))
    if len(log_ratio) < rows_needed(float(cfg.interval)):
        log.warning("%d validation rows: the interval is their range, too few for %s coverage", len(log_ratio),
                    cfg.interval)  # fmt: skip
    by_group = group_intervals(log_ratio, groups["val"], float(cfg.interval))
    # The validation part also chose the epoch, so the interval may be narrow: say what it covers on the test part.
    test_true = samples["iteration_time_ms"].to_numpy()[dm.split["test"]]
    test_ratio = np.log(test_true) - np.log(blended_test)
    for name, own in (("test/interval_coverage", by_group), ("test/interval_coverage_pooled", {})):
        test_metrics[name] = float(covered(test_ratio, groups["test"], interval, own).mean())
    log.info("interval %s (and per group: %s) covers %.3f of the test part (the pooled one alone %.3f)",
             [round(float(np.exp(b)), 3) for b in interval], ", ".join(by_group) or "none",
             test_metrics["test/interval_coverage"], test_metrics["test/interval_coverage_pooled"])  # fmt: skip
    # saved before the baselines run: a failure there (memory, a baseline bug) does not lose the trained model
    train_samples = samples.iloc[dm.split["train"]]
    extras = dict(
        interval_log_ratio=interval,
        interval_log_ratio_by_group=by_group,
        interval_coverage=float(cfg.interval),
        trained_on={
            "stores": list(cfg.data.stores),
            "query": dm.query,  # the rows used: data.query without data.exclude's
            "split": OmegaConf.to_container(cfg.split),
            "seed": int(cfg.seed),
            **coverage(train_samples, {name: spec.kind for name, spec in dm.dataset.hardware_specs.items()}),
            "input_ranks": input_ranks(dm.dataset.graphs[i] for i in sorted(set(train_samples["graph_idx"]))),
            # the specs the devices were trained with, for `gnnperf predict` on those in no table (CPUs)
            "hardware_specs": {name: spec_to_dict(spec) for name, spec in dm.dataset.hardware_specs.items()},
        },
        # the cost rules an ablation switched off (GNNPERF_COST_ABLATE): loading checks them (check_compatible)
        cost_ablations=sorted(ablated()),
        metrics={**val_metrics, **test_metrics},
        unseen_op_fallback=fallback.state_dict() if fallback is not None else None,
        # gnnperf-eval counts the test rows a checkpoint trained on by these, whatever the stores are called
        train_sample_ids=sorted(map(str, train_samples["sample_id"])),
    )
    save_predictor(model, cfg.checkpoint_out, **extras)
    log.info("predictor checkpoint: %s", cfg.checkpoint_out)
    out_dir = Path(cfg.checkpoint_out).parent
    result = compare(
        dm, test_pred, list(cfg.baselines or []), out_dir=out_dir, plots=bool(cfg.plots),
        fallback=fallback, train=train_data, test=test_data,
    )  # fmt: skip
    share = result["unseen_op_share"]
    if share.any():
        log.info(
            "%d of %d test samples have op types unseen in training (mean share of roofline time %.2f): "
            "blended with the %s baseline", int((share > 0).sum()), len(share), float(share[share > 0].mean()),
            fallback.name,
        )  # fmt: skip
    print_table(result["table"], title=f"test part of split {cfg.split.name} (fold {cfg.split.fold})")

    metrics = {**val_metrics, **test_metrics}
    # test/* end up as the comparison's GNN row: the network's own predictions, blended where the fallback applies
    prefixes = {"gnn": "test", "gnn_no_fallback": "test_no_fallback"}
    for name, row in result["table"].iterrows():
        prefix = prefixes.get(name, f"baseline/{name}")
        metrics.update({f"{prefix}/{k}": float(v) for k, v in row.items()})
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=1))
    # again with the metrics of metrics.json: test/* is the comparison's GNN row (blended where the fallback applied)
    save_predictor(model, cfg.checkpoint_out, **{**extras, "metrics": metrics})
    memory = {**dm.dataset.memory_report(), "peak_rss_bytes": _peak_rss_bytes()}
    (out_dir / "memory.json").write_text(json.dumps(memory, indent=1))
    log.info(
        "memory: %d samples, %d graphs, feature cache %.2f GB in %d entries, process peak %.2f GB",
        memory["samples"], memory["graphs"], memory["data_cache_bytes"] / 1e9, memory["data_cache_entries"],
        memory["peak_rss_bytes"] / 1e9,
    )  # fmt: skip
    return metrics


def _peak_rss_bytes() -> int:
    """This process's peak resident memory so far (Linux and macOS; 0 where ``resource`` is missing).

    It covers the baselines too, and in a ``-m`` sweep every earlier job of the same process.
    """
    try:
        import resource
    except ImportError:
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB on Linux


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train")
def run(cfg: DictConfig) -> float | None:
    with user_errors("gnnperf-train"):
        metrics = train(cfg)
    return metrics.get(cfg.optimized_metric)


def main() -> None:
    """The ``gnnperf-train`` command: the command line is checked (one line, exit 2, on a mistake), then Hydra runs it."""
    check_command_line("gnnperf-train", "train", check=check_before_fit)
    run()


if __name__ == "__main__":
    main()
