"""Score baselines alone on the folds of an experiment, without training the GNN.

For a baseline added after an experiment's GNN runs: each fold's split is composed from the same Hydra config
(``experiment=NAME split.fold=K seed=S`` and any further overrides; seed 0 unless ``--seeds`` says otherwise), the
baseline is fitted on its train part and scored on its test part (overall and per source), as ``gnnperf-train`` does
beside the GNN. The GNN's numbers stay those of the committed runs of the same split. ``--opcost-priors`` scores the
``opcost`` baseline once per prior weight (``opcost@prior=P``; gnnperf/baselines/opcost.py).

    .venv/bin/python experiments/baseline_folds.py --experiment cpu_holdout_family --folds 0 1 2 3 4 \
        --baselines opcost --out experiments/cpu_holdout_family/results_v2_opcost.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main() -> None:
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from gnnperf.apps import CONF_DIR
    from gnnperf.baselines import get_baseline
    from gnnperf.baselines.opcost import OpCostBaseline
    from gnnperf.eval.compare import baseline_data
    from gnnperf.eval.metrics import regression_metrics

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--folds", type=int, nargs="+", required=True)
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0], help="the split's seed (validation draw)"
    )
    parser.add_argument("--baselines", nargs="*", default=[])
    parser.add_argument(
        "--opcost-priors", type=float, nargs="*", default=[], help="score opcost at each prior"
    )
    parser.add_argument("--override", action="append", default=[], help="a further Hydra override")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    models = {name: lambda name=name: get_baseline(name)() for name in args.baselines}
    models |= {f"opcost@prior={p:g}": lambda p=p: OpCostBaseline(prior=p) for p in args.opcost_priors}
    if not models:
        parser.error("nothing to score: give --baselines and/or --opcost-priors")
    folds = {}
    for seed in args.seeds:
        for fold in args.folds:
            key = str(fold) if len(args.seeds) == 1 else f"{fold}/seed={seed}"
            overrides = [
                f"experiment={args.experiment}",
                f"split.fold={fold}",
                f"seed={seed}",
                *args.override,
            ]
            with initialize_config_dir(str(CONF_DIR), version_base=None):
                cfg = compose("train", overrides=overrides)
            dm = instantiate(cfg.data)
            dm.setup()
            train, test = baseline_data(dm, "train"), baseline_data(dm, "test")
            folds[key] = {}
            source = dm.dataset.samples.set_index("sample_id")["source"].reindex(test.sample_id).to_numpy()
            for name, make in models.items():
                pred = make().fit(train).predict(test)
                folds[key][name] = {**regression_metrics(pred, test.y_ms), "n": len(test)}
                folds[key][f"{name}/per_source"] = {
                    str(s): {
                        **regression_metrics(pred[source == s], test.y_ms[source == s]),
                        "n": int((source == s).sum()),
                    }
                    for s in sorted(set(source))
                }
                print(
                    f"fold {key}: {name} MAPE {folds[key][name]['mape']:.1f} on {len(test)} samples",
                    flush=True,
                )
    first = next(iter(folds.values()))
    mean = {
        name: {k: float(np.mean([f[name][k] for f in folds.values()])) for k in first[name]}
        for name in models
    }
    for name, m in mean.items():
        print(f"mean over {len(folds)} folds: {name} MAPE {m['mape']:.1f}")
    doc = {"experiment": args.experiment, "overrides": args.override, "folds": folds, "mean": mean}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
