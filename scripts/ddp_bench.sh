#!/usr/bin/env bash
# Epoch time of distributed mini-batch training, 1 process against 2 (and more), in one run:
# `mpirun -n N workbook train --distributed` on the same graph and settings, one thread per
# process, the process counts alternating round by round so that neither always runs on a
# warmer machine. Prints every run's JSON line and a markdown table of medians.
#
#   cargo build --release -p workbook-cli --features mpi
#   scripts/ddp_bench.sh [--dataset csbm:100000] [--ranks 1,2] [--rounds 3] [--epochs 3] [--batch-size 512]
#
# epoch_ms is the slowest rank's training loop (sampling, copies, steps, all-reduce), mean over
# the epochs after the first; evaluation (rank 0 only) is not in it.
set -euo pipefail
cd "$(dirname "$0")/.."
dataset=csbm:100000 ranks=1,2 rounds=3 epochs=3 batch=512 model=gcn
while [ $# -gt 0 ]; do
  case "$1" in
    --dataset) dataset=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
bin=target/release/workbook
[ -x "$bin" ] || { echo "build first: cargo build --release -p workbook-cli --features mpi" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RAYON_NUM_THREADS=1
raw=$(mktemp)
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  for n in ${ranks//,/ }; do
    line=$(mpirun -n "$n" --oversubscribe "$bin" train --distributed --model "$model" \
      --dataset "$dataset" --epochs "$epochs" --batch-size "$batch" 2>/dev/null | grep '^{')
    echo "$line"
    echo "$n $line" >> "$raw"
  done
done
python3 - "$raw" <<'EOF'
import json, statistics, sys
runs = {}
for l in open(sys.argv[1]):
    n, j = l.split(" ", 1)
    runs.setdefault(int(n), []).append(json.loads(j))
base = statistics.median(r["epoch_ms"] for r in runs[min(runs)])
print("\n| processes | epoch (ms, median) | per-rank loop (ms) | steps per epoch | vs 1 process |")
print("|---|---|---|---|---|")
for n, rs in sorted(runs.items()):
    e = statistics.median(r["epoch_ms"] for r in rs)
    per = [statistics.median(r["rank_epoch_ms"][k] for r in rs) for k in range(n)]
    print(f"| {n} | {e:.0f} | {' / '.join(f'{p:.0f}' for p in per)} | {rs[0]['steps_per_epoch']} | {e / base:.2f} |")
EOF
