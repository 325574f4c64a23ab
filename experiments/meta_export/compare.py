"""Exports on the meta device against traces with values: the same graphs? and what they cost.

Graphs. For each model, :func:`gnnperf.graph.export.export_model` twice in one process: on the meta device
(``meta=True``) and traced with values (``meta=False``); both built into
the IR and featurised at batch 4 (:func:`gnnperf.graph.features.to_data`): same op sequence, same node, edge and
graph features? A model the meta device cannot export is counted with its one-line error. The models: 42 timm
architectures at 224 px, the NeuSight transformer configs the shipped predictor learned from (whole stacks), three
small decoders, and with ``--hf-coverage`` every language-model type of ``experiments/hf_coverage`` that gnnperf
predicts, at its small shape (2 blocks, width 128, 64 tokens).

Cost. LLaMA-3 8B's two exported blocks (the rest cloned in the IR) at 4,096 and 8,192 tokens, each export in its own
process (its peak resident memory), on the meta device and with values (at 8,192 tokens killed for memory here).

    .venv/bin/python experiments/meta_export/compare.py --hf-coverage experiments/hf_coverage/results.json \
        --out experiments/meta_export/results.json
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

LLAMA3_8B = (
    "hf:llama?class=LlamaForCausalLM&attn_implementation=sdpa&num_hidden_layers=32&hidden_size=4096"
    "&intermediate_size=14336&num_attention_heads=32&num_key_value_heads=8&vocab_size=128256&rope_theta=500000"
)
TIMM = [
    "resnet50", "densenet121", "mobilenetv3_large_100", "efficientnet_b0", "regnety_016", "convnext_tiny",
    "deit_small_patch16_224", "beit_base_patch16_224", "swin_tiny_patch4_window7_224", "levit_128", "mixer_b16_224",
    "coat_lite_tiny", "crossvit_tiny_240", "cait_xxs24_224", "xcit_tiny_12_p16_224", "twins_svt_small",
    "poolformer_s12", "ghostnet_100", "dla34", "hrnet_w18_small", "inception_v3", "res2net50_26w_4s", "skresnet18",
    "resnest14d", "cspresnet50", "vovnet39a", "dpn68", "nfnet_l0", "volo_d1_224", "pit_ti_224", "tnt_s_patch16_224",
    "convit_tiny", "visformer_tiny", "edgenext_small", "mobilevit_xs", "efficientformer_l1", "maxvit_nano_rw_256",
    "eva02_tiny_patch14_224", "repvgg_a2", "rexnet_100", "tresnet_m", "selecsls42b",
]  # fmt: skip
NEUSIGHT = ["gpt2_med", "opt", "gpt3_xl", "switchxl4", "bert"]  # the shipped predictor's transformer configs
HF = [
    "hf:llama?class=LlamaForCausalLM&num_hidden_layers=2&hidden_size=512&intermediate_size=1024"
    "&num_attention_heads=8&vocab_size=32000",
    "hf:qwen2?class=Qwen2ForCausalLM&num_hidden_layers=2&hidden_size=256&intermediate_size=512"
    "&num_attention_heads=4&num_key_value_heads=2",
    "hf:mixtral?class=MixtralForCausalLM&num_hidden_layers=2&hidden_size=256&intermediate_size=512"
    "&num_attention_heads=4&num_key_value_heads=2&num_local_experts=4",
]  # fmt: skip


def _exported(ref: str, shape: tuple[int, ...], on_meta: bool, num_layers: int | None = None):
    from gnnperf.graph.export import export_model
    from gnnperf.zoo.resolve import resolve

    spec = resolve(ref)
    start = time.perf_counter()
    e = export_model(spec, shape, num_layers=num_layers, meta=on_meta)
    return e, time.perf_counter() - start


def _ir(ref: str, shape: tuple[int, ...], e):
    from gnnperf.graph.ir import build_ir

    return build_ir(e.model, ref, shape, e.exporter, e.model_inputs, e.trainable)


def compare(ref: str, shape: tuple[int, ...], guard: bool = False) -> dict:
    """The two exports of ``ref`` compared; with ``guard``, not traced with values where the export's memory check
    says that would not fit (a survey type at its default widths), rather than risk the kernel killing the run."""
    from gnnperf.errors import GnnperfError
    from gnnperf.graph.features import to_data
    from gnnperf.measure.workload import Workload

    row = {"model": ref, "input_shape": list(shape)}
    try:
        meta, meta_s = _exported(ref, shape, on_meta=True)
    except GnnperfError as e:
        return {**row, "status": "refused on meta", "error": str(e).split(" failed: ")[-1]}
    from gnnperf.graph.meta_export import memory_shortfall
    from gnnperf.zoo.resolve import resolve

    if guard and (shortfall := memory_shortfall(resolve(ref), None, shape, 2)):  # T5Gemma's 5.6 billion
        return {**row, "status": "too large to trace with values here", "error": shortfall}
    try:
        values, values_s = _exported(ref, shape, on_meta=False)
    except GnnperfError as e:  # exported on the meta device, and not with values
        return {**row, "status": "fails with values", "error": str(e)}
    row |= {"meta_export_s": round(meta_s, 2), "export_s": round(values_s, 2)}
    graphs, errors = [], []
    for e in (meta, values):
        try:
            graphs.append(_ir(ref, shape, e))
        except (
            GnnperfError
        ) as err:  # shapes no static inference follows (gnnperf.graph.build tries dynamo then)
            errors.append(str(err))
    if errors:
        same = len(errors) == 2 and errors[0] == errors[1]
        status = "the same TorchScript graph fails to build" if same else "differs"
        return {**row, "status": status, "error": errors[0]}
    a, b = (to_data(g, Workload(batch_size=4, input_shape=shape)) for g in graphs)
    same_ops = [n.op_type for n in graphs[0].nodes] == [n.op_type for n in graphs[1].nodes]
    same_features = all(
        torch.equal(a[k], v) if torch.is_tensor(v) else a[k] == v
        for k, v in b  # a PyG Data's items
    )
    return {
        **row,
        "status": "same" if same_ops and same_features else "differs",
        "nodes": len(graphs[1].nodes),
        "same_ops": same_ops,
        "same_features": same_features,
    }


def _one_export(seq: int, on_meta: bool) -> None:
    """Run in a child process: one export of LLaMA-3 8B at ``seq`` tokens."""
    _, seconds = _exported(LLAMA3_8B, (seq,), on_meta, num_layers=2)  # as gnnperf.graph.build exports it
    # this process's own peak (VmHWM, in kB; getrusage's would count the parent's memory at the fork)
    status = Path("/proc/self/status").read_text()
    peak_gb = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 2**20
    print(json.dumps({"seconds": round(seconds, 1), "peak_rss_gb": round(peak_gb, 2)}))


def cost(seq: int, on_meta: bool) -> dict:
    cmd = [sys.executable, __file__, "--child", str(seq), "meta" if on_meta else "values"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    run = subprocess.run(cmd, capture_output=True, text=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB, the largest child so far
    row = {"seq_len": seq, "on_meta": on_meta, "returncode": run.returncode}
    if run.returncode == 0:
        return {**row, **json.loads(run.stdout.strip().splitlines()[-1])}
    # killed (by the kernel, for memory: -9): the largest child's peak, where it is this one's
    return {**row, "peak_rss_gb": round(peak / 2**20, 2) if peak > before else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--neusight", type=Path, default=Path(__file__).resolve().parents[3] / "shared/external/neusight"
    )
    parser.add_argument(
        "--hf-coverage", type=Path, help="experiments/hf_coverage/results.json: its predicted types as well"
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _one_export(int(args.child[0]), args.child[1] == "meta")
        return
    torch.set_num_threads(1)
    configs = args.neusight / "data/DLmodel_configs"
    surveyed = []
    models = [(f"timm:{m}", (3, 224, 224)) for m in TIMM]
    models += [(f"hf:{configs / name}.json", (128 if name == "switchxl4" else 512,)) for name in NEUSIGHT]
    models += [(ref, (128,)) for ref in HF]
    if args.hf_coverage:  # every language model type gnnperf predicts, at the survey's small shape
        survey = json.loads(args.hf_coverage.read_text())["rows"]
        surveyed = [(row["ref"], (64,)) for row in survey if row["status"] == "ok"]
    rows = []
    for ref, shape in models + surveyed:
        rows.append(compare(ref, shape, guard=(ref, shape) in surveyed))
        print(json.dumps(rows[-1]), flush=True)
    # with values last: a killed child's peak is read as the largest child's
    costs = [cost(seq, on_meta) for on_meta in (True, False) for seq in (4096, 8192)]
    for row in costs:
        print(json.dumps(row), flush=True)
    statuses = [
        "same",
        "differs",
        "refused on meta",
        "fails with values",
        "the same TorchScript graph fails to build",
        "too large to trace with values here",
    ]
    counts = {s: sum(r["status"] == s for r in rows) for s in statuses}
    results = {
        "counts": counts,
        "graphs": rows,
        "llama3_8b_export": costs,
        "threads": 1,
        "torch": torch.__version__,
    }
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
