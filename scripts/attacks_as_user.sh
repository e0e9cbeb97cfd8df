#!/usr/bin/env bash
# Runs the grader's attack tests (crates/grader/tests/attacks.rs) as a normal user, as a teacher
# without root grades a class: no uid per sandbox (the teacher's own, through an unprivileged user
# namespace), RLIMIT_NPROC counting all of the teacher's processes, and cgroups only where a
# delegated group exists. CI runs the same tests as root; this is the other half of the issue's
# "as root and as a normal user".
#
# Usage (as root, on a throw-away machine: it creates a user):
#   scripts/attacks_as_user.sh [USER]        # default user: workbook-teacher
#
# What it does: creates USER if missing, lets it read the root toolchain (chmod o+x on the
# folders above RUSTUP_HOME and CARGO_HOME; nothing is made writable), clones this repository
# into USER's home (committed files only: commit first), copies the registry cache so that
# nothing is downloaded, and runs `cargo test -p grader --test attacks` as USER, one test at a
# time. The first run builds the grader's tests from nothing (about 9 minutes on 2 cores).
set -euo pipefail

user=${1:-workbook-teacher}
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
    echo "attacks_as_user.sh: run it as root (it creates the user $user); as a normal user, just run: cargo test -p grader --test attacks -- --test-threads 1" >&2
    exit 2
fi
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_home=${CARGO_HOME:-$HOME/.cargo}
for tool in git cargo bwrap; do
    command -v "$tool" >/dev/null || { echo "attacks_as_user.sh: $tool is not installed" >&2; exit 2; }
done

id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
home=$(getent passwd "$user" | cut -d: -f6)
# Let the user reach the toolchain: execute (search) permission on each folder above it.
for dir in "$rustup_home" "$cargo_home/bin"; do
    d=$dir
    while [ "$d" != / ]; do
        chmod o+x "$d"
        d=$(dirname "$d")
    done
done
mkdir -p "$home/.cargo"
if [ -d "$cargo_home/registry" ] && [ ! -d "$home/.cargo/registry" ]; then
    cp -r "$cargo_home/registry" "$home/.cargo/"
fi
rm -rf "$home/workbook"
git -c safe.directory='*' clone -q "$repo" "$home/workbook"
chown -R "$user:" "$home/.cargo" "$home/workbook"

echo "running the attack tests as $user ($(id "$user")) in $home/workbook"
exec su - "$user" -c "export PATH='$cargo_home/bin':\$PATH RUSTUP_HOME='$rustup_home' CARGO_HOME='$home/.cargo'
cd '$home/workbook' && cargo test -p grader --test attacks -- --test-threads 1"
