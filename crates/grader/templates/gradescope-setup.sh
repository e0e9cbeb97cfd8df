#!/usr/bin/env bash
# Gradescope autograder set-up for the workbook (made by `cargo grade --make-judge DIR`; runs
# once, when Gradescope builds the autograder image). Installs Rust and bubblewrap, then grades
# the handout's own stubs once, so that every submission afterwards builds one exercise crate.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq bubblewrap build-essential curl ca-certificates git python3-venv
if ! command -v cargo >/dev/null; then
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
fi
. "$HOME/.cargo/env"
cd /autograder/source
# The tests of exercise 04-3 run onnxruntime through Python.
python3 -m venv /autograder/ort && /autograder/ort/bin/pip install -q onnxruntime numpy safetensors
mkdir -p /tmp/warm && cp -r /autograder/source/exercises /tmp/warm/
WORKBOOK_PYTHON=/autograder/ort/bin/python bash /autograder/source/run_autograder --warm /tmp/warm || true
