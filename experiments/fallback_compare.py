"""The same networks with the other fallback baseline: flops blend vs opcost blend, recomputed from one run.

A run trained with ``unseen_op_fallback=opcost`` writes the blended prediction (``gnn``), the network alone
(``gnn_no_fallback``) and both baselines' predictions for every test sample. The blend is
``log gnn = (1 - w) log net + w log baseline`` with one weight ``w`` per sample (the unseen op types' share of
roofline time, the same whichever baseline is blended), so ``w`` is recovered from the opcost blend and applied
to the flops baseline: both fallbacks scored on the same networks, without training twice (two training runs
differ: fold 4's network alone scored 70.0% in one and 109.9% in another).

Jobs are scored one by one (all rows, and the rows the fallback blends); ``--study NAME JOB...`` (repeatable: a
study with one set-up, its seeds or folds as jobs) also pools each study's blended rows per family and sets the
studies side by side, as the choice of the default ``unseen_op_fallback`` weighs them
(``experiments/fallback_choice``)::

    .venv/bin/python experiments/fallback_compare.py multirun/cpu_fb_opcost_a/0 multirun/cpu_fb_opcost_a/1 \
        --out experiments/cpu_holdout_family/results_v2_fallback_opcost.json
    .venv/bin/python experiments/fallback_compare.py --study cpu multirun/cpu_fb_v7_s1_a/0 multirun/cpu_fb_v7_s1_a/1 \
        --study c2t multirun/c2t_corr_opcost_s0 --out experiments/fallback_choice/results.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from gnnperf.errors import GnnperfError, run_script
from gnnperf.eval.compare import read_predictions

BLENDS = ("opcost_fallback", "flops_fallback")
# a family counts in the summary where the blend carries this much of its roofline time on average: a share of a
# percent (one small unseen activation) moves both blends alike and would count as a tie
CARRIES = 0.1


def _mape(pred: pd.Series, true: pd.Series) -> float | None:
    """MAPE in %, None over no rows (a job whose test graphs are all of seen op types blends none)."""
    return round(float(100 * np.mean(np.abs(pred - true) / true)), 2) if len(true) else None


def blends(job: Path) -> pd.DataFrame:
    """One row per test sample: family, measured ms, the network alone, both baselines, both blends, ``w``."""
    long = read_predictions(job)
    wide = long.pivot(index="sample_id", columns="predictor", values="pred_ms")
    for name in ("opcost", "flops"):
        if name not in wide:
            raise GnnperfError(f"{job}: no '{name}' predictions (train with both in baselines)")
    first = long.groupby("sample_id")[["true_ms", "family"]].first().reindex(wide.index)
    net = wide["gnn_no_fallback"] if "gnn_no_fallback" in wide else wide["gnn"]
    log_net, log_opc = np.log(net), np.log(wide["opcost"])
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(
            np.abs(log_opc - log_net) > 1e-9, (np.log(wide["gnn"]) - log_net) / (log_opc - log_net), 0.0
        )
    w = np.clip(np.nan_to_num(w), 0.0, 1.0)
    return pd.DataFrame(
        {
            "family": first["family"],
            "true": first["true_ms"],
            "network_alone": net,
            "opcost_fallback": wide["gnn"],
            "flops_fallback": np.exp((1 - w) * log_net + w * np.log(wide["flops"])),
            "flops": wide["flops"],
            "opcost": wide["opcost"],
            "w": w,
        }
    )


def score_job(rows: pd.DataFrame) -> dict:
    blended = rows[rows.w > 1e-6]
    out = {k: _mape(rows[k], rows.true) for k in ("network_alone", *BLENDS, "flops", "opcost")}
    out |= {f"{k}_blended_rows": _mape(blended[k], blended.true) for k in BLENDS}
    return out | {"samples_blended": len(blended), "n": len(rows)}


def _mean(jobs: dict) -> dict:
    """Each score's mean over the jobs that have it."""
    out = {}
    for k in next(iter(jobs.values())):
        values = [j[k] for j in jobs.values() if j[k] is not None]
        out[k] = round(float(np.mean(values)), 2) if values else None
    return out


def score_study(jobs: list[Path]) -> dict:
    """Each job, their mean, and the blended rows of every job pooled per family (opcost minus flops blend)."""
    per_job, frames = {}, []
    for job in jobs:
        rows = blends(job)
        per_job[str(job)] = score_job(rows)
        print(job, per_job[str(job)])
        frames.append(rows[rows.w > 1e-6])
    pooled = pd.concat(frames)
    if pooled.empty:
        raise GnnperfError(f"no job of {', '.join(map(str, jobs))} blends any row: nothing to compare")
    families = {
        str(f): {k: _mape(g[k], g.true) for k in BLENDS}
        | {"rows": len(g), "mean_w": round(float(g.w.mean()), 3)}
        for f, g in pooled.groupby("family")
    }
    for f in families.values():
        f["opcost_minus_flops"] = round(f["opcost_fallback"] - f["flops_fallback"], 2)
    mean = _mean(per_job)
    return {
        "jobs": per_job,
        "mean": mean,
        "blended_rows_opcost_minus_flops": round(
            mean["opcost_fallback_blended_rows"] - mean["flops_fallback_blended_rows"], 2
        ),
        "families": families,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "jobs", type=Path, nargs="*", help="job folders of runs with unseen_op_fallback=opcost"
    )
    parser.add_argument(
        "--study", nargs="+", action="append", metavar="NAME JOB", help="a study's name, then its job folders"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if bool(args.jobs) == bool(args.study):
        raise GnnperfError("give job folders or --study NAME JOB..., not both nor neither")
    if args.jobs:
        jobs = {str(job): score_job(blends(job)) for job in args.jobs}
        for job, scores in jobs.items():
            print(job, scores)
        result = {"jobs": jobs, "mean": _mean(jobs)}
        print("mean", result["mean"])
    else:
        if any(len(s) < 2 for s in args.study):
            raise GnnperfError("--study takes a name and at least one job folder")
        studies = {s[0]: score_study([Path(j) for j in s[1:]]) for s in args.study}
        diffs = [s["blended_rows_opcost_minus_flops"] for s in studies.values()]
        fams = [
            f["opcost_minus_flops"]
            for s in studies.values()
            for f in s["families"].values()
            if f["mean_w"] >= CARRIES
        ]
        # positive: the flops blend is the better one
        result = {
            "studies": studies,
            "opcost_minus_flops": {
                "per_study": dict(zip(studies, diffs, strict=True)),
                "mean_over_studies": round(float(np.mean(diffs)), 2),
                f"families_flops_ahead_where_mean_w_>=_{CARRIES}": f"{sum(d > 0 for d in fams)} of {len(fams)}",
                "mean_over_families": round(float(np.mean(fams)), 2),
            },
        }
        print(json.dumps(result["opcost_minus_flops"], indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
