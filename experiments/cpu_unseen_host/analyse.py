"""A CPU host no training row came from: how far apart the hosts run, and how well each predictor does there.

Three parts, written to one JSON:

- ``repeated_steps``: steps the new host's store measured twice, the later time over the first (its own noise);
- ``hosts``: the steps (model reference, batch, optimizer, timed region, threads) measured on the new host and on
  another, the ratio of their median times (median, p10, p90, per family) beside the ratio of the two probes' matmul
  and copy rates: do the probes, which are all the hardware vector knows of a CPU, tell the hosts apart?
- ``predictors``: each ``--run NAME=JOB_DIR`` (a finished gnnperf-train or gnnperf-eval job on the new host's rows),
  every predictor in it: MAPE, median APE, within 10/20%, rank correlation, the median predicted / measured (its
  level on the host), and the MAPE after one measured reference row (:func:`one_reference_mapes`, mean and median
  over the choice of reference), per part (zoo models; named timm / torchvision / transformers models) and overall;
  the five rows it misses most.
- ``measured_elsewhere``: the new host's rows predicted by the same step's median on another host, as it is and
  scaled by the two probes' matmul ratio: what a user with a measurement on a sibling VM would get; beside each
  run's GNN on the same rows.

    .venv/bin/python experiments/cpu_unseen_host/analyse.py --store datasets/cpu_m167 \\
        --other datasets/cpu --other datasets/cpu_optimizers \\
        --run shipped=outputs/cpu_unseen_host/shipped --run trained=outputs/cpu_unseen_host/trained \\
        --out experiments/cpu_unseen_host/results.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from gnnperf.data.processing import device_specs
from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError, run_script
from gnnperf.eval.compare import read_predictions
from gnnperf.eval.metrics import one_reference_mapes, regression_metrics
from gnnperf.hardware.table import HardwareSpec

STEP = ["model_ref", "batch_size", "optimizer", "timed", "precision", "memory_format"]


def _spread(ratio: pd.Series) -> dict[str, float]:
    return {
        "median": round(float(ratio.median()), 3),
        "p10": round(float(ratio.quantile(0.1)), 3),
        "p90": round(float(ratio.quantile(0.9)), 3),
        "n": len(ratio),
    }


def _part(model_ref: pd.Series) -> pd.Series:
    return pd.Series(np.where(model_ref.str.startswith("zoo:"), "zoo", "named"), index=model_ref.index)


def _records(store: Path, rows: pd.DataFrame) -> dict[str, HardwareSpec]:
    return device_specs([store], sorted(rows.hardware.unique()))


def host_ratios(both: pd.DataFrame, new_spec: HardwareSpec, spec: HardwareSpec) -> dict:
    """The new host's time over the other's on the steps both measured (``both``: the two joined on :data:`STEP`,
    the other's columns suffixed ``_other``), beside the probes' rate ratios."""
    ratio = both.iteration_time_ms / both.iteration_time_ms_other
    family = both.model_ref.str.split("?").str[0]
    return {
        "time_ratio": _spread(ratio),
        # a time ratio, so the other's rate over the new one's: under 1 where the probe says the new host is faster
        "probe_matmul_time_ratio": round(spec.peak_fp32_tflops / new_spec.peak_fp32_tflops, 3),
        "probe_copy_time_ratio": round(spec.mem_bandwidth_gbs / new_spec.mem_bandwidth_gbs, 3),
        "per_family_median": {k: round(float(v), 3) for k, v in ratio.groupby(family).median().items()},
    }


def _scores(pred: np.ndarray, true: np.ndarray) -> dict[str, float]:
    m = regression_metrics(pred, true)
    out = {k: round(float(m[k]), 4) for k in ("mape", "median_ape", "within_10", "within_20", "spearman")}
    out["median_pred_over_true"] = round(float(np.median(pred / true)), 3)
    ref = one_reference_mapes(pred, true)  # a reference among the outliers scales every other row off
    out["one_reference_mean_mape"] = round(float(ref.mean()), 2)
    out["one_reference_median_mape"] = round(float(np.median(ref)), 2)
    out["n"] = len(pred)
    return out


def repeats(store: Path) -> dict[str, float] | None:
    """Steps the new host's store holds twice (two runs planned them alike): the later time over the first."""
    rows = SampleStore(store).read(dedup=False).query("status == 'ok'").sort_values("created_at")
    twice = rows[rows.duplicated("sample_id", keep=False)].groupby("sample_id").iteration_time_ms
    return _spread(twice.last() / twice.first()) if len(twice) else None


def predictor_scores(long: pd.DataFrame) -> dict:
    """Per predictor of one job's long prediction table: scores overall and per part, and the worst rows."""
    out = {}
    for name, frame in long.groupby("predictor", sort=False):
        r = {"all": _scores(frame.pred_ms.to_numpy(), frame.true_ms.to_numpy())}
        for part, g in frame.groupby(_part(frame.model_ref)):
            r[part] = _scores(g.pred_ms.to_numpy(), g.true_ms.to_numpy())
        off = np.abs(np.log(frame.pred_ms / frame.true_ms))
        r["worst"] = [
            {"model_ref": w.model_ref, "batch_size": int(w.batch_size), "true_ms": round(w.true_ms, 2),
             "pred_ms": round(w.pred_ms, 2)}
            for w in frame.loc[off.sort_values(ascending=False).index[:5]].itertuples()
        ]  # fmt: skip
        out[str(name)] = r
    return out


def measured_elsewhere(both: pd.DataFrame, scale: float, gnns: dict[str, pd.DataFrame]) -> dict:
    """The new host's rows predicted by the same step's time on another host (``both``, as :func:`host_ratios`
    takes it), as is and times ``scale``; and each run's GNN (``gnns``: name -> its rows of a long prediction table)
    on the same rows."""
    true, elsewhere = both.iteration_time_ms.to_numpy(), both.iteration_time_ms_other.to_numpy()
    out = {"as_is": _scores(elsewhere, true), "probe_scaled": _scores(elsewhere * scale, true)}
    for name, gnn in gnns.items():
        same = gnn[gnn.sample_id.isin(both.sample_id)]
        out[f"{name}_gnn_same_rows"] = _scores(same.pred_ms.to_numpy(), same.true_ms.to_numpy())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True, help="the new host's sample store")
    ap.add_argument("--other", type=Path, action="append", default=[], help="another host's store (repeat)")
    ap.add_argument(
        "--run", action="append", default=[], metavar="NAME=JOB_DIR", help="a job on the new host"
    )
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    new = SampleStore(args.store).read().query("status == 'ok'")
    (new_name, new_spec), *more = _records(args.store, new).items()
    if more:
        raise GnnperfError(f"{args.store} holds {1 + len(more)} hardware records; one host's store holds one")
    results: dict = {
        "host": new_name,
        "rows": len(new),
        "repeated_steps": repeats(args.store),
        "hosts": {},
        "measured_elsewhere": {},
        "predictors": {},
    }
    gnns: dict[str, pd.DataFrame] = {}
    for run in args.run:
        name, sep, job = run.partition("=")
        if not sep:
            raise GnnperfError(f"--run takes NAME=JOB_DIR, got {run!r}")
        long = read_predictions(job).merge(new[["sample_id", "batch_size"]], on="sample_id")
        results["predictors"][name] = predictor_scores(long)
        gnns[name] = long[long.predictor == "gnn"]
    for store in args.other:
        rows = SampleStore(store).read().query("status == 'ok'")
        for name, spec in _records(store, rows).items():
            both = new.merge(rows[rows.hardware == name], on=STEP, suffixes=("", "_other"))
            if spec.threads != new_spec.threads or both.empty:
                continue
            results["hosts"][name] = host_ratios(both, new_spec, spec)
            scale = results["hosts"][name]["probe_matmul_time_ratio"]
            results["measured_elsewhere"][name] = measured_elsewhere(both, scale, gnns)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps({k: results[k] for k in ("host", "rows")}))
    for name, host in results["hosts"].items():
        print(
            f"{new_name} / {name}: time {host['time_ratio']}, probe matmul {host['probe_matmul_time_ratio']}"
        )
    for run, predictors in results["predictors"].items():
        for p, r in predictors.items():
            a = r["all"]
            print(
                f"{run:8s} {p:18s} MAPE {a['mape']:6.1f}  within 10% {a['within_10']:.2f}"
                f"  pred/true {a['median_pred_over_true']:.2f}  one reference {a['one_reference_mean_mape']:5.1f}"
            )


if __name__ == "__main__":
    run_script(main)
