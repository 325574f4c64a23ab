"""How far the labels themselves move: timm's RTX 3090 training tables of one torch release against earlier ones.

The study's labels are the pt112 tables (torch 1.12, cu113). timm's repository history holds the same benchmark on
the same GPU with torch 1.11 and 1.10 (``../shared/external/timm/history``, see its SOURCE.md). For every row that
names the same model, batch size and image size in both, this scores "the older table's time" as a prediction of
the pt112 time, with the study's metrics (``gnnperf.eval.metrics``), per layout and pooled; and once more after
dividing each layout's older times by their median ratio to pt112 (``scaled``: a release that is uniformly a few
percent slower is one number, not row-level variation).

It is not a strict lower bound on a predictor's error (a predictor trained on pt112 rows learns pt112's kernels,
not pt111's); it says how much of a row's time is which torch release's kernel choices rather than the network, on
the same card, which is what a held-out-family target of 8% MAPE asks a predictor to get right.

    .venv/bin/python experiments/timm_train_family/label_floor.py --timm ../shared/external/timm \
        --out experiments/timm_train_family/results_label_floor.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from gnnperf.eval.metrics import regression_metrics

KEYS = ["model", "train_batch_size", "train_img_size"]
REFERENCE = "head/benchmark-train-amp-{layout}-pt112-cu113-rtx3090.csv"
OLDER = {"pt111": "history/benchmark-train-amp-{layout}-pt111-cu113-rtx3090.csv",
         "pt110": "history/benchmark-train-amp-{layout}-pt110-cu113-rtx3090.csv"}  # fmt: skip
LAYOUTS = {"nchw": "contiguous", "nhwc": "channels_last"}


def _read(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path, usecols=[*KEYS, "train_step_time"])
    return frame.dropna().drop_duplicates(KEYS)


def matched(timm: Path, older: str) -> pd.DataFrame:
    """Rows of both layouts present in the pt112 table and in ``older``: ``layout``, ``t112``, ``t_old``."""
    frames = []
    for layout in LAYOUTS:
        ref = _read(timm / REFERENCE.format(layout=layout))
        old = _read(timm / OLDER[older].format(layout=layout))
        both = ref.merge(old, on=KEYS, suffixes=("_112", "_old"))
        frames.append(both.assign(layout=layout))
    out = pd.concat(frames, ignore_index=True)
    return out.rename(columns={"train_step_time_112": "t112", "train_step_time_old": "t_old"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timm", type=Path, default=Path("../shared/external/timm"), help="timm CSV folder")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    results = {}
    for older in OLDER:
        rows = matched(args.timm, older)
        ratio = rows.t_old / rows.t112
        rows["t_scaled"] = rows.t_old / ratio.groupby(rows.layout).transform("median")
        parts = {"pooled": rows, **{layout: rows[rows.layout == layout] for layout in LAYOUTS}}
        results[older] = {}
        for name, part in parts.items():
            results[older][name] = {
                "rows": len(part),
                "median_ratio": float((part.t_old / part.t112).median()),
            }
            for kind, column in (("as_measured", "t_old"), ("scaled", "t_scaled")):
                m = regression_metrics(part[column], part.t112)
                results[older][name][kind] = m
                print(
                    f"{older} vs pt112, {name:6s} {kind:11s}: {len(part):4d} rows, MAPE {m['mape']:5.1f}, median "
                    f"APE {m['median_ape']:4.1f}, within 10% {m['within_10']:.2f}, within 20% {m['within_20']:.2f}"
                )
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
