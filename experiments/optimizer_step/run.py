"""What does the optimizer update cost, measured, and what does the predictor say it costs? (the update floor)

Measured: the paired store ``datasets/cpu_optimizers`` (``gnnperf-generate zoo=cpu_optimizers
workload=cpu_train_optimizers``): each model timed by the harness with no update (fwd + bwd), SGD (momentum 0.9),
Adam and AdamW at one batch, one after another. The update's own time is the step with it minus the step without;
beside it the least time :mod:`gnnperf.predictor.optimizer_step` gives it (its memory traffic at the probed copy
bandwidth). Predicted: a checkpoint's step for each row, with and without the update floor, and the predicted update
(with minus without); then, as ``experiments/torchvision_devices/dp_floor.py`` does for devices, a grid of GPU
queries, each optimizer against no optimizer, to count where the network prices an update below nothing.

    .venv/bin/python experiments/optimizer_step/run.py --store datasets/cpu_optimizers --gpu-store datasets/h200 \\
        --gpu-store .cache/stores/timm --sample 150 --out experiments/optimizer_step/results.json
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError, run_script
from gnnperf.graph.build import GraphCache, build_graph
from gnnperf.hardware.table import get_spec
from gnnperf.predict import Predictor, Query
from gnnperf.predictor.optimizer_step import update_floor_ms

STEP = ["model_ref", "hardware", "software", "batch_size", "input_shape", "precision"]
UPDATES = ("sgd", "adam", "adamw")
GRID_MODELS = [  # dp_floor.py's grid models, so the two floors are checked on the same networks
    ("timm:resnet50", None),
    ("timm:vit_base_patch16_224", None),
    ("torchvision:vgg16", None),
    ("torchvision:mobilenet_v2", None),
    ("hf:gpt2?attn_implementation=eager&class=GPT2LMHeadModel", (512,)),
    ("hf:bert?attn_implementation=eager&class=BertForMaskedLM", (128,)),
]
GRID_GPUS = ("a100-sxm4-40gb", "rtx-3090", "h100-sxm", "h200", "v100-pcie-32gb")


def paired(rows: pd.DataFrame, store: Path) -> pd.DataFrame:
    """One row per (step, optimizer) with the step's time without an update beside it, and the update's least time."""
    none = rows[rows.optimizer == "none"].set_index(STEP).iteration_time_ms.rename("none_ms")
    out = rows[rows.optimizer != "none"].join(none, on=STEP).dropna(subset=["none_ms"]).copy()
    cache = GraphCache(store / "graphs")
    params = {
        (ref, shape): build_graph(ref, tuple(map(int, shape.split(","))), cache=cache).param_count()
        for ref, shape in set(zip(out.model_ref, out.input_shape, strict=True))
    }
    out["params"] = [params[k] for k in zip(out.model_ref, out.input_shape, strict=True)]
    specs = {h: get_spec(h, store / "hardware" / f"{h}.json") for h in out.hardware.unique()}
    out["least_ms"] = [
        update_floor_ms(p, o, prec, specs[h].mem_bandwidth_gbs)
        for p, o, prec, h in zip(out.params, out.optimizer, out.precision, out.hardware, strict=True)
    ]
    out["update_ms"] = out.iteration_time_ms - out.none_ms
    return out


def measured(pairs: pd.DataFrame) -> dict:
    over_least = pairs.update_ms / pairs.least_ms
    share = pairs.update_ms / pairs.iteration_time_ms
    result = {}
    for opt, g in pairs.groupby("optimizer"):
        o, s = over_least[g.index], share[g.index]
        result[opt] = {
            "steps": len(g),
            "update_below_zero": int((g.update_ms < 0).sum()),
            "update_share_of_step_median": round(float(s.median()), 3),
            "update_share_of_step_max": round(float(s.max()), 3),
            # where the update moves enough to be timed apart from the noise of two steps (>= 5% of the step)
            "update_over_least_where_share_ge_5pct": _quantiles(o[s >= 0.05]),
            "below_least": int((g.update_ms < g.least_ms).sum()),
        }
    return result


def _quantiles(x: pd.Series) -> dict:
    if x.empty:
        return {"n": 0}
    q = np.quantile(x, [0, 0.1, 0.5, 0.9, 1])
    return {"n": len(x), **{k: round(float(v), 2) for k, v in zip(("min", "p10", "median", "p90", "max"), q)}}


def predicted_updates(
    predictor: Predictor, rows: pd.DataFrame, pairs: pd.DataFrame, hardware_file: Path
) -> dict:
    """The checkpoint's update (its step with the update minus its step without) against the measured one."""
    queries = [Query.from_sample(r) for _, r in rows.iterrows()]
    out = predictor.predict(queries, hardware_file=str(hardware_file))
    pred = pd.Series([r["iteration_time_ms"] for r in out], index=rows.index)
    none = rows.optimizer == "none"
    pred_none = pd.Series(pred[none].to_numpy(), index=rows[none].set_index(STEP).index)
    update = pred[pairs.index].to_numpy() - pred_none.loc[pairs.set_index(STEP).index].to_numpy()
    big = (pairs.update_ms / pairs.iteration_time_ms >= 0.05).to_numpy()
    return {
        "floored_at_update": int(sum(r["floored_at_update"] for r in out)),
        "predicted_update_below_zero": int((update < 0).sum()),
        "predicted_over_measured_update_where_share_ge_5pct": _quantiles(
            pd.Series(update[big] / pairs.update_ms.to_numpy()[big])
        ),
    }


