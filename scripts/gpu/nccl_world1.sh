#!/usr/bin/env bash
# Runs crates/workbook/tests/nccl.rs (parallel::NcclGroup; module nccl of the test binary it) with world size 1 on a machine lent
# ONE GPU, from a binary built elsewhere (the GPU machine has no Rust toolchain), from the
# repository root there:  bash scripts/gpu/nccl_world1.sh PACK_DIR LOG_DIR
#
# Build and pack here (a CPU machine), as for run_tests.sh (../shared/notes/cuda.md: nvcc 13.0
# from PyPI, CUDA_COMPUTE_CAP=90, link-time stubs in CUDA_ROOT/lib64), plus a stub for NCCL,
# made like the others from cudarc's bindings (cudarc/src/nccl/sys/mod.rs, soname libnccl.so.2;
# mkstubs.py's table needs the line  'nccl': ('nccl', 'libnccl.so.2')):
#   python3 scripts/gpu/pack.py .gpu --features workbook/nccl --only '^crates/workbook/nccl$'
# Never run a binary built with the nvcc shim of .ci/cuda: its kernels are empty.
#
# There, libnccl.so.2 comes from PyTorch's pip packages (nvidia/nccl/lib, which setup.sh puts on
# LD_LIBRARY_PATH with the other CUDA libraries). WORKBOOK_REQUIRE_GPU=1 makes a missing GPU a
# failure rather than a skip. Expected: the world-of-one test and the two-ranks-on-one-GPU test
# pass; the two tests that need two GPUs print SKIPPED (no machine with two GPUs is available to
# this project). The script fails unless the world-of-one test really ran.
set -u
source "$(dirname "$0")/setup.sh" "$1" "$2"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/gpu.txt"
exe=$(awk -F'\t' '$3 == "it" && $4 == "crates/workbook" { print $1 }' "$pack/manifest.tsv")
if [ -z "$exe" ]; then
  echo "nccl_world1.sh: $pack/manifest.tsv has no crates/workbook test binary \`it\` (tests/nccl.rs is its module nccl): pack with --features workbook/nccl --only '^crates/workbook/it\$'" >&2
  exit 2
fi
if ldd "$exe" | grep 'not found'; then
  echo "nccl_world1.sh: $exe cannot start: the libraries above are missing (libnccl.so.2 is in PyTorch's nvidia-nccl pip package)" >&2
  exit 2
fi
ldd "$exe" | grep -E 'libnccl|libcuda' | tee "$logs/nccl_libs.txt"
log="$logs/nccl_world1.log"
(cd /work/main/crates/workbook && WORKBOOK_REQUIRE_GPU=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN} \
  timeout 300 "$exe" nccl:: --include-ignored --test-threads=1 --nocapture) >"$log" 2>&1
rc=$?
cat "$log"
if ! grep -q 'nccl: rank 0 of 1 on cuda:0: all-reduce and broadcast checked' "$log"; then
  echo "nccl_world1.sh: FAILED: the world-of-one test did not run to its end (exit $rc)" >&2
  exit 1
fi
echo "nccl_world1.sh: exit $rc; $(grep -E '^test result:' "$log" | tail -1)"
exit $rc
