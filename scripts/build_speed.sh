#!/usr/bin/env bash
# Issue 46's build goals, each as a ratio against its floor measured in the same run: a crate
# that depends only on candle-core and candle-nn at the versions of Cargo.lock (nothing built on
# candle can build faster). Every build starts from an empty target dir, without sccache and
# without incremental compilation, as on a fresh clone; the registry must already be fetched.
#
#   release  `cargo build --release -p workbook-cli` (what README's `cargo run --release` builds)
#            vs the floor in release.                                      goal: at most 1.2x
#   grade    the first `cargo grade 01-1` on a fresh clone vs the floor in the dev profile with
#            the workspace's dependency settings (opt-level 3, no debug info).  goal: at most 1.3x
#            (a stub fails its tests: the grade's exit status is ignored, its time is not)
#
# Usage: scripts/build_speed.sh [release] [grade]     (default: both)
# Work dir: $BUILD_SPEED_DIR (default target/build-speed), emptied first; removed at the end
# unless BUILD_SPEED_KEEP=1 (the timing reports, cargo-timing.html, stay in it then).
# Honours CARGO_BUILD_JOBS. Not a test: timings depend on the machine and its load.
# BUILD_SPEED_CPU=1 also sums the CPU seconds of every rustc run of each build but the grade
# (scripts/rustc_cpu.sh; far less sensitive to other work on the machine than wall time).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
what=("$@")
[ ${#what[@]} -gt 0 ] || what=(release grade)
work=${BUILD_SPEED_DIR:-$root/target/build-speed}
rm -rf "$work"
mkdir -p "$work"
unset RUSTC_WRAPPER CARGO_INCREMENTAL CARGO_TARGET_DIR RUSTC_CPU_LOG

locked() { # the version Cargo.lock pins for a package
  awk -v n="$1" '$0 == "name = \"" n "\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}
core=$(locked candle-core)
nn=$(locked candle-nn)
floor=$work/floor
mkdir -p "$floor/src"
cat >"$floor/Cargo.toml" <<TOML
[package]
name = "candle-floor"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
candle-core = "=$core"
candle-nn = "=$nn"

# As the workspace builds dependencies in the dev profile (Cargo.toml), so that the grade's floor
# is the same work.
[profile.dev.package."*"]
opt-level = 3
debug = false

# Not a member of the workbook's workspace.
[workspace]
TOML
cat >"$floor/src/main.rs" <<'RS'
use candle_core::{Device, Tensor};
use candle_nn::Module;

fn main() -> candle_core::Result<()> {
    let w = Tensor::ones((2, 3), candle_core::DType::F32, &Device::Cpu)?;
    let layer = candle_nn::Linear::new(w, None);
    let x = Tensor::ones((1, 3), candle_core::DType::F32, &Device::Cpu)?;
    println!("{}", layer.forward(&x)?);
    Ok(())
}
RS
# the same versions of everything below candle as the workspace
cp Cargo.lock "$floor/Cargo.lock"

now() { date +%s.%N; }
timed() { # variable name, then the command; its wall seconds go into the variable
  local var=$1 t0 t1
  shift
  local wrap=()
  # not for the grade: its builds run in the grader's sandbox, and its failure is expected
  if [ "${BUILD_SPEED_CPU:-0}" = 1 ] && [ "$var" != grade ]; then
    wrap=(env RUSTC_WRAPPER="$root/scripts/rustc_cpu.sh" RUSTC_CPU_LOG="$work/$var.cpu")
  fi
  t0=$(now)
  if ! "${wrap[@]}" "$@" >"$work/$var.log" 2>&1; then
    [ "$var" = grade ] || { tail -20 "$work/$var.log"; echo "failed: $*"; exit 1; }
  fi
  t1=$(now)
  printf -v "$var" '%.0f' "$(echo "$t1 - $t0" | bc)"
}
ratio() { echo "scale=2; $1 / $2" | bc; }
cpu() { # with BUILD_SPEED_CPU=1: the rustc CPU seconds of the build named $1
  [ -f "$work/$1.cpu" ] || return 0
  awk -F'cpu=' '{ split($2, a, " "); t += a[1] } END { printf " (rustc CPU %.0f s)", t }' "$work/$1.cpu"
}

echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), jobs ${CARGO_BUILD_JOBS:-all}"
echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the start"
cargo fetch --quiet
(cd "$floor" && cargo fetch --quiet)
for w in "${what[@]}"; do
  case $w in
  release)
    timed floor_release env CARGO_TARGET_DIR="$work/floor-release" \
      cargo build --release --manifest-path "$floor/Cargo.toml"
    timed project_release env CARGO_TARGET_DIR="$work/project-release" \
      cargo build --release -p workbook-cli --timings
    echo "release: cargo build --release -p workbook-cli ${project_release} s$(cpu project_release); floor (candle-core $core + candle-nn $nn) ${floor_release} s$(cpu floor_release); ratio $(ratio "$project_release" "$floor_release") (goal <= 1.2)"
    ;;
  grade)
    timed floor_dev env CARGO_TARGET_DIR="$work/floor-dev" \
      cargo build --manifest-path "$floor/Cargo.toml"
    timed grade env CARGO_TARGET_DIR="$work/project-grade" cargo grade 01-1
    echo "grade:   first cargo grade 01-1 ${grade} s$(cpu grade); floor in the dev profile ${floor_dev} s$(cpu floor_dev); ratio $(ratio "$grade" "$floor_dev") (goal <= 1.3)"
    ;;
  *)
    echo "usage: scripts/build_speed.sh [release] [grade]" >&2
    exit 2
    ;;
  esac
done
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the end"
if [ "${BUILD_SPEED_KEEP:-0}" = 1 ]; then
  echo "kept: $work"
else
  rm -rf "$work"
fi
