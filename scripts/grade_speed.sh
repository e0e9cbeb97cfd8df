#!/usr/bin/env bash
# How long `cargo grade <exercise>` takes: the first grade once the exercise crate must be built
# (its own crate only: the library and dependencies are already built, as after any earlier
# grade), a re-grade with nothing changed, and a re-grade after a one-line edit of the file the
# student edits. Prints the machine, its load and the three wall times. Not a test: timings
# depend on the machine.
#
# Usage: scripts/grade_speed.sh [EXERCISE_ID] [EDITED_FILE]
#   default: 01-1 exercises/01-device-management/1-fix-the-mismatch/src/fix_the_mismatch.rs
set -euo pipefail
cd "$(dirname "$0")/.."
id=${1:-01-1}
file=${2:-exercises/01-device-management/1-fix-the-mismatch/src/fix_the_mismatch.rs}
package=$(sed -n 's/^name = "\(.*\)"/\1/p' "$(dirname "$(dirname "$file")")/Cargo.toml" | head -1)
backup=$(mktemp)
cp -p "$file" "$backup"
trap 'cp -p "$backup" "$file"; rm -f "$backup"' EXIT

now() { date +%s.%N; }
timed() { # label, then the command; prints wall seconds
  local label=$1; shift
  local t0 t1
  t0=$(now)
  "$@" >/dev/null 2>&1 || true # a stub fails its tests: exit status 1 is expected
  t1=$(now)
  printf '%-44s %6.1f s\n' "$label" "$(echo "$t1 - $t0" | bc)"
}

echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
echo "command: cargo grade $id   (edited file: $file)"
cargo build --quiet -p grader --bin grade # the grader itself, built once
cargo clean --quiet -p "$package"
timed "first grade (exercise crate not built)" cargo grade "$id"
timed "re-grade, nothing changed" cargo grade "$id"
echo "// a one-line edit" >>"$file"
timed "re-grade after a one-line edit" cargo grade "$id"
# What a re-grade builds: every crate must be Fresh but the edited exercise.
echo "rebuilt by a plain cargo build after grading (should be none):"
cargo test --lib --no-run -v -p "$package" 2>&1 | grep -E '^\s+(Compiling|Running)' || echo "  none"
