"""Score baselines alone on the folds of an experiment, without training the GNN.

For a baseline added after an experiment's GNN runs: each fold's split is composed from the same Hydra config
(``experiment=NAME split.fold=K`` and any further overrides, seed 0 unless overridden), the baseline is fitted on
its train part and scored on its test part (overall and per source), as ``gnnperf-train`` does beside the GNN.
The GNN's numbers stay those of the committed runs of the same split.

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
    from gnnperf.eval.compare import baseline_data
    from gnnperf.eval.metrics import regression_metrics

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--folds", type=int, nargs="+", required=True)
    parser.add_argument("--baselines", nargs="+", required=True)
    parser.add_argument("--override", action="append", default=[], help="a further Hydra override")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    folds = {}
    for fold in args.folds:
        overrides = [f"experiment={args.experiment}", f"split.fold={fold}", *args.override]
        with initialize_config_dir(str(CONF_DIR), version_base=None):
            cfg = compose("train", overrides=overrides)
        dm = instantiate(cfg.data)
        dm.setup()
        train, test = baseline_data(dm, "train"), baseline_data(dm, "test")
        folds[fold] = {}
        source = dm.dataset.samples.set_index("sample_id")["source"].reindex(test.sample_id).to_numpy()
        for name in args.baselines:
            pred = get_baseline(name)().fit(train).predict(test)
            folds[fold][name] = {**regression_metrics(pred, test.y_ms), "n": len(test)}
            folds[fold][f"{name}/per_source"] = {
                str(s): {
                    **regression_metrics(pred[source == s], test.y_ms[source == s]),
                    "n": int((source == s).sum()),
                }
                for s in sorted(set(source))
            }
            print(
                f"fold {fold}: {name} MAPE {folds[fold][name]['mape']:.1f} on {len(test)} samples", flush=True
            )
    mean = {
        name: {k: float(np.mean([folds[f][name][k] for f in folds])) for k in folds[args.folds[0]][name]}
        for name in args.baselines
    }
    for name, m in mean.items():
        print(f"mean over {len(folds)} folds: {name} MAPE {m['mape']:.1f}")
    doc = {"experiment": args.experiment, "overrides": args.override, "folds": folds, "mean": mean}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
