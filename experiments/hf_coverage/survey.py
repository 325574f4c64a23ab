"""Which transformers language models ``gnnperf predict`` handles: every model type with a language-model head.

For each model type of the installed transformers with a language-model class (its causal-LM class, else its
sequence-to-sequence one, else its masked-LM one: ``MODEL_FOR_CAUSAL_LM_MAPPING``, ...),
a small shape of its default config (the fields of :data:`SHRINK` it has, set so; the rest its defaults) is
predicted as a user would (where that shape fails, again at the default widths with two layers, so that a failure
of the small shape alone is not counted as gnnperf's): ``gnnperf predict hf:TYPE?class=...&field=value... --hardware a100-sxm4-80gb
--batch-size 2 --seq-len 64 --json`` in a subprocess of its own (a time limit each), giving the time, the memory
estimate and what the prediction says about itself, or the one-line error. A row whose small shape transformers
itself refuses (a config check, a class that will not build) is counted apart from the rows gnnperf fails on.

    .venv/bin/python experiments/hf_coverage/survey.py --out experiments/hf_coverage/results.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# Small values for the size fields a config has (names differ between model types); the rest keep their defaults.
SHRINK = {
    **dict.fromkeys(("num_hidden_layers", "n_layer", "n_layers", "num_layers", "decoder_layers", "encoder_layers"), 2),
    **dict.fromkeys(("hidden_size", "n_embd", "d_model", "dim"), 128),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads", "decoder_attention_heads"), 4),
    "num_key_value_heads": 2,
    "head_dim": 32,
    **dict.fromkeys(("intermediate_size", "n_inner", "ffn_dim", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim"), 256),
    **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size", "intermediate_size_mlp"), 128),
    **dict.fromkeys(("num_local_experts", "num_experts", "n_routed_experts"), 4),
    **dict.fromkeys(("num_experts_per_tok", "num_experts_per_token"), 2),
    **dict.fromkeys(("n_group", "topk_group", "num_expert_group"), 1),  # expert groups: one of all four
}  # fmt: skip
# language-model heads in the order a model type's class is chosen
TASKS = ("CAUSAL_LM", "SEQ_TO_SEQ_CAUSAL_LM", "MASKED_LM")
# errors that are transformers' own refusal of the small shape or class, before gnnperf builds anything
CONFIG_ERRORS = ("hf config ", "cannot build hf:")


def references() -> list[tuple[str, str, str]]:
    """(model type, reference at a small shape, reference at the default widths with two layers) for every model
    type with a language-model class."""
    import transformers

    heads = [getattr(transformers, f"MODEL_FOR_{task}_MAPPING") for task in TASKS]
    rows = []
    for model_type, config_class in sorted(transformers.CONFIG_MAPPING.items()):
        head = next((m[config_class] for m in heads if config_class in m), None)
        if head is None:
            continue
        try:
            fields = config_class().to_dict()
        except Exception:  # a config class without usable defaults: tried as it is
            fields = {}
        shrink = {
            k: v
            for k, v in SHRINK.items()
            if isinstance(fields.get(k), int) and not isinstance(fields[k], bool)
        }
        if (
            "kv_lora_rank" in fields
        ):  # latent attention: its head widths are fields of their own, all heads kept
            shrink.pop("head_dim", None)
            if "num_key_value_heads" in shrink:
                shrink["num_key_value_heads"] = SHRINK["num_attention_heads"]
        if "num_experts_per_tok" in fields and any("experts" in k for k in shrink):
            shrink["num_experts_per_tok"] = 2  # some configs leave it None, which their own code cannot run
        layers = {k: v for k, v in shrink.items() if SHRINK[k] == 2 and "layer" in k}
        small, deep = (
            [f"class={head.__name__}", *(f"{k}={v}" for k, v in d.items())] for d in (shrink, layers)
        )
        rows.append((model_type, f"hf:{model_type}?{'&'.join(small)}", f"hf:{model_type}?{'&'.join(deep)}"))
    return rows


def predict(model_type: str, ref: str, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "gnnperf.cli", "predict", ref, "--hardware", "a100-sxm4-80gb"]
    cmd += ["--batch-size", "2", "--seq-len", "64", "--json"]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"model_type": model_type, "ref": ref, "status": "timeout", "seconds": timeout}
    row = {"model_type": model_type, "ref": ref, "seconds": round(time.perf_counter() - start, 1)}
    if done.returncode == 0:
        out = json.loads(done.stdout)
        memory = out.get("memory") or {}
        return row | {
            "status": "ok",
            "iteration_time_ms": out["iteration_time_ms"],
            "memory_total_mb": memory.get("total_mb"),
            "memory_note": out.get("memory_note"),
            "unseen_op_share": out.get("unseen_op_share", 0.0),
            "assumptions": out.get("assumptions", []),
        }
    error = next((line for line in reversed(done.stderr.splitlines()) if "error" in line.lower()), "")
    message = error.split("error: ", 1)[-1][:400]
    refused = any(message.startswith(p) for p in CONFIG_ERRORS)
    return row | {"status": "config" if refused else "failed", "error": message}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per model type")
    parser.add_argument("--types", nargs="*", help="only these model types")
    args = parser.parse_args()
    refs = [r for r in references() if not args.types or r[0] in args.types]

    def survey(model_type: str, small: str, wide: str) -> dict:
        row = predict(model_type, small, args.timeout)
        if row["status"] != "ok" and wide != small:
            row = predict(model_type, wide, args.timeout) | {"small_shape": row}
        return row

    rows = []
    with ThreadPoolExecutor(args.workers) as pool:
        for row in pool.map(lambda r: survey(*r), refs):
            rows.append(row)
            said = row.get("error") or f"{row.get('iteration_time_ms', 0):.2f} ms"
            print(
                f"{row['model_type']:28s} {row['status']:8s} {row['seconds']:6.1f}s {said[:150]}", flush=True
            )
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "failed", "config", "timeout")}
    import transformers

    summary = {"what": __doc__.splitlines()[0], "transformers": transformers.__version__, "counts": counts}
    args.out.write_text(json.dumps(summary | {"rows": rows}, indent=1) + "\n")
    print(counts)


if __name__ == "__main__":
    main()
