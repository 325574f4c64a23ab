"""A checkpoint's predictions of the validation and test parts of an experiment's split, as ``gnnperf predict`` makes them.

``gnnperf-train`` keeps only the test part's predictions (``predictions.csv``); an interval is calibrated on the
validation part, so studying one needs both. The network's predictions are blended with the checkpoint's unseen-op
fallback, or with that of ``--fallback-from`` (a predictor checkpoint trained on the same train part) where it has
none: so a Lightning checkpoint of a run that stopped before writing its predictor (``checkpoints/best.ckpt``) is
scored as its predictor would have been. One CSV per checkpoint: ``sample_id, source, hardware, mode, precision, part, true_ms, pred_ms``.

    .venv/bin/python experiments/uncertainty/predict_parts.py experiment=all_sources \\
        --checkpoint gnnperf/predictor/shipped/predictor.ckpt --out /tmp/v20_parts.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from gnnperf.errors import GnnperfError, run_script


def main() -> None:
    import pytorch_lightning as pl
    import torch
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from gnnperf.apps import CONF_DIR
    from gnnperf.eval.compare import baseline_data
    from gnnperf.predictor.checkpoint import load_fallback, read_checkpoint
    from gnnperf.predictor.module import PerfModule

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="+", help="gnnperf-train overrides that give the data and split")
    parser.add_argument("--checkpoint", type=Path, action="append", required=True)
    parser.add_argument("--out", type=Path, action="append", required=True, help="one CSV per --checkpoint")
    parser.add_argument(
        "--fallback-from",
        type=Path,
        help="predictor checkpoint whose unseen-op fallback a Lightning checkpoint uses",
    )
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if len(args.out) != len(args.checkpoint):
        raise GnnperfError(f"{len(args.checkpoint)} --checkpoint but {len(args.out)} --out")
    torch.set_num_threads(args.threads)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=args.overrides)
    dm = instantiate(cfg.data)
    dm.setup()
    trainer = pl.Trainer(
        accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False
    )
    # a predictor's own fallback; a Lightning checkpoint has none (no extras): --fallback-from's, read once
    default = (
        load_fallback(read_checkpoint(args.fallback_from).get("gnnperf", {})) if args.fallback_from else None
    )
    for ckpt, out in zip(args.checkpoint, args.out):
        module = PerfModule.load(ckpt)
        fallback = load_fallback(module.extras) if module.extras else default
        dm.dataset.index_devices(module.hparams["devices"])
        frames = []
        for part, loader in (("val", dm.val_dataloader()), ("test", dm.test_dataloader())):
            pred = torch.cat(trainer.predict(module, dataloaders=loader)).numpy()
            if fallback is not None:
                pred = fallback.apply(pred, baseline_data(dm, part))[0]
            rows = dm.dataset.samples.iloc[dm.split[part]]
            frames.append(
                pd.DataFrame(
                    {
                        "sample_id": rows["sample_id"].to_numpy(),
                        "source": rows["source"].to_numpy(),
                        "hardware": rows["hardware"].to_numpy(),
                        "mode": rows["mode"].to_numpy(),
                        "precision": rows["precision"].to_numpy(),
                        "part": part,
                        "true_ms": rows["iteration_time_ms"].to_numpy(),
                        "pred_ms": pred,
                    }
                )
            )
        pd.concat(frames).to_csv(out, index=False)
        print(f"{ckpt}: {out}")


if __name__ == "__main__":
    run_script(main)
