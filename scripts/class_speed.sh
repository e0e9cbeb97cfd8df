#!/usr/bin/env bash
# teacher-only: left out of the students' handout (cargo grade --make-handout).
# Times `cargo grade --class` on a class made from this checkout: N students (default 8), each a
# copy of the handout (the tracked files without solutions/), every other one with the reference
# solutions of the selected exercises copied into their edit files, the rest with the stubs.
#
#   scripts/class_speed.sh [N] [SELECTION...]        # default: 8 students, chapter 01
#   GRADE=/path/to/grade scripts/class_speed.sh 8 01  # time another grader binary (e.g. an older one)
#
# Prints the wall time of the class run (the handout build and the references' recording
# included) and the load average before and after; leaves the class and its reports in a
# temporary folder it names.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
n=${1:-8}
shift || true
selection=("$@")
[ ${#selection[@]} -gt 0 ] || selection=(01)
work=$(mktemp -d)
handout="$work/handout"
mkdir -p "$handout" "$work/class"
git archive HEAD | tar -x -C "$handout"
rm -rf "$handout/solutions"
sed -i 's#, *"solutions/\*/\*"##; /^ *"solutions\/\*\/\*",$/d' "$handout/Cargo.toml"
# The edit files of the selected exercises, from the grader's own listing.
edits=$(cargo grade --list "${selection[@]}" | awk '{print $4}')
for i in $(seq 1 "$n"); do
  student="$work/class/student$i"
  cp -r "$handout" "$student"
  if [ $((i % 2)) -eq 1 ]; then
    for ex in $edits; do
      dir=${ex#exercises/}
      for file in "solutions/$dir"/src/*.rs; do
        name=$(basename "$file")
        [ "$name" = lib.rs ] || cp "$file" "$student/exercises/$dir/src/$name"
      done
    done
  fi
done
grade=${GRADE:-}
echo "class of $n in $work/class, selection: ${selection[*]}; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s.%N)
if [ -n "$grade" ]; then
  "$grade" --class "$work/class" --jobs 2 --reports "$work/reports" "${selection[@]}" >"$work/out.txt" 2>&1 || true
else
  cargo grade --class "$work/class" --jobs 2 --reports "$work/reports" "${selection[@]}" >"$work/out.txt" 2>&1 || true
fi
end=$(date +%s.%N)
tail -n 3 "$work/out.txt"
printf 'class run: %.1f s (%s students, %s); load after: %s; %s\n' \
  "$(echo "$end - $start" | bc)" "$n" "${selection[*]}" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u '+%Y-%m-%d %H:%M UTC')"
echo "reports: $work/reports (class: $work/class); root: $root"
