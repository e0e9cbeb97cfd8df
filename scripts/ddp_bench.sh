#!/usr/bin/env bash
# Epoch time of distributed mini-batch training, 1 process against 2 (and more), in one run:
# `mpirun -n N workbook train --distributed` on the same graph and settings, one thread per
# process, the process counts alternating round by round so that neither always runs on a
# warmer machine. With --python (a Python with torch, torch_geometric, safetensors), the anchor
# in the same rounds: PyTorch's DistributedDataParallel over gloo with the same process counts,
# replaying the workbook's batches of the same size (scripts/pyg_ddp_bench.py). Prints every
# run's JSON line and a markdown table of medians.
#
#   cargo build --release -p workbook-cli --features mpi
#   scripts/ddp_bench.sh [--dataset csbm:100000] [--ranks 1,2] [--rounds 3] [--epochs 6] \
#       [--batch-size 16] [--python /work/pyg-venv/bin/python]
#
# epoch_ms is the slowest rank's training loop (ours: sampling, copies, steps, all-reduce; PyG:
# gather, steps, all-reduce, no sampling), after a barrier, mean (ours) or median (PyG) over the
# epochs after the first; evaluation is not in it. csbm graphs have Planetoid's split (20
# training nodes per class), so an epoch is a few small steps: this measures what a step and
# its all-reduce cost, not a big training set's compute.
set -euo pipefail
cd "$(dirname "$0")/.."
dataset=csbm:100000 ranks=1,2 rounds=3 epochs=6 batch=16 model=gcn python=
while [ $# -gt 0 ]; do
  case "$1" in
    --dataset) dataset=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
bin=target/release/workbook
[ -x "$bin" ] || { echo "build first: cargo build --release -p workbook-cli --features mpi" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RAYON_NUM_THREADS=1
raw=$(mktemp)
work=$(mktemp -d)
if [ -n "$python" ]; then
  "$bin" data --dataset "$dataset" --out "$work/g.safetensors" >/dev/null 2>&1
  "$bin" bench --model "$model" --graph "$work/g.safetensors" --batch-size "$batch" \
    --save-batches "$work/b.safetensors" --epochs "$epochs" >/dev/null 2>&1
fi
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  for n in ${ranks//,/ }; do
    line=$(mpirun -n "$n" --oversubscribe "$bin" train --distributed --model "$model" \
      --dataset "$dataset" --epochs "$epochs" --batch-size "$batch" 2>/dev/null | grep '^{')
    echo "$line"
    echo "$n $line" >> "$raw"
    if [ -n "$python" ]; then
      line=$("$python" scripts/pyg_ddp_bench.py --graph "$work/g.safetensors" \
        --batches "$work/b.safetensors" --world "$n" 2>/dev/null | grep '^{')
      echo "$line"
      echo "$n $line" >> "$raw"
    fi
  done
done
echo "# done $(date -u '+%H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 scripts/ddp_bench_table.py "$raw"
rm -rf "$work" "$raw"
