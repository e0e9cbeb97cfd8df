#!/usr/bin/env bash
# Runs the test binaries packed by scripts/gpu/pack.py on a GPU machine without a Rust toolchain,
# from the repository root there:  bash scripts/gpu/run_tests.sh PACK_DIR LOG_DIR
#
# The binaries were built at /work/main (sources) and /work/cuda-target (artifacts); both paths
# are recreated here as links, and ../shared as PACK_DIR/shared when it was packed.
# Every test binary runs with --include-ignored (the GPU tests are ignored only without the
# `cuda` feature, so this adds nothing else but makes the intent plain), except:
#   - exercise stubs (they fail by design; their solutions run instead),
#   - tests that need cargo or rustc (trybuild compile-fail cases, the grader's own tests).
# The exercises' `accelerator()` is cuda:0 in a cuda build on a machine with a GPU.
set -u
source "$(dirname "$0")/setup.sh" "$1" "$2"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/gpu.txt"

run_one() {
  local exe=$1 pkg=$2 name=$3 dir=$4
  local log="$logs/$pkg--$name.log"
  case "$dir" in exercises/*) echo "SKIP $pkg $name (exercise stub)"; return;; esac
  case "$name" in
    compile_fail|grade_cli|repository)
      echo "SKIP $pkg $name (needs cargo)"; return;;
  esac
  local start=$SECONDS
  (cd "/work/main/$dir" && timeout 420 "$exe" --include-ignored) >"$log" 2>&1
  local rc=$?
  local summary
  summary=$(grep -E '^test result:' "$log" | tail -1)
  echo "$([ $rc = 0 ] && echo PASS || echo "FAIL($rc)") $pkg $name $((SECONDS - start))s $summary"
}
export -f run_one; export logs
cut -f1-4 "$pack/manifest.tsv" | xargs -P 4 -L 1 bash -c 'run_one "$@"' _ | tee "$logs/summary.txt"
echo "failed: $(grep -c '^FAIL' "$logs/summary.txt")"
