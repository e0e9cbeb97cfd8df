#!/usr/bin/env bash
# A RUSTC_WRAPPER that logs, for each crate rustc compiles, its name, opt-level and CPU seconds
# (user + sys, every thread) to the file $RUSTC_CPU_LOG, one line each:
#   candle_core opt=3 cpu=94.49 wall=442.81
# CPU seconds change far less with the machine's load than the wall times of `--timings`, so two
# builds on a shared machine can be compared crate by crate (docs/testing.md, "Build and test
# time"). Build scripts' own runs (ring's C compiler) are not rustc and are not logged.
#
#   RUSTC_WRAPPER=$PWD/scripts/rustc_cpu.sh RUSTC_CPU_LOG=/tmp/cpu.log cargo build --release ...
#   awk -F'cpu=' '{split($2, a, " "); t += a[1]} END {print t}' /tmp/cpu.log    # the sum
set -u
rustc=$1
shift
name=
next=
opt=0
for a in "$@"; do
  [ "$next" = name ] && name=$a
  next=
  case $a in
  --crate-name) next=name ;;
  opt-level=*) opt=${a#opt-level=} ;;
  esac
done
# cargo's queries (`rustc -vV`, `--print`) and runs without a log file pass straight through
if [ -z "$name" ] || [ "$name" = ___ ] || [ -z "${RUSTC_CPU_LOG:-}" ]; then
  exec "$rustc" "$@"
fi
times=$(mktemp)
/usr/bin/time -o "$times" -f '%U %S %e' "$rustc" "$@"
rc=$?
read -r user sys wall < <(tail -1 "$times")
rm -f "$times"
awk -v n="$name" -v o="$opt" -v u="$user" -v s="$sys" -v w="$wall" \
  'BEGIN { printf "%s opt=%s cpu=%.2f wall=%s\n", n, o, u + s, w }' >>"$RUSTC_CPU_LOG"
exit $rc
