#!/usr/bin/env bash
# Prepares a presenting machine the day before a class, and says whether every cell will answer
# in seconds (issue 48):
#   1. installs the evcxr kernel ("rust") for Jupyter and the Python that executes notebooks
#      (target/notebook-venv, as notebooks/run.sh does);
#   2. runs every notebook once, which warms evcxr's cache (~/.cache/evcxr: the dependencies,
#      compiled once, about 2 minutes from cold);
#   3. runs each notebook again in a fresh kernel, as a presenter starts it in class, recording
#      every cell's time (nbclient's record_timing), and prints a table per notebook against the
#      budget: 20 s for the first cell (`:dep`: the cached dependencies loaded and the workbook
#      crate compiled), 5 s for every other cell.
# The committed notebooks are not rewritten (notebooks/run.sh does that). Exit status: 0 when
# every cell is within budget, 2 when some cell is over it (named in the table), 1 on a failure.
#
#   notebooks/warm.sh                          # all seven notebooks (about 15 minutes on 2 cores)
#   notebooks/warm.sh 01-device-management     # some of them
#
# Same environment as notebooks/run.sh (EVCXR_JUPYTER, NOTEBOOK_PYTHON, NOTEBOOK_CELL_TIMEOUT).
# Keep the machine and the toolchain you warmed: the cache is keyed by rustc and its flags.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "machine: $(uname -srm), $(nproc) cores; $(uptime)"
exec notebooks/run.sh --time "$@"
