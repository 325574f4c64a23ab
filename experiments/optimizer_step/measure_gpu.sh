#!/usr/bin/env bash
# The same GPU training steps without an optimizer update and with SGD, Adam and AdamW, with gnnperf's own harness,
# for experiments/optimizer_step (the shipped predictor's GPU update has never been checked against a measurement).
# Prepared for a lent GPU machine; not yet run on one. From the repository root there:
#   experiments/optimizer_step/measure_gpu.sh [OUT]     # OUT: logs and a tarball of the store (default /tmp/gpu_opt)
# Two parts, each capped by a SIGINT at its time cap (the store keeps what it measured): fp32, then AMP fp16, on
# conf/zoo/gpu_optimizers.yaml (GPT-2 and BERT first: the steps the shipped v20 prices an update below nothing).
# Environment: FP32_CAP_S, AMP_CAP_S (seconds per part), MEASURE (measure config group; cpu for a dry run here),
# STORE (default datasets/gpu_optimizers). The device image lacks hydra-core, omegaconf and antlr4: carry them as
# wheels in .whl/ and install them first (/work/.library/device/README.md), e.g.
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
#   python3 -m pip install -q --no-deps --no-build-isolation -e . && experiments/optimizer_step/measure_gpu.sh $OUT
set -u
out=${1:-/tmp/gpu_opt}
mkdir -p "$out"
store=${STORE:-datasets/gpu_optimizers}
export PYTHONUNBUFFERED=1
measure=${MEASURE:-cuda}
common=(
  zoo=gpu_optimizers workload=gpu_train_optimizers "measure=$measure" measure.settings.warmup=5
  measure.settings.min_iters=15 measure.settings.max_time_s=1.5 shard_every=4 build_graphs=false "out_dir=$store"
)

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit,memory.total \
  --format=csv >"$out/nvidia-smi.csv" 2>&1
python3 -c "import torch, timm, transformers; print('torch', torch.__version__, 'cudnn', \
torch.backends.cudnn.version(), 'timm', timm.__version__, 'transformers', transformers.__version__)" | tee "$out/versions.txt"

# Preflight: every optimizer and both precisions on one small CNN; stop at once if any fails.
python3 - "$measure" <<'PY' 2>&1 | tee "$out/preflight.log"
import sys
from gnnperf.measure.harness import measure
from gnnperf.measure.workload import MeasureSettings, Workload
from gnnperf.zoo.resolve import resolve

device = "cpu" if sys.argv[1] == "cpu" else "cuda"
settings = MeasureSettings(device=device, warmup=2, min_iters=5, max_iters=10, max_time_s=1.0)
spec = resolve("timm:resnet18")
for precision in ("fp32",) if device == "cpu" else ("fp32", "amp_fp16"):
    for optimizer in ("none", "sgd", "adam", "adamw"):
        timed = "fwd+bwd" if optimizer == "none" else "fwd+bwd+opt"
        w = Workload(batch_size=8, precision=precision, optimizer=optimizer, timed=timed)
        r = measure(spec, w, settings)
        print(precision, optimizer, r["status"], r["iteration_time_ms"], r["error"])
        if r["status"] != "ok":
            sys.exit(3)
PY
[ "${PIPESTATUS[0]}" = 0 ] || { echo "preflight failed"; exit 3; }

timeout -s INT -k 30 "${FP32_CAP_S:-300}" python3 -m gnnperf.apps.generate "${common[@]}" 2>&1 | tee "$out/fp32.log"
echo "fp32 part: exit ${PIPESTATUS[0]} (0: done; 124: stopped at the cap, what it measured is stored)" | tee "$out/status.txt"
if [ "$measure" != cpu ]; then
  timeout -s INT -k 30 "${AMP_CAP_S:-180}" python3 -m gnnperf.apps.generate "${common[@]}" \
    'workload.precisions=[amp_fp16]' 2>&1 | tee "$out/amp.log"
  echo "amp part: exit ${PIPESTATUS[0]}" | tee -a "$out/status.txt"
fi

tar czf "$out/gpu_optimizers.tgz" "$store"
ls -la "$store" | tail -3
