#!/usr/bin/env bash
# The GPU check: the variant-cost and utilization benchmarks on one GPU at d_model=1024, bf16
# (every wiring's step-time and memory ratios, standard's MFU), JSON results into $OUT (default
# benchmarks/results/gpu); then, where the project is installed (make setup), a quick-sized
# sweep with four trials sharing the GPU (--gpus-per-trial 0.25) and its report's cost columns.
# Not yet timed on a GPU with every wiring: the benchmarks had 8 minutes with eight.
#
#   bash benchmarks/gpu_check.sh                 # on a machine with a CUDA torch
#   DEVICE=cpu QUICK=1 bash benchmarks/gpu_check.sh   # checks the script itself on a CPU
#
# "Installs what it needs": the benchmarks import only torch and this checkout (trainers/,
# benchmarks/), so the script uses the machine's own python3 with the checkout on PYTHONPATH
# and installs nothing when that torch sees a GPU. GPU machines are often offline; where torch
# is missing and a package index is reachable, it installs torch into a throwaway venv.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results/gpu}"
DEVICE="${DEVICE:-cuda}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"

if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "no torch for $PY: installing one into .gpu-venv (needs a package index)"
    "$PY" -m venv .gpu-venv
    .gpu-venv/bin/pip install --quiet torch numpy
    PY=.gpu-venv/bin/python
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
"$PY" - "$DEVICE" <<'EOF'
import sys, torch
device = sys.argv[1]
if device.startswith("cuda") and not torch.cuda.is_available():
    sys.exit("gpu_check: torch sees no GPU (set DEVICE=cpu QUICK=1 to check the script itself)")
print(f"torch {torch.__version__}, device {torch.cuda.get_device_name() if device != 'cpu' else 'cpu'}")
EOF
quick=()
[[ -n "${QUICK:-}" ]] && quick=(--quick)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/gpu.csv" 2>/dev/null || true
for bench in utilization variant_cost; do
    start=$SECONDS
    timeout 300 "$PY" -m "benchmarks.$bench" --device "$DEVICE" --out "$OUT" "${quick[@]}" \
        | tee "$OUT/$bench.md"
    echo "$bench: $((SECONDS - start)) s"
done

# Four trials on one GPU, and what they recorded as cost (needs the project's venv).
if [[ -x .venv/bin/nas ]]; then
    gpus=0.25
    [[ "$DEVICE" == cpu ]] && gpus=0  # a CPU node has no GPU to share: check the script only
    steps=100
    [[ -n "${QUICK:-}" ]] && steps=10
    store="$(cd "$OUT" && pwd)/sweep"  # absolute, whether OUT is or not
    rm -rf "$store" && mkdir -p "$store"
    start=$SECONDS
    timeout 420 .venv/bin/nas sweep quick --name gpu_check --concurrency 4 \
        --gpus-per-trial "$gpus" --max-steps "$steps" --tracking-uri "sqlite:///$store/mlflow.db" \
        --storage-path "$store/ray" > "$OUT/sweep.txt"
    .venv/bin/nas report gpu_check --tracking-uri "sqlite:///$store/mlflow.db" --format md \
        --out "$store/report" > /dev/null
    sed -n '/^## Cost/,/^## One-axis/p' "$store/report/report.md" | tee "$OUT/sweep_cost.md"
    echo "sweep: $((SECONDS - start)) s"
else
    echo "no .venv/bin/nas here: the shared-GPU sweep is skipped (run make setup first)"
fi