def on_rows(predictor: Predictor, rows: pd.DataFrame, sample: int) -> dict:
    """MAPE of a store's steps with an update (at most ``sample``, seeded), with and without the floor."""
    rows = rows[rows.timed == "fwd+bwd+opt"]
    rows = rows.sample(min(sample, len(rows)), random_state=0) if sample else rows
    queries = [Query.from_sample(r) for _, r in rows.iterrows()]
    built = {(q.model, q.input_shape): _builds(q) for q in queries}  # a few timm models fail to export
    keep = np.array([built[q.model, q.input_shape] for q in queries])
    rows, queries = rows[keep], [q for q, k in zip(queries, keep, strict=True) if k]
    true = rows.iteration_time_ms.to_numpy()
    without, with_ = (
        np.array([r["iteration_time_ms"] for r in predictor.predict(queries, update_floor=floor)])
        for floor in (False, True)
    )
    mape = lambda pred: round(float(np.mean(np.abs(pred / true - 1)) * 100), 2)  # noqa: E731
    return {
        "rows": len(rows),
        "rows_without_a_graph": int((~keep).sum()),
        "without_floor": mape(without),
        "with_floor": mape(with_),
        "rows_changed": int((without != with_).sum()),
    }


def _builds(query: Query) -> bool:
    try:
        build_graph(query.model, query.input_shape, cache=GraphCache())
    except GnnperfError:
        return False
    return True


def grid(predictor: Predictor) -> dict:
    queries = [
        Query(model, gpu, batch, input_shape=shape, precision=precision, optimizer=opt,
              timed="fwd+bwd" if opt == "none" else "fwd+bwd+opt")
        for model, shape in GRID_MODELS
        for gpu in GRID_GPUS
        for precision in ("fp32", "amp_fp16")
        for batch in (1, 8, 64)
        for opt in ("none", *UPDATES)
    ]  # fmt: skip
    rows = predictor.predict(queries, update_floor=False)
    ms = {q: r["iteration_time_ms"] for q, r in zip(queries, rows, strict=True)}
    ratios = pd.DataFrame(
        [{"model": q.model, "hardware": q.hardware, "precision": q.precision, "batch_size": q.batch_size,
          "optimizer": q.optimizer, "over_none": ms[q] / ms[replace(q, optimizer="none", timed="fwd+bwd")]}
         for q in queries if q.optimizer != "none"]
    )  # fmt: skip
    with_floor = [r["iteration_time_ms"] for r in predictor.predict(queries)]
    ratios["floored"] = [w > ms[q] for q, w in zip(queries, with_floor, strict=True) if q.optimizer != "none"]
    below = ratios[ratios.over_none < 1]
    return {
        "queries_with_update": len(ratios),
        "faster_than_without": len(below),
        "floored_at_update": int(ratios.floored.sum()),
        "faster_than_without_left": int(
            (~below.floored).sum()
        ),  # where no floor applies (AMP: see floors.py)
        "floored_by_model": {m: int(g.floored.sum()) for m, g in ratios.groupby("model")},
        "by_optimizer": {o: int((below.optimizer == o).sum()) for o in UPDATES},
        "models_faster": sorted(below.model.unique()),
        "over_none_median": {
            o: round(float(g.over_none.median()), 3) for o, g in ratios.groupby("optimizer")
        },
        "rows": below.assign(over_none=below.over_none.round(3)).to_dict("records"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="a paired-optimizer sample store")
    parser.add_argument(
        "--gpu-store",
        type=Path,
        action="append",
        help="GPU steps with an update (repeatable; default datasets/h200)",
    )
    parser.add_argument(
        "--sample", type=int, default=200, help="at most this many rows of each GPU store (0: all)"
    )
    parser.add_argument("--checkpoint", default=None, help="default: the shipped predictor")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rows = SampleStore(args.store, readonly=True).read(status="ok").reset_index(drop=True)
    pairs = paired(rows, args.store)
    predictor = Predictor.from_checkpoint(args.checkpoint)
    result = {
        "store": os.path.relpath(args.store),
        "checkpoint": os.path.relpath(predictor.path),
        "steps": int((rows.optimizer == "none").sum()),
        "measured": measured(pairs),
        "predicted_updates": predicted_updates(predictor, rows, pairs, next((args.store / "hardware").glob("*.json"))),
        "gpu_rows": {
            os.path.relpath(store): on_rows(predictor, SampleStore(store, readonly=True).read(status="ok"), args.sample)
            for store in args.gpu_store or [Path("datasets/h200")]
        },
        "grid_without_floor": grid(predictor),
        "pairs": pairs[[*STEP[:2], "batch_size", "optimizer", "params", "none_ms", "iteration_time_ms",
                        "update_ms", "least_ms"]].round(3).to_dict("records"),
    }  # fmt: skip
    print(json.dumps({k: v for k, v in result.items() if k not in ("pairs", "grid_without_floor")}, indent=1))
    print("grid:", {k: v for k, v in result["grid_without_floor"].items() if k != "rows"})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    run_script(main)
