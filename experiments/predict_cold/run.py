"""Cold `gnnperf predict` for timm models the shipped predictor never saw, what the imports alone cost, and the
same predictions in one warm process (imports and checkpoint loaded once, graphs not cached).

Each measurement is a fresh Python process (nothing imported, no graph cached: `GNNPERF_CACHE` points at an
empty folder), timed from the outside; medians of the repeats. The load average is recorded before each run,
since a busy 2-core machine slows every figure.

    .venv/bin/python experiments/predict_cold/run.py [--repeats 3] [--out experiments/predict_cold/results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable
# timm models absent from every table the shipped predictor learned from (its MODEL_CARD lists the sources)
MODELS = ("timm:fastvit_t8", "timm:efficientvit_b0", "timm:convnextv2_atto")
IMPORTS = {
    "torch": "import torch",
    "torch + timm": "import torch, timm",
    "torch + torch_geometric": "import torch, torch_geometric",
    "gnnperf predict's imports": "import torch, timm, torch_geometric, onnx, torch.onnx",
    # as gnnperf imports them since 2026-12-03: without timm's wandb and torch_geometric's transformers imports
    "torch + timm, gnnperf.imports": "import torch; from gnnperf.imports import import_timm; import_timm()",
    "torch + torch_geometric, gnnperf.imports": "import torch; from gnnperf.imports import import_pyg; import_pyg()",
    "gnnperf predict's imports, gnnperf.imports": (
        "import torch, onnx, torch.onnx; from gnnperf.imports import import_pyg, import_timm; import_timm(); import_pyg()"
    ),
}


WARM = """
import json, sys, time
from gnnperf.predict import Predictor, Query
predictor = Predictor.from_checkpoint()
predictor.predict(Query("timm:resnet18", "a100-sxm4-40gb", 64))  # pays the lazy imports inside the exporters
out = {}
for ref in sys.argv[1:]:
    t = time.perf_counter()
    predictor.predict(Query(ref, "a100-sxm4-40gb", 64, precision="amp_fp16"))
    out[ref] = time.perf_counter() - t
print(json.dumps(out))
"""


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    load = os.getloadavg()[0]
    t = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - t, load, out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=HERE / "results.json")
    args = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    results: dict = {"imports": {}, "predict": {}}
    for label, code in IMPORTS.items():
        runs = [_timed([PY, "-c", code], env)[:2] for _ in range(args.repeats)]
        results["imports"][label] = {"s_median": statistics.median(r[0] for r in runs), "runs": runs}
        print(f"{label:28s} {results['imports'][label]['s_median']:.2f} s", flush=True)
    for ref in MODELS:
        runs = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as cache:
                cmd = [PY, "-m", "gnnperf.cli", "predict", ref, "--hardware", "a100-sxm4-40gb"]
                cmd += ["--batch-size", "64", "--precision", "amp_fp16", "--json"]
                s, load, out = _timed(cmd, dict(env, GNNPERF_CACHE=cache))
                runs.append(
                    {"s": s, "load_avg_1min": load, "iteration_time_ms": json.loads(out)["iteration_time_ms"]}
                )
        results["predict"][ref] = {"s_median": statistics.median(r["s"] for r in runs), "runs": runs}
        print(f"predict {ref:24s} {results['predict'][ref]['s_median']:.2f} s", flush=True)
    with (
        tempfile.TemporaryDirectory() as cache
    ):  # one process: imports and checkpoint paid once, graphs not cached
        _, _, out = _timed([PY, "-c", WARM, *MODELS], dict(env, GNNPERF_CACHE=cache))
    results["warm_process_s"] = json.loads(out)
    print("in a warm process:", json.dumps(results["warm_process_s"]), flush=True)
    args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
