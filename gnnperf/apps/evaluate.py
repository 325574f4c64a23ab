"""``gnnperf-eval``: a trained predictor on a split's test part, beside the baselines fitted on its train part."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from gnnperf.apps import CONF_DIR, check_command_line, check_data_split, user_errors
from gnnperf.errors import GnnperfError


def check_before_eval(cfg: DictConfig) -> None:
    """What can be checked without the data, also on every job of a sweep before the first one starts."""
    from gnnperf.baselines import get_baseline

    check_data_split(cfg)
    for name in cfg.get("baselines") or []:
        get_baseline(str(name))
    if not Path(str(cfg.checkpoint)).is_file():
        raise GnnperfError(f"checkpoint not found: {cfg.checkpoint}")


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Returns ``{"<predictor>/<metric>": value}`` for the GNN (``gnn``) and every baseline."""
    import pytorch_lightning as pl
    import torch
    from hydra.utils import instantiate

    from gnnperf.eval.compare import compare
    from gnnperf.eval.tables import print_table
    from gnnperf.predictor.checkpoint import load_fallback, not_a_predictor
    from gnnperf.predictor.module import PerfModule

    check_before_eval(cfg)
    pl.seed_everything(int(cfg.seed))  # checked above
    module = PerfModule.load(cfg.checkpoint)
    if not module.extras:  # Lightning's checkpoints/best.ckpt
        raise not_a_predictor(cfg.checkpoint)
    fallback = load_fallback(module.extras)  # the blend it was trained with, if any
    dm = instantiate(cfg.data)
    dm.setup()
    dm.dataset.index_devices(module.hparams["devices"])  # the checkpoint's embeddings, by device name
    if len(dm.split["test"]) == 0:
        raise GnnperfError(f"the test part of split '{cfg.split.name}' is empty")
    trained_on = module.extras.get("trained_on", {})
    seen = rows_trained_on(module.extras, list(cfg.data.stores), dm.query, dm)
    n_test = len(dm.split["test"])
    if seen:
        split = trained_on["split"]
        print(
            f"gnnperf-eval: warning: {seen} of {n_test} test rows were training rows of this checkpoint "
            f"(trained on split {split['name']} fold {split['fold']}, seed {trained_on['seed']}): these scores are "
            "not held-out",
            file=sys.stderr,
        )
    elif seen is None:
        print(
            f"gnnperf-eval: warning: cannot tell which of the {n_test} test rows this checkpoint trained on (it was "
            f"trained on {trained_on.get('stores', 'unrecorded stores')} before checkpoints listed their training "
            "rows): these scores may not be held-out",
            file=sys.stderr,
        )
    trainer = instantiate(cfg.trainer, logger=False, callbacks=[])
    pred = torch.cat(trainer.predict(module, datamodule=dm)).numpy()
    result = compare(
        dm, pred, list(cfg.baselines or []), out_dir=cfg.out_dir, plots=bool(cfg.plots), fallback=fallback
    )
    print_table(
        result["table"],
        title=f"{Path(cfg.checkpoint).name} on split {cfg.split.name} (fold {cfg.split.fold})",
    )
    metrics = {f"{name}/{k}": float(v) for name, row in result["table"].iterrows() for k, v in row.items()}
    metrics["test_rows_seen_in_training"] = seen
    metrics["gnn/interval_coverage"] = interval_coverage(module.extras, dm, result["frames"]["gnn"])
    if metrics["gnn/interval_coverage"] is not None:
        print(
            f"gnnperf-eval: the checkpoint's {module.extras.get('interval_coverage', 0.9):.0%} interval held for "
            f"{metrics['gnn/interval_coverage']:.1%} of these test rows"
        )
    (Path(cfg.out_dir) / "metrics.json").write_text(json.dumps(metrics, indent=1))
    return metrics


def interval_coverage(extras: dict[str, Any], dm: Any, gnn: Any) -> float | None:
    """The share of ``dm``'s test rows inside the interval ``gnnperf predict`` prints with the GNN's prediction.

    None for a checkpoint without an interval.

    ``gnn``: the GNN's prediction frame from :func:`gnnperf.eval.compare.compare` (test rows in split order, blended
    where the fallback applies, as ``gnnperf predict`` blends them).
    """
    import numpy as np

    from gnnperf.predictor.interval import covered, groups_of

    if "interval_log_ratio" not in extras:
        return None
    groups = groups_of(dm.dataset.samples.iloc[dm.split["test"]])
    log_ratio = np.log(gnn["true_ms"].to_numpy()) - np.log(gnn["pred_ms"].to_numpy())
    by_group = extras.get("interval_log_ratio_by_group", {})
    return float(covered(log_ratio, groups, extras["interval_log_ratio"], by_group).mean())


def rows_trained_on(extras: dict[str, Any], stores: list[str], query: str | None, dm: Any) -> int | None:
    """How many of ``dm``'s test rows the checkpoint trained on, or None where that cannot be told.

    Checkpoints since 2026-12-03 list their training rows' ``sample_id`` (``train_sample_ids``): counted whatever
    the stores are called. For older ones the recorded split is redone, grouped by ``model_ref`` as it was then, on
    the same stores (paths resolved) and query; otherwise None.
    """
    import numpy as np

    from gnnperf.data.splits import make_split

    test_ids = dm.dataset.samples["sample_id"].to_numpy()[dm.split["test"]]
    if "train_sample_ids" in extras:
        return int(np.isin(test_ids, np.asarray(extras["train_sample_ids"], dtype=str)).sum())
    trained_on = extras.get("trained_on", {})
    split = trained_on.get("split")

    def paths(items: list[Any]) -> list[Path]:
        return sorted(Path(str(s)).resolve() for s in items)

    if not split or paths(trained_on.get("stores", [])) != paths(stores) or trained_on.get("query") != query:
        return None
    samples = dm.dataset.samples.drop(columns="graph_digest", errors="ignore")
    try:
        kwargs = dict(split.get("kwargs") or {})
        if split["name"] == "holdout_model":  # recorded before its hash order, the permutation it drew then
            kwargs.setdefault("order", "permutation")
        train = make_split(
            split["name"], samples, trained_on["seed"], split["fold"], split["num_folds"], **kwargs
        )
    except (GnnperfError, KeyError, TypeError):
        return None
    return int(len(np.intersect1d(train["train"], dm.split["test"])))


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="eval")
def run(cfg: DictConfig) -> None:
    with user_errors("gnnperf-eval"):
        evaluate(cfg)


def main() -> None:
    """The ``gnnperf-eval`` command: the command line is checked (one line, exit 2, on a mistake), then Hydra runs it."""
    check_command_line("gnnperf-eval", "eval", check=check_before_eval)
    run()


if __name__ == "__main__":
    main()
