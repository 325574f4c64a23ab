#!/usr/bin/env bash
# Measure datasets/h200 on one NVIDIA H200 with gnnperf's own harness (see datasets/README.md, "h200/").
# Run from the repository root on the GPU machine. Two parts, each capped in time: a SIGINT at the cap stops
# the run, and the store flushes what it measured (at most shard_every samples are lost to a harder kill).
#   datasets/h200/measure.sh [OUT]        # OUT: where logs and a tarball of the store go (default: /tmp/h200)
# Environment: TIMM_CAP_S, ZOO_CAP_S (seconds per part), ZOO_PER_FAMILY, MEASURE (measure config group).
set -u
out=${1:-/tmp/h200}
mkdir -p "$out"
store=datasets/h200
export PYTHONUNBUFFERED=1
measure=${MEASURE:-cuda}
common=(
  "measure=$measure" measure.settings.warmup=5 measure.settings.min_iters=15 measure.settings.max_time_s=1.5
  shard_every=10 build_graphs=false "out_dir=$store"
)

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit,memory.total \
  --format=csv >"$out/nvidia-smi.csv" 2>&1
python3 -c "import torch, timm; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), \
'timm', timm.__version__)" | tee "$out/versions.txt"

# Preflight: the harness on one CNN in every precision the parts use; stop at once if any fails.
python3 - "$measure" <<'PY' 2>&1 | tee "$out/preflight.log"
import sys
from gnnperf.measure.harness import measure
from gnnperf.measure.workload import MeasureSettings, Workload
from gnnperf.zoo.resolve import resolve

device = "cpu" if sys.argv[1] == "cpu" else "cuda"
settings = MeasureSettings(device=device, warmup=2, min_iters=5, max_iters=10, max_time_s=1.0)
spec = resolve("timm:resnet18")
for precision in ("amp_fp16", "amp_bf16", "fp32"):
    for optimizer in ("sgd", "adamw"):
        r = measure(spec, Workload(batch_size=8, precision=precision, optimizer=optimizer), settings)
        print(precision, optimizer, r["status"], r["iteration_time_ms"], r["error"])
        if r["status"] != "ok":
            sys.exit(3)
PY
[ "${PIPESTATUS[0]}" = 0 ] || { echo "preflight failed"; exit 3; }

# 1. The timm benchmark's training step, one model per timm module, at the RTX 3090 table's batch sizes.
timeout -s INT -k 30 "${TIMM_CAP_S:-270}" python3 -m gnnperf.apps.generate zoo=timm_rtx3090_train \
  workload=timm_train "${common[@]}" 2>&1 | tee "$out/timm.log"
echo "timm part: exit ${PIPESTATUS[0]} (0: done; 124: stopped at the cap, what it measured is stored)" | tee "$out/status.txt"
# 2. The first models of the CPU dataset's zoo draw (same seeds), GPU batch sizes and precisions.
timeout -s INT -k 30 "${ZOO_CAP_S:-150}" python3 -m gnnperf.apps.generate zoo=cpu_small \
  "zoo.samples_per_family=${ZOO_PER_FAMILY:-3}" workload=gpu_train "${common[@]}" 2>&1 | tee "$out/zoo.log"
echo "zoo part: exit ${PIPESTATUS[0]} (0: done; 124: stopped at the cap, what it measured is stored)" | tee -a "$out/status.txt"

tar czf "$out/h200.tgz" "$store"
ls -la "$store" | tail -3
