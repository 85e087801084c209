#!/usr/bin/env bash
# One device call on the GPU machine: the named steps in turn, each under its own time limit, with its log and
# results in $OUT/<step>/ and packed into $OUT/<step>.tgz (so that a step cut short still comes back whole).
#   source .gpu/setup.sh && COOPNN_COMMIT=<commit> bash bench/h200.sh tests
#   ... bash bench/h200.sh train hashgrid        (steps: see STEPS below; a call may take at most 600 s)
# The limits add up to what one call may take: name the steps of a call so that theirs fit.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?run this on the GPU machine, where OUT names the folder that comes back}"
export COOPNN_CACHE_DIR="${COOPNN_CACHE_DIR:-/tmp/coopnn-cache}"
nvidia-smi > "$OUT/device.txt" 2>&1 || true

declare -A LIMIT=([tests]=420 [train]=240 [hashgrid]=360 [run]=420 [device_arrays]=120 [torch_modules]=240
                  [train_variants]=420 [inference_variants]=420 [grid_probe]=90 [step_stages]=150)
declare -A STEPS=(
  [tests]="python3 -m pytest -m gpu -n 12 -q -rf -p no:cacheprovider tests"
  [train]="python3 bench/train.py --fit-steps 1000 --out \$dir && python3 bench/train.py --batch 65536 --out \$dir"
  [hashgrid]="python3 bench/hashgrid.py --fit-steps 1000 10000 --out \$dir"
  [run]="python3 bench/run.py --models mlp_3_64x2_3,mlp_32_64x4_16,mlp_64_128x4_16 --out \$dir --no-plot"
  [device_arrays]="python3 bench/device_arrays.py --out \$dir"
  [torch_modules]="python3 bench/torch_modules.py --out \$dir"
  [train_variants]="python3 bench/train_variants.py --out \$dir"
  [inference_variants]="python3 bench/inference_variants.py --out \$dir"
  [grid_probe]="python3 bench/grid_scatter_probe.py --out \$dir"
  [step_stages]="python3 bench/step_stages.py --models hashgrid_image,mlp_3_64x2_3,mlp_32_64x4_16,mlp_64_128x4_16 --out \$dir"
)

status=0
for step in "$@"; do
  if [ -z "${STEPS[$step]:-}" ]; then
    echo "unknown step '$step'; steps: ${!STEPS[*]}" >&2
    exit 2
  fi
  dir="$OUT/$step"
  mkdir -p "$dir"
  started=$(date +%s)
  timeout --kill-after=10 "${LIMIT[$step]}" bash -c "dir='$dir'; ${STEPS[$step]}" > "$dir/log.txt" 2>&1
  rc=$?
  echo "$step: exit $rc after $(( $(date +%s) - started )) s" | tee -a "$OUT/steps.txt"
  tail -n 15 "$dir/log.txt"
  tar -C "$OUT" -czf "$OUT/$step.tgz" "$step"
  [ "$rc" = 0 ] || status=$rc
done
exit "$status"
