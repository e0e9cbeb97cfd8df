#!/usr/bin/env bash
# Runs the book's PyTorch/PyG demonstrations and writes what each prints to
# book/src/generated/python/, which the chapters quote:
#   <script>.txt          everything the script printed;
#   <script>.<name>.txt   one section (after a `@@ name` line), preceded by the versions line.
# Every output starts with the versions that produced it.
#   book/python/run.sh [PYTHON]        (default: python3; needs torch, torch_geometric,
#                                       onnx, onnxscript, onnxruntime: see README.md here)
set -euo pipefail
cd "$(dirname "$0")"
python=${1:-python3}
out=../src/generated/python
mkdir -p "$out"
rm -f "$out"/*.txt
for script in ch*.py; do
  name=${script%.py}
  echo "--- $script"
  # stderr is left out: warnings and the exporter's progress, not what the book quotes
  "$python" "$script" 2>/dev/null > "$out/$name.all.tmp"
  awk -v dir="$out" -v name="$name" '
    NR == 1 { header = $0; whole = dir "/" name ".txt" }
    /^@@ / { part = dir "/" name "." substr($0, 4) ".txt"; print header > part; next }
    { print > whole; if (part != "") print > part }
  ' "$out/$name.all.tmp"
  rm "$out/$name.all.tmp"
  cat "$out/$name.txt"
done
