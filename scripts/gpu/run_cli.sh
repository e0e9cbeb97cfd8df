#!/usr/bin/env bash
# The CLI on a GPU machine (binaries packed by scripts/gpu/pack.py), from the repository root:
#   bash scripts/gpu/run_cli.sh PACK_DIR LOG_DIR [compare.py arguments...]
# The main job, training on Cora on the GPU and the CPU (same binary), a mini-batch run,
# serve-demo and export, then scripts/compare.py --device cuda against PyG on the same GPU, with
# each process's peak GPU memory sampled by nvidia-smi (ours and PyG's counted the same way,
# CUDA context included). CLI_STEPS=0 skips straight to the comparison.
set -u
source "$(dirname "$0")/setup.sh" "$1" "$2"
shift 2
wb=/work/cuda-target/release/workbook
step() { echo "== $*"; "$@"; echo "== exit $?"; }
[ "${CLI_STEPS:-1}" = 0 ] || {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  cd "$logs" || exit 1
  step "$wb" --device cuda
  for m in gcn gatv2; do
    for d in cuda cpu; do step "$wb" --device $d train --model $m --dataset cora; done
  done
  step "$wb" --device cuda train --model gatv2 --dataset cora --batch-size 128 --ledger
  step "$wb" --device cuda serve-demo
  step "$wb" --device cuda train --model gcn --dataset cora --save gcn.safetensors
  step "$wb" --device cuda export --weights gcn.safetensors --format onnx --data cora --out gcn.onnx
  cd /work/main || exit 1
} > "$logs/cli.log" 2>&1
[ $# -gt 0 ] || exit 0
# Peak GPU memory per process (scripts/gpu/gpu_mem.py samples nvidia-smi) while compare.py runs.
python3 "$(dirname "$0")/gpu_mem.py" "$logs/gpu_mem.json" &
sampler=$!
python3 scripts/compare.py --device cuda --workbook "$wb" --python python3 --raw "$logs/compare.jsonl" "$@" \
  > "$logs/compare.txt" 2>&1
echo "compare.py exit $?" >> "$logs/compare.txt"
kill $sampler
