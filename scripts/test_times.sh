#!/usr/bin/env bash
# The run time of every test binary of README's `cargo test` (issue 46's goal: the whole command
# in at most 10 minutes), one `cargo test -p PKG --lib|--bin B|--test T|--doc` at a time after
# one `cargo test --no-run` has built them all, so each row is that binary's run alone (plus
# cargo's start, about a second). Prints machine, load, date, then the rows slowest first and
# their sum. Extra arguments go to every run (e.g. `-- --test-threads=1`).
#
# Usage: scripts/test_times.sh [ARGS...]    Not a test: timings depend on the machine and load.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the start"
t0=$(date +%s.%N)
cargo test --no-run --message-format=json 2>/dev/null >target/test-times.json
t1=$(date +%s.%N)
printf 'build (cargo test --no-run): %.0f s\n' "$(echo "$t1 - $t0" | bc)"
# package, how to select the binary; one line each (doc tests: one per library)
python3 - target/test-times.json >target/test-times.list <<'PY'
import json, sys
seen = set()
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m["package_id"].startswith("path+"):
        continue  # the workspace's own packages only
    pkg = m["package_id"]  # path+file:///.../crates/workbook#0.1.0, or ...#name@0.1.0
    spec = pkg.split("#")[-1]
    pkgname = spec.split("@")[0] if "@" in spec else pkg.split("#")[0].rstrip("/").split("/")[-1]
    t = m["target"]
    kind = t["kind"][0]
    if m["profile"]["test"] and m.get("executable"):
        sel = {"lib": "--lib", "proc-macro": "--lib", "bin": f"--bin {t['name']}", "test": f"--test {t['name']}"}.get(kind)
        if sel:
            seen.add((pkgname, sel))
    elif kind in ("lib", "proc-macro") and t.get("doctest"):
        seen.add((pkgname, "--doc"))
for pkgname, sel in sorted(seen):
    print(pkgname, sel)
PY
rows=$(mktemp)
while read -r pkg sel; do
  s=$(date +%s.%N)
  # shellcheck disable=SC2086
  if cargo test -q -p "$pkg" $sel "$@" >target/test-times.log 2>&1; then status=ok; else status=FAILED; fi
  e=$(date +%s.%N)
  printf '%7.1f s  %-6s %s %s\n' "$(echo "$e - $s" | bc)" "$status" "$pkg" "$sel" | tee -a "$rows"
done <target/test-times.list
echo "--- slowest first"
sort -rn "$rows"
awk '{ s += $1 } END { printf "sum of the runs: %.0f s over %d binaries\n", s, NR }' "$rows"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the end"
rm -f "$rows"
