"""Selective checkpointing by op (torchtitan's), measured on this CPU, beside gnnperf's estimate of it.

The same measurement as ``run.py`` (one step's peak resident memory rise in a fresh process, glibc's mmap threshold
fixed; step times alternated in one process), with the blocks checkpointed by
:func:`gnnperf.graph.checkpointing.selective_checkpointing` (``torch.utils.checkpoint`` with a selective policy:
the outputs of every odd ``aten.mm`` and of fused attention kept, the rest recomputed), against plain and fully
checkpointed steps; beside each, ``training_memory(..., checkpointing="selective")`` and the composed time.

    .venv/bin/python experiments/checkpointing/selective.py --out experiments/checkpointing/results_selective.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from run import REPEATS, peak_rise, run_child, timed  # noqa: E402 - run.py's measurement

# sdpa attention (the fused kernel the policy keeps; CPU flash attention here), dropout off as in run.py
MODELS = [
    ("hf:llama?num_hidden_layers=8&hidden_size=512&intermediate_size=1408&num_attention_heads=8"
     "&num_key_value_heads=8&vocab_size=2000&attn_implementation=sdpa", (512,), 4),
    ("hf:llama?num_hidden_layers=8&hidden_size=512&intermediate_size=1408&num_attention_heads=8"
     "&num_key_value_heads=2&vocab_size=2000&attn_implementation=sdpa", (1024,), 2),
    ("hf:gpt2?class=GPT2LMHeadModel&n_layer=6&resid_pdrop=0&embd_pdrop=0&attn_pdrop=0&vocab_size=2000"
     "&bos_token_id=0&eos_token_id=0&attn_implementation=sdpa", (512,), 4),
]  # fmt: skip
MODES = ("plain", "full", "selective")


def _checkpoint(model, mode: str) -> None:
    from gnnperf.graph.checkpointing import library_checkpointing, selective_checkpointing

    if mode == "full":
        library_checkpointing(model, True)
    elif mode == "selective":
        selective_checkpointing(model)


def child(ref: str, shape: tuple[int, ...], batch: int, mode: str) -> dict:
    """One mode's peak resident memory rise and step time, or (``timing``) the median times of the plain, selective
    and forward-only steps, alternated (the selective step on a second copy of the model)."""
    from gnnperf.measure.harness import build_model
    from gnnperf.measure.workload import Workload
    from gnnperf.zoo.resolve import resolve

    spec = resolve(ref)
    workload = Workload(input_shape=shape, batch_size=batch, optimizer="sgd")
    model = build_model(spec, workload)
    if mode != "timing":
        _checkpoint(model, mode)
        return peak_rise(spec, workload, model)
    selective = build_model(spec, workload)
    _checkpoint(selective, "selective")
    forward = replace(workload, timed="fwd", optimizer="none")
    times: dict[str, list[float]] = {"plain": [], "selective": [], "forward": []}
    for _ in range(REPEATS):
        for name, m, w in (
            ("plain", model, workload),
            ("selective", selective, workload),
            ("forward", model, forward),
        ):
            times[name].append(timed(spec, w, m)["iteration_time_ms"])
    return {name: float(np.median(v)) for name, v in times.items()} | {"runs": times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        ref, shape, batch, mode = json.loads(args.child)
        print(json.dumps(child(ref, tuple(shape), batch, mode)))
        return

    from gnnperf.graph.memory import training_memory
    from gnnperf.measure.workload import Workload
    from gnnperf.predictor.recompute import FORWARD_SHARE

    rows = []
    for ref, shape, batch in MODELS:
        workload = Workload(input_shape=shape, batch_size=batch, optimizer="sgd")
        est = {
            mode: training_memory(ref, workload, checkpointing={"plain": False, "full": True}.get(mode, mode))
            for mode in MODES
        }
        # the estimate's counterpart of the measured rise: the peak less the weights and the GPU workspace
        rise = {mode: e.total_mb - e.weights_mb - e.workspace_mb for mode, e in est.items()}
        measured = {mode: run_child(ref, shape, batch, mode, __file__)["peak_rise_mb"] for mode in MODES}
        timing = run_child(ref, shape, batch, "timing", __file__)
        share = est["selective"].checkpointing.recompute_share
        composed = timing["plain"] * (1 + FORWARD_SHARE * share)
        row = {
            "model": ref,
            "input_shape": list(shape),
            "batch_size": batch,
            "estimated_peak_rise_mb": {m: round(v, 1) for m, v in rise.items()},
            "measured_peak_rise_mb": {m: round(v, 1) for m, v in measured.items()},
            "estimated_over_measured": {m: round(rise[m] / measured[m], 3) for m in MODES},
            "saving_mb": {
                mode: {
                    "estimated": round(rise["plain"] - rise[mode], 1),
                    "measured": round(measured["plain"] - measured[mode], 1),
                }
                for mode in ("full", "selective")
            },
            "recompute_share": {
                "full": round(est["full"].checkpointing.recompute_share, 4),
                "selective": round(share, 4),
            },
            "step_ms": {k: round(timing[k], 2) for k in ("plain", "selective", "forward")},
            "selective_step_composed_ms": round(composed, 2),
            "composed_over_measured": round(composed / timing["selective"], 3),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.out:
        args.out.write_text(json.dumps({"rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
