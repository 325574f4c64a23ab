"""Transfer from a measured device: the held-out device's time from the same model measured on another device.

The Habitat question (Yu et al., ATC 2021): a user has run the model on the GPU they own and asks how fast it runs
on one they do not. For every test row of a leave-one-device-out job (its held-out device ``h``), each training
device ``g`` on which the same model ran the same workload (batch, precision, mode, timed region, layout, devices;
the A100's TF32 rows match fp32 elsewhere, the same code) is a reference, its measured time ``t_g`` the median over
the store's runs of that model on ``g``. Predictors, each scored against the measured time on ``h``:

- ``gnn``: the job's checkpoint alone (from specs; the job's own test score).
- ``gnn@g``: ``t_g x gnn(h) / gnn(g)``, the checkpoint's predicted ratio between the two devices (the model's own
  error cancels; what is left is the error of the device ratio). ``gnn@all``: geometric mean over the references.
- ``copy@g``: ``t_g`` unchanged, the floor any ratio must beat.
- ``law@all``: a scaling law fitted on the training devices' rows of the store: ``log t = a_model,precision +
  (b + c log(FLOPs per op)) log peak``, with peak the device's data-sheet rate for the precision (the TF32 tensor
  rate for TF32), so a model with large ops scales with the peak and one of many small ops does not; a per-model
  offset and two shared slopes, fitted by least squares on every training row, then ``t_h`` from the law.
  Left out where the scored workloads ran on one training device only (the slopes are then not determined).
- ``gnn+law@all``: the geometric mean of ``gnn`` and ``law@all`` (weights 1/2, fixed beforehand).

The rows of a model measured on no training device are left out (and counted). Prints one comparison table per
held-out device and their mean; writes them as JSON.

    GNNPERF_CACHE=.cache .venv/bin/python experiments/transfer.py multirun/tv_transfer/0 multirun/tv_transfer/1 \\
        --store .cache/stores/torchvision --out experiments/torchvision_lodo/results_transfer.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from gnnperf.baselines.registry import peak_flops_per_s
from gnnperf.data.store import SampleStore, select_samples
from gnnperf.errors import GnnperfError, run_script
from gnnperf.eval.compare import read_predictions
from gnnperf.eval.metrics import prediction_frame
from gnnperf.eval.tables import comparison_table, to_markdown
from gnnperf.hardware.table import get_spec
from gnnperf.predict import Predictor, Query

# What must match for a reference: the workload columns (precision matched after TF32 -> fp32).
WORKLOAD = [
    "model_ref",
    "input_shape",
    "batch_size",
    "mode",
    "timed",
    "memory_format",
    "num_devices",
    "code_precision",
]


def peak_tflops(hardware: str, precision: str) -> float:
    """The data-sheet rate a precision runs at (TF32 at the tensor rate)."""
    return peak_flops_per_s(get_spec(hardware), precision) / 1e12


def log_peaks(hardware, precision) -> np.ndarray:
    return np.log([peak_tflops(h, p) for h, p in zip(hardware, precision, strict=True)])


def flops_per_op(rows: pd.DataFrame) -> dict[str, float]:
    """log(forward FLOPs per op) of each model of ``rows`` at batch 1 (a size: the batch does not matter)."""
    from gnnperf.graph.build import GraphCache, build_graph
    from gnnperf.graph.cost import graph_costs

    out = {}
    for ref, shape in rows.groupby("model_ref")["input_shape"].first().items():
        shape = tuple(int(d) for d in shape.split(","))
        graph = build_graph(ref, shape, cache=GraphCache(), cached_only=True)  # the job's graphs
        costs, _ = graph_costs(graph, 1)
        out[ref] = float(np.log(max(sum(c.flops for c in costs), 1.0) / len(graph.nodes)))
    return out


def scaling_law(train: pd.DataFrame, test: pd.DataFrame, intensity: dict[str, float]) -> np.ndarray:
    """``law@all`` (module docstring): per (model, precision) offsets and two shared slopes on log peak."""
    keys = sorted(set(zip(train["model_ref"], train["code_precision"])))
    index = {k: i for i, k in enumerate(keys)}

    def design(rows: pd.DataFrame) -> np.ndarray:
        x = np.zeros((len(rows), len(keys) + 2))
        for r, (ref, prec, peak) in enumerate(
            zip(rows["model_ref"], rows["code_precision"], rows["log_peak"])
        ):
            x[r, index[(ref, prec)]] = 1.0
            x[r, -2:] = peak, peak * intensity[ref]
        return x

    coef, *_ = np.linalg.lstsq(design(train), np.log(train["t"].to_numpy()), rcond=None)
    return np.exp(design(test) @ coef)


def device_table(job: Path, samples: pd.DataFrame) -> tuple[str, pd.DataFrame, int]:
    """The comparison table of one held-out-device job, its device, and how many test rows had no reference."""
    gnn = read_predictions(job).query("predictor == 'gnn'").set_index("sample_id")
    test = samples.loc[samples["sample_id"].isin(gnn.index)]
    devices = test["hardware"].unique()
    if len(devices) != 1:
        raise GnnperfError(f"{job}: the test rows are on {len(devices)} devices, not one held-out device")
    held = str(devices[0])
    same = ["input_shape", "batch_size", "mode", "timed", "memory_format", "num_devices", "code_precision"]
    workloads = test[same].drop_duplicates()
    # the workloads scored, on the other devices
    train = samples.loc[samples["hardware"] != held].merge(workloads, on=same)
    # one reference time per (workload, device): the median over the store's runs of it
    refs = train.groupby([*WORKLOAD, "hardware"], as_index=False).agg(
        t=("iteration_time_ms", "median"), precision=("precision", "first")
    )
    pairs = test.merge(refs, on=WORKLOAD, suffixes=("", "_ref"))
    missing = int((~test["sample_id"].isin(pairs["sample_id"])).sum())
    if pairs.empty:
        raise GnnperfError(f"{job}: no test row's model ran the same workload on a training device")
    predictor = Predictor.from_checkpoint(job / "predictor.ckpt")
    at_held = predictor.predict([Query.from_sample(r, held) for _, r in pairs.iterrows()], batch_cap=False)
    at_ref = predictor.predict(
        [Query.from_sample(_ref_row(r), r["hardware_ref"]) for _, r in pairs.iterrows()], batch_cap=False
    )
    pairs = pairs.assign(
        gnn_h=[p["iteration_time_ms"] for p in at_held], gnn_g=[p["iteration_time_ms"] for p in at_ref]
    )
    job_gnn = gnn.loc[pairs["sample_id"], "pred_ms"].to_numpy()
    if not np.allclose(pairs["gnn_h"], job_gnn, rtol=1e-3):
        raise GnnperfError(f"{job}: the checkpoint does not reproduce the job's test predictions")
    pairs["transfer"] = pairs["t"] * pairs["gnn_h"] / pairs["gnn_g"]
    ids = sorted(pairs["sample_id"].unique())
    test_by_id = test.set_index("sample_id")
    true = test_by_id.loc[ids, "iteration_time_ms"].to_numpy()
    by_id = pairs.groupby("sample_id")
    frames = {"gnn": prediction_frame(gnn.loc[ids, "pred_ms"].to_numpy(), true)}
    frames["gnn@all"] = prediction_frame(
        np.exp(by_id["transfer"].apply(lambda s: np.log(s).mean()).loc[ids]), true
    )
    law_test = test_by_id.loc[ids].reset_index()
    law_test = law_test.assign(log_peak=log_peaks([held] * len(law_test), law_test["precision"]))
    law_train = train.loc[train["model_ref"].isin(law_test["model_ref"])]
    if law_train["hardware"].nunique() >= 2:  # with one device the slopes are not determined
        law_train = law_train.assign(
            t=law_train["iteration_time_ms"],
            log_peak=log_peaks(law_train["hardware"], law_train["precision"]),
        )
        law = scaling_law(law_train, law_test, flops_per_op(law_test))
        frames["law@all"] = prediction_frame(law, true)
        frames["gnn+law@all"] = prediction_frame(np.sqrt(gnn.loc[ids, "pred_ms"].to_numpy() * law), true)
    for ref in sorted(pairs["hardware_ref"].unique()):
        one = pairs.loc[pairs["hardware_ref"] == ref].set_index("sample_id")
        truth = test_by_id.loc[one.index, "iteration_time_ms"].to_numpy()
        frames[f"gnn@{ref}"] = prediction_frame(one["transfer"].to_numpy(), truth)
        frames[f"copy@{ref}"] = prediction_frame(one["t"].to_numpy(), truth)
    return held, comparison_table(frames), missing


def _ref_row(pair: pd.Series) -> pd.Series:
    """A pair's reference as a sample row: its own precision label (fp32 where the held-out row is TF32)."""
    return pair.drop("precision").rename({"precision_ref": "precision"})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("jobs", nargs="+", type=Path, help="gnnperf-train job folders, one held-out device each")
    p.add_argument(
        "--store", type=Path, nargs="+", required=True, help="the sample stores the jobs trained on"
    )
    p.add_argument("--query", help="keep only these samples (a pandas query, e.g. the data config's)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    samples = pd.concat(
        [SampleStore(s, readonly=True).read(status="ok") for s in args.store], ignore_index=True
    )
    if args.query:
        samples = select_samples(samples, args.query)
    samples = samples.assign(code_precision=samples["precision"].replace({"tf32": "fp32"}))
    tables, out = [], {}
    for job in args.jobs:
        held, table, missing = device_table(job, samples)
        print(f"\n{held} ({job}; {missing} test rows without a reference left out)")
        print(to_markdown(table))
        tables.append(table)
        out[str(job)] = {"held_out": held, "no_reference": missing, "table": table.to_dict(orient="index")}
    mean = pd.concat([t[["mape", "median_ape", "within_10"]] for t in tables]).groupby(level=0).mean()
    print("\nmean over held-out devices (a row appears where its reference device was a training device)")
    print(to_markdown(mean))
    out["mean"] = mean.to_dict(orient="index")
    args.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    run_script(main)
