"""``make demo``: train the GNN on the committed CPU dataset (held-out families), compare it with the
baselines, write the plots, then predict a model it never saw from the saved checkpoint, alone and compared across
the CPUs and three batch sizes."""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> int:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from gnnperf.apps import CONF_DIR, user_errors
    from gnnperf.apps.train import train
    from gnnperf.cli import main as cli_main

    out = Path("outputs/demo")
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3", job_name="demo"):
        cfg = compose(config_name="train", overrides=["experiment=demo"], return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(out.resolve())
    HydraConfig.instance().set_config(cfg)
    with user_errors("make demo"):  # as gnnperf-train: one error line, no library deprecation chatter
        train(cfg)
    print(f"\ncomparison, per-family and per-device tables, plots and the checkpoint are in {out}/\n")

    ckpt = str(out / "predictor.ckpt")
    # the CPUs it trained on: in no hardware table, their specs are in the checkpoint
    cpus = [p.stem for p in sorted(Path("datasets/cpu/hardware").glob("*.json"))]
    unseen = "timm:resnet18"  # a real architecture the zoo never produced
    base = ["predict", unseen, "--input-shape", "3,64,64"]
    single = [*base, "--hardware", cpus[0], "--batch-size", "16"]
    # the same model on every CPU at three batch sizes: one comparison table
    compared = [*base, "--hardware", ",".join(cpus), "--batch-size", "8,16,32"]
    for argv in (single, compared):
        print(f"\n$ gnnperf {' '.join(argv)} --checkpoint {ckpt}")
        rc = cli_main([*argv, "--checkpoint", ckpt])
        if rc:
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
