#!/usr/bin/env bash
# The GPU check: first the headline table (benchmarks/gpu/gpu_table.py: per wiring, a step eager,
# compiled and fused at GPT-2 small and at d_model 1024 / 32 layers, each row written to
# $OUT/headline.md and .jsonl as it is measured), then the utilization, decode, memory-plan,
# variant-cost and fused Block AttnRes benchmarks (the last needs '.[gpu]' and says so where its package does not import) on one GPU at
# d_model=1024, bf16 (standard's MFU, each wiring's decode and prefill cost with the KV cache, the
# memory plan against the measured peak with micro-batching and activation checkpointing, every
# wiring's step-time and memory ratios), JSON results into $OUT (default
# benchmarks/results/gpu); then, where the project is installed (make setup), a quick-sized
# sweep with four trials sharing the GPU (--gpus-per-trial 0.25) and its report's cost columns.
#
# It fits a time budget, BUDGET_S seconds (default 330: a device session's command gets 6
# minutes, and startup and the transfers need the rest). Each stage gets a share of what is left;
# a benchmark trims its rounds, then its deepest depths, to its share (--budget-s), and a stage
# that cannot fit is skipped. The last lines say what was trimmed and what skipped.
#
#   bash benchmarks/gpu/gpu_check.sh                 # on a machine with a CUDA torch
#   DEVICE=cpu bash benchmarks/gpu/gpu_check.sh      # the dry run: prints what a GPU run covers,
#                                                # then runs the tiny settings on the CPU
#
# "Installs what it needs": the benchmarks import torch, Lightning (trainers.measure.device_cost) and
# this checkout (trainers/, benchmarks/), so the script takes the first Python that has them:
# $PYTHON, the machine's python3, then the project's .venv (make setup), with the checkout on
# PYTHONPATH, and installs nothing. GPU machines are often offline; where none has them on a GPU
# machine and a package index is reachable, it installs torch and Lightning into a throwaway
# venv (.gpu-venv). The dry run never downloads a GPU build: without them it asks for make setup.
set -euo pipefail
cd "$(dirname "$0")/../.."  # the checkout: this script lives in benchmarks/gpu/
OUT="${OUT:-benchmarks/results/gpu}"
DEVICE="${DEVICE:-cuda}"
BUDGET_S="${BUDGET_S:-330}"
deadline=$((SECONDS + BUDGET_S))
fits() {  # does Python $1 import what the benchmarks need?
    command -v "$1" > /dev/null && "$1" -c "import lightning, torch" 2> /dev/null
}
PY=""
for candidate in ${PYTHON:-} python3 .venv/bin/python; do
    if fits "$candidate"; then PY=$candidate; break; fi
done
left() { echo $((deadline - SECONDS)); }
skipped=()
[[ "$DEVICE" == cpu ]] && QUICK=1  # a CPU cannot run the GPU sizes in the budget
mkdir -p "$OUT"

if [[ -z "$PY" && "$DEVICE" == cpu ]]; then
    echo "gpu_check: no Python here has torch and Lightning; run make setup first" >&2
    exit 2
elif [[ -z "$PY" ]]; then
    echo "no Python with torch and Lightning: installing them into .gpu-venv (needs a package" \
        "index)"
    python3 -m venv .gpu-venv
    .gpu-venv/bin/pip install --quiet torch lightning numpy
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
if [[ "$DEVICE" == cpu ]]; then
    echo "dry run on the CPU: tiny settings; a GPU run would cover:"
    "$PY" -m benchmarks.gpu.gpu_plan
fi
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/gpu.csv" 2>/dev/null || true

# Shares: the benchmarks split what is left after the sweep's reserve (SWEEP_S, where it can
# run) evenly among those still to run, each at most 90 s but the last, which takes the rest (a
# stage that finishes early leaves its time to the next); the sweep gets what remains.
SWEEP_S=120
sweep_reserve=0
[[ -x .venv/bin/nas ]] && sweep_reserve=$SWEEP_S
benches=(gpu.gpu_table model.utilization model.decode model.memory_plan model.variant_cost gpu.fused_block)
for i in "${!benches[@]}"; do
    bench=${benches[$i]##*.}  # its name without its room: its files' and its lines'
    module=benchmarks.${benches[$i]}
    to_run=$(( ${#benches[@]} - i ))
    share=$(( ($(left) - sweep_reserve - 20) / to_run ))
    (( to_run > 1 && share > 90 )) && share=90
    # the headline table first, with most of the time: its rows are what the check is for
    [[ "$bench" == gpu_table ]] && share=$(( ($(left) - sweep_reserve - 20) * 3 / 4 ))
    if (( share < 15 )); then
        skipped+=("$bench (${share} s left for it)")
        continue
    fi
    start=$SECONDS
    # The budget stops new rounds and depths; the timeout (the share plus the build of one
    # depth's models) stops a benchmark whose single round outlasts it.
    timeout $((share + 60)) "$PY" -m "$module" --device "$DEVICE" --out "$OUT" \
        --budget-s "$share" "${quick[@]}" | tee "$OUT/$bench.md" \
        || skipped+=("$bench (stopped at its timeout, $((share + 60)) s)")
    echo "$bench: $((SECONDS - start)) s of its ${share} s"
done

# Four trials on one GPU, and what they recorded as cost (needs the project's venv).
if [[ -x .venv/bin/nas ]] && (( $(left) < 60 )); then
    skipped+=("the shared-GPU sweep ($(left) s left)")
elif [[ -x .venv/bin/nas ]]; then
    gpus=0.25
    [[ "$DEVICE" == cpu ]] && gpus=0  # a CPU node has no GPU to share: check the script only
    steps=100
    [[ -n "${QUICK:-}" ]] && steps=10
    store="$(cd "$OUT" && pwd)/sweep"  # absolute, whether OUT is or not
    rm -rf "$store" && mkdir -p "$store"
    start=$SECONDS
    limit=$(( $(left) - 15 ))
    # A sweep stopped at its limit is reported as skipped, so that the summary below still prints.
    if timeout "$limit" .venv/bin/nas sweep quick --name gpu_check --concurrency 4 \
        --gpus-per-trial "$gpus" --max-steps "$steps" --tracking-uri "sqlite:///$store/mlflow.db" \
        --storage-path "$store/ray" > "$OUT/sweep.txt"; then
        .venv/bin/nas report gpu_check --tracking-uri "sqlite:///$store/mlflow.db" --format md \
            --out "$store/report" > /dev/null
        sed -n '/^## Cost/,/^## One-axis/p' "$store/report/report.md" | tee "$OUT/sweep_cost.md"
    else
        skipped+=("the shared-GPU sweep (stopped at its timeout, $limit s)")
    fi
    echo "sweep: $((SECONDS - start)) s"
else
    skipped+=("the shared-GPU sweep (no .venv/bin/nas here: run make setup first)")
fi
echo "gpu_check: ${SECONDS} s of a ${BUDGET_S} s budget"
grep -h "Trimmed to the time budget\|skipped:" "$OUT"/gpu_table.md "$OUT"/utilization.md "$OUT"/decode.md \
    "$OUT"/memory_plan.md "$OUT"/variant_cost.md "$OUT"/fused_block.md 2>/dev/null \
    | sed 's/^/  /' || true
if (( ${#skipped[@]} )); then
    printf '  skipped: %s\n' "${skipped[@]}"
else
    echo "  nothing skipped"
fi
