"""Where the op-class model's transformer time comes from: its fitted rates and each class's share, per data set.

Fits ``opcost`` on the train part of this study's split (CNN training rows) for each set of Hydra overrides given,
and reports the fitted rates, the test rows' median roofline terms per class, each class's median share of the
predicted time, and the median predicted / measured on the train and test parts. The baseline is the one the
study's runs fit (same data, same split); no GNN is trained.

    .venv/bin/python experiments/cnn_to_transformer/opcost_terms.py --out experiments/cnn_to_transformer/results_opcost_terms.json \\
        --set one_run_per_gpu= --set older_runs=data.exclude.rtx2080ti_older_runs=null,data.pool_software=true,data.root=.cache/datasets/cnn_to_transformer_old_rows
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from gnnperf.errors import GnnperfError, run_script


def main() -> None:
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from gnnperf.apps import CONF_DIR
    from gnnperf.baselines.opcost import CLASSES, OpCostBaseline, features
    from gnnperf.eval.compare import baseline_data

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--set", action="append", required=True, metavar="NAME=OVERRIDES",
        help="a name, '=', then comma-separated Hydra overrides on top of experiment=cnn_to_transformer",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    result = {}
    for item in args.set:
        name, sep, overrides = item.partition("=")
        if not sep or not name:
            raise GnnperfError(f"--set {item!r}: expected NAME=OVERRIDES (overrides may be empty)")
        with initialize_config_dir(str(CONF_DIR), version_base=None):
            cfg = compose(
                "train", overrides=["experiment=cnn_to_transformer", *filter(None, overrides.split(","))]
            )
        dm = instantiate(cfg.data)
        dm.setup()
        train, test = baseline_data(dm, "train"), baseline_data(dm, "test")
        model = OpCostBaseline().fit(train)
        coef = np.asarray(model.coef)
        raw = features(test)  # [n, 3 * classes + 1]: each class's roofline terms and op count
        terms = raw * coef  # each term's ms in the prediction
        pred = terms.sum(axis=1)
        result[name] = {
            "train_rows": len(train),
            "test_rows": len(test),
            "test_mape": round(float(100 * np.mean(np.abs(pred - test.y_ms) / test.y_ms)), 2),
            "median_pred_over_true": {
                "train": round(float(np.median(model.predict(train) / train.y_ms)), 3),
                "test": round(float(np.median(pred / test.y_ms)), 3),
            },
            "overhead_ms": round(float(coef[-1]), 3),
            "classes": {
                cls: {
                    "rates_compute_memory_per_op_ms": [round(float(c), 4) for c in coef[3 * j : 3 * j + 3]],
                    "test_median_compute_ms_memory_ms_ops": [
                        round(float(r), 3) for r in np.median(raw[:, 3 * j : 3 * j + 3], axis=0)
                    ],
                    "test_median_share_of_prediction": round(
                        float(np.median(terms[:, 3 * j : 3 * j + 3].sum(axis=1) / pred)), 4
                    ),
                }
                for j, cls in enumerate(CLASSES)
            },
        }
        print(name, json.dumps(result[name]))
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
