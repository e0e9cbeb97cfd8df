#!/usr/bin/env bash
# Executes the notebooks headless with the evcxr Rust kernel and saves their outputs in place,
# failing on the first cell error (naming the notebook and the cell) or on a notebook without an
# inline figure. The committed outputs are produced by this script; CI runs it (.ci/run).
#
#   notebooks/run.sh                        # every notebook, in order
#   notebooks/run.sh 01-device-management   # some of them (names with or without .ipynb)
#   notebooks/run.sh --time [NAMES]         # writes nothing: warms, then times every cell
#                                           # (notebooks/warm.sh, which a presenter runs)
#
# Needs evcxr_jupyter 0.22 (`cargo install evcxr_jupyter --locked --version 0.22.0`); found as
# $EVCXR_JUPYTER, on PATH, or in ~/.cargo/bin. Python with nbclient: $NOTEBOOK_PYTHON, else a venv
# this script creates in target/notebook-venv. $NOTEBOOK_CELL_TIMEOUT: seconds per cell (1800).
# $NOTEBOOK_JOBS: notebooks run at the same time after the first, each in its own kernel (2).
set -euo pipefail
cd "$(dirname "$0")/.."

# The kernel: evcxr_jupyter --install writes the kernelspec "rust" (with this binary's absolute
# path) under ~/.local/share/jupyter/kernels/rust, or $JUPYTER_PATH/kernels/rust.
evcxr=${EVCXR_JUPYTER:-$(command -v evcxr_jupyter || echo "${CARGO_HOME:-$HOME/.cargo}/bin/evcxr_jupyter")}
if [ ! -x "$evcxr" ]; then
  echo "notebooks/run.sh: evcxr_jupyter not found (set EVCXR_JUPYTER, or install it with" >&2
  echo "  cargo install evcxr_jupyter --locked --version 0.22.0)" >&2
  exit 1
fi
echo "kernel: $evcxr (evcxr_jupyter has no --version; \`cargo install --list\` shows it)"
"$evcxr" --install >/dev/null

# Python with nbclient (Jupyter itself is not needed to execute notebooks).
if [ -n "${NOTEBOOK_PYTHON:-}" ]; then
  py=$NOTEBOOK_PYTHON
else
  venv=target/notebook-venv
  py=$venv/bin/python
  if ! { [ -x "$py" ] && "$py" -c "import nbclient, nbformat, jupyter_client" 2>/dev/null; }; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q nbclient nbformat jupyter_client ipykernel
  fi
fi

# The kernel compiles in $TMPDIR and can leave a few hundred MB there: give it its own, and clean
# it up. Compiled dependencies are reused across notebooks and runs from evcxr's cache
# (~/.cache/evcxr; each notebook's first cell sets `:cache 2000`).
tmp=$(mktemp -d "${TMPDIR:-/tmp}/workbook-notebooks.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp

# evcxr's own configuration for these runs only (the user's ~/.config/evcxr is not read): by
# default evcxr catches a panic, prints it and reports the cell as successful; here a panic aborts
# the kernel's subprocess, so the cell fails and so does this script.
mkdir -p "$tmp/evcxr-config"
echo ":preserve_vars_on_panic 0" >"$tmp/evcxr-config/init.evcxr"
export EVCXR_CONFIG_DIR=$tmp/evcxr-config

# evcxr 0.22 loads each cell's code from a library it builds; with incremental compilation
# turned off (CARGO_INCREMENTAL=0, as .ci/run sets for its builds) that load fails at the first
# code cell with "dlsym failed" (seen in CI, 26 Nov 2026; the same notebook passes without it).
unset CARGO_INCREMENTAL

mode=()
if [ "${1:-}" = "--time" ]; then
  mode=(--time)
  shift
fi
notebooks=()
if [ $# -eq 0 ]; then
  notebooks=(notebooks/0*.ipynb)
else
  for name in "$@"; do
    name=${name#notebooks/}
    notebooks+=("notebooks/${name%.ipynb}.ipynb")
  done
fi
# Kernel logs (cargo output of the first cell, panics): target/notebook-logs/NAME.kernel.log.
"$py" notebooks/execute.py "${mode[@]}" --timeout "${NOTEBOOK_CELL_TIMEOUT:-1800}" \
  --jobs "${NOTEBOOK_JOBS:-2}" --log-dir target/notebook-logs \
  "${notebooks[@]}"
