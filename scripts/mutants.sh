#!/usr/bin/env bash
# teacher-only: left out of the students' handout (cargo grade --make-handout).
# Mutation testing of the reference solutions: cargo-mutants mutates the files each exercise's
# students edit (the `edit` list of its exercise.toml), in the solution, and runs that solution's
# graded tests; a mutant that survives is a wrong solution the tests would accept. Slow (one
# build and test run per mutant), so it is not part of CI, which grades the hand-written wrong
# solutions (solutions/*/*/wrong/) instead. Accepted survivors: solutions/MUTANTS.md.
#
#   cargo install --locked cargo-mutants@27.1.0
#   scripts/mutants.sh                              # every solution
#   scripts/mutants.sh solutions/01-device-management/2-device-policy   # some of them
#
# MUTANT_TIMEOUT (seconds per mutant's test run, default 180) and MUTANTS_OUT (default
# target/mutants) tune it. Mutants are applied in place (--in-place, so the workspace's target
# folder is reused) and cargo-mutants restores each file; the script checks the tree is clean.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo-mutants >/dev/null; then
    echo "cargo-mutants is not installed: cargo install --locked cargo-mutants@27.1.0" >&2
    exit 2
fi
out=${MUTANTS_OUT:-target/mutants}
timeout=${MUTANT_TIMEOUT:-180}
if [ $# -eq 0 ]; then
    set -- solutions/*/*/
fi
for sol in "$@"; do
    sol=${sol%/}
    ex=exercises/${sol#solutions/}
    pkg=$(grep -m1 '^name' "$sol/Cargo.toml" | cut -d'"' -f2)
    files=$(python3 -c "import tomllib,sys; print(' '.join(tomllib.load(open(sys.argv[1], 'rb'))['edit']))" "$ex/exercise.toml")
    args=()
    for f in $files; do
        args+=(--file "$sol/$f")
    done
    test_args=(--lib)
    # 04-3's last test runs onnxruntime through Python; without it, it fails for every mutant
    # and would count each one as caught.
    if grep -q onnxruntime_agrees "$ex/exercise.toml" &&
        ! "${WORKBOOK_PYTHON:-python3}" -c "import onnxruntime, numpy, safetensors" 2>/dev/null; then
        echo "   (no onnxruntime: skipping onnxruntime_agrees_on_two_graph_sizes)"
        test_args+=(-- --skip onnxruntime_agrees_on_two_graph_sizes)
    fi
    mkdir -p "$out/$pkg"
    echo "== $pkg: ${files}"
    nice -n 10 cargo mutants --in-place --package "$pkg" "${args[@]}" \
        --timeout "$timeout" --baseline skip --output "$out/$pkg" -- "${test_args[@]}" || true
    if ! git diff --quiet -- "$sol"; then
        echo "cargo-mutants left $sol modified; restoring it" >&2
        git checkout -- "$sol"
    fi
done
echo "reports: $out/*/mutants.out/{caught,missed,timeout,unviable}.txt"
