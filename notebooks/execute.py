#!/usr/bin/env python3
"""Executes notebooks with the evcxr Rust kernel ("rust") and writes the outputs back in place.

Called by notebooks/run.sh, which installs the kernel and sets up TMPDIR. Each notebook runs in
its own kernel with the notebook's folder as working directory (so `:dep workbook = { path =
"../crates/workbook" }` resolves): the first notebook alone, which fills evcxr's cache, then the
others --jobs at a time. The first cell error stops everything with the notebook's name, the
cell's number and its output. A notebook is written back (atomically: a temporary file
in the same folder, then a rename) only when every cell ran and it holds at least one inline
figure (an output with an <svg>).

With --time (notebooks/warm.sh), nothing is written back: each notebook runs once to warm evcxr's
cache, then again in a fresh kernel with nbclient's per-cell timing (`record_timing`), and a table
of every code cell's time is printed against the presenter's budget (FIRST_BUDGET seconds for the
first cell, which loads the dependencies, CELL_BUDGET for every other cell on a warm cache).
"""

import argparse
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import datetime

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Seconds a cell may take on a warm kernel in class (issue 48): the first cell (`:dep`, the
# dependencies from evcxr's cache and the workbook crate compiled) and every other cell.
FIRST_BUDGET, CELL_BUDGET = 20.0, 5.0


def figures(nb):
    """Number of outputs holding an inline SVG figure."""
    count = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if any("<svg" in str(v) for v in data.values()):
                count += 1
    return count


def expects_error(cell):
    """A cell tagged `raises-exception` shows a compiler error on purpose (nbclient goes on past
    it): the program the type system refuses, in chapter 1."""
    return "raises-exception" in cell.get("metadata", {}).get("tags", [])


def missing_expected_errors(nb):
    """Cell numbers of the cells tagged `raises-exception` that ran without an error: a program
    the lesson says is refused was accepted."""
    return [k for k, cell in enumerate(nb.cells, 1)
            if cell.cell_type == "code" and expects_error(cell)
            and not any(o.get("output_type") == "error" for o in cell.get("outputs", []))]


def error_outputs(nb):
    """(cell number, text) of every error output or printed panic, in case one did not stop
    execution (evcxr reports a caught panic as a successful cell); cells tagged
    `raises-exception` are expected to have one."""
    found = []
    for k, cell in enumerate(nb.cells, 1):
        if expects_error(cell):
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append((k, "\n".join(out.get("traceback", [])) or out.get("evalue", "")))
            elif out.get("output_type") == "stream" and "panicked at" in out.get("text", ""):
                found.append((k, out["text"]))
    return found


def failing_cell(nb):
    """The first code cell without an execution count after one that has one: where it stopped."""
    last = None
    for k, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code":
            continue
        if cell.get("execution_count") is None:
            return last
        last = (k, cell)
    return last


def coalesce_streams(nb):
    """Merges consecutive stdout (stderr) outputs of a cell: evcxr sends every line on its own."""
    for cell in nb.cells:
        merged = []
        for out in cell.get("outputs", []):
            if (out.get("output_type") == "stream" and merged
                    and merged[-1].get("output_type") == "stream"
                    and merged[-1]["name"] == out["name"]):
                merged[-1]["text"] += out["text"]
            else:
                merged.append(out)
        if "outputs" in cell:
            cell.outputs = merged


def write_atomically(nb, path):
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            nbformat.write(nb, f)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def tail(path, lines=40):
    try:
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
    except OSError:
        return ""


def cell_times(nb):
    """[(cell number, code cell number, first line, seconds)] from nbclient's recorded timing:
    from the kernel's busy status to its reply, as a presenter waits for it."""
    rows, code = [], 0
    for k, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code":
            continue
        code += 1
        timing = cell.get("metadata", {}).get("execution", {})
        start = timing.get("iopub.status.busy") or timing.get("iopub.execute_input")
        end = timing.get("shell.execute_reply") or timing.get("iopub.status.idle")
        seconds = None
        if start and end:
            seconds = (datetime.fromisoformat(end.replace("Z", "+00:00"))
                       - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
        first = next((line for line in cell.source.splitlines() if line.strip()), "")
        rows.append((k, code, first, seconds))
    return rows


def time_table(path, rows):
    """The per-cell table warm.sh prints, and the number of cells over budget."""
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [f"{path}: per-cell time on a warm kernel (budget: first cell {FIRST_BUDGET:.0f} s, "
             f"others {CELL_BUDGET:.0f} s); load average {load} after it",
             f"{'cell':>4} {'code':>4} {'seconds':>8}  {'':6} first line"]
    over = 0
    for k, code, first, seconds in rows:
        budget = FIRST_BUDGET if code == 1 else CELL_BUDGET
        verdict = "?" if seconds is None else ("ok" if seconds <= budget else "OVER")
        over += verdict != "ok"
        shown = "-" if seconds is None else f"{seconds:.1f}"
        lines.append(f"{k:>4} {code:>4} {shown:>8}  {verdict:6} {first[:60]}")
    total = sum(s for *_, s in rows if s is not None)
    lines.append(f"total {total:.1f} s; {over} cell(s) over budget")
    return "\n".join(lines), over


def run(path, timeout, log_dir, timed=False):
    """Runs the notebook; writes it back unless TIMED, where it returns the executed notebook."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:  # no stale outputs survive a run
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    started, cell_seconds = {}, {}

    def cell_start(cell, cell_index, **_):
        started[cell_index] = time.monotonic()

    def cell_done(cell, cell_index, **_):
        if cell.cell_type == "code" and cell_index in started:
            cell_seconds[cell_index] = time.monotonic() - started[cell_index]

    client = NotebookClient(
        nb,
        on_cell_start=cell_start,
        on_cell_executed=cell_done,
        kernel_name="rust",
        timeout=timeout,
        startup_timeout=120,
        record_timing=timed,  # off when writing: keeps the committed files free of timestamps
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    # The kernel's own output (cargo compiling the dependencies) goes to a log, not the console.
    log_path = log_dir / f"{path.stem}.kernel.log"
    start = time.monotonic()
    try:
        with open(log_path, "w") as log:
            client.execute(stdout=log, stderr=log)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as e:
        where = failing_cell(nb)
        cell = f"cell {where[0]}" if where else "a cell"
        if where and isinstance(e, CellExecutionError):
            code_cells = [c for c in nb.cells if c.cell_type == "code"]
            cell = f"cell {where[0]} (code cell {code_cells.index(where[1]) + 1})"
        print(f"\nFAILED: {path} at {cell}: {type(e).__name__}\n{e}", file=sys.stderr)
        for out in (where[1].get("outputs", []) if where else []):
            if out.get("output_type") == "error":
                text = "\n".join(out.get("traceback", [])) or out.get("evalue", "")
                print(f"{out.get('ename')}: {out.get('evalue')}\n{ANSI.sub('', text)}", file=sys.stderr)
        print(f"\nlast lines of the kernel's log ({log_path}):\n{tail(log_path)}", file=sys.stderr)
        return None
    seconds = time.monotonic() - start
    errors = error_outputs(nb)
    if errors:
        k, text = errors[0]
        print(f"\nFAILED: {path} cell {k} has an error output:\n{text}", file=sys.stderr)
        return None
    accepted = missing_expected_errors(nb)
    if accepted:
        print(f"\nFAILED: {path} cell {accepted[0]} is tagged raises-exception (a program the "
              "compiler must refuse) but ran without an error", file=sys.stderr)
        return None
    n = figures(nb)
    if n == 0:
        print(f"\nFAILED: {path} has no inline figure (no output with an <svg>)", file=sys.stderr)
        return None
    if timed:
        return nb
    coalesce_streams(nb)
    write_atomically(nb, path)
    first = min(cell_seconds) if cell_seconds else None
    first_text = f" (first cell, :dep: {cell_seconds[first]:.0f} s)" if first is not None else ""
    print(f"{path}: {len(nb.cells)} cells, {n} figure(s), {seconds:.0f} s{first_text}", flush=True)
    return seconds


def own_evcxr_cache(parent):
    """A worker's start: a copy of evcxr's cache of its own, under PARENT, for the kernels it
    starts. evcxr counts each cache entry's uses in a file it rewrites on every hit; two kernels
    sharing one cache read each other's half-written counts and fail a cell ("Failed to wrap
    rustc: cannot parse integer from empty string", seen with two at a time)."""
    base = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    own = pathlib.Path(tempfile.mkdtemp(dir=parent))
    if (base / "evcxr").is_dir():
        shutil.copytree(base / "evcxr", own / "evcxr", symlinks=True)
    os.environ["XDG_CACHE_HOME"] = str(own)  # evcxr's cache: $XDG_CACHE_HOME/evcxr


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    parser.add_argument("--log-dir", type=pathlib.Path, default=pathlib.Path("target/notebook-logs"),
                        help="where the kernels' own output goes (one log per notebook)")
    parser.add_argument("--jobs", type=int, default=2,
                        help="notebooks run at the same time after the first (default 2); "
                             "--time always runs them one at a time")
    parser.add_argument("--time", action="store_true",
                        help="write nothing back: run each notebook once to warm the cache, then "
                             "again in a fresh kernel, and print every cell's time against the "
                             "budget (exit status 2 if a cell misses it)")
    args = parser.parse_args()
    args.log_dir.mkdir(parents=True, exist_ok=True)
    if args.time:
        return time_all(args)
    for path in args.notebooks:
        if not path.is_file():
            print(f"FAILED: {path}: no such notebook", file=sys.stderr)
            return 1
    started = time.monotonic()
    # The first notebook runs alone: its first cell compiles the dependencies into evcxr's cache,
    # which every other notebook's first cell (the same `:dep` lines) then only reads. The others
    # run --jobs at a time, each in a kernel (and a process) of its own: a kernel compiles each
    # cell on one core, so two of them keep a 2-core machine busy.
    first, rest = args.notebooks[0], args.notebooks[1:]
    print(f"executing {first} ...", flush=True)
    if run(first, args.timeout, args.log_dir) is None:
        return 1
    jobs = max(1, min(args.jobs, len(rest)))
    if rest:
        print(f"executing the other {len(rest)}, {jobs} at a time ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="evcxr-caches-") as caches, \
            ProcessPoolExecutor(max_workers=jobs, initializer=own_evcxr_cache,
                                initargs=(caches,)) as pool:
        running = {pool.submit(run, path, args.timeout, args.log_dir): path for path in rest}
        for done in as_completed(running):
            if done.result() is None:
                pool.shutdown(cancel_futures=True)
                return 1
    print(f"all {len(args.notebooks)} notebook(s) ran in {time.monotonic() - started:.0f} s "
          f"({jobs} at a time after the first)")
    return 0


def time_all(args):
    """--time: every notebook warmed (one run each), then each measured in a fresh kernel."""
    for path in args.notebooks:
        if not path.is_file():
            print(f"FAILED: {path}: no such notebook", file=sys.stderr)
            return 1
    for path in args.notebooks:
        print(f"warming: {path} ...", flush=True)
        if run(path, args.timeout, args.log_dir, timed=True) is None:
            return 1
    tables, over = [], 0
    for path in args.notebooks:
        print(f"measuring: {path} ...", flush=True)
        nb = run(path, args.timeout, args.log_dir, timed=True)
        if nb is None:
            return 1
        table, n = time_table(path, cell_times(nb))
        print(table, flush=True)
        tables.append(table)
        over += n
    print("\n" + "\n\n".join(tables))
    print(f"\n{over} cell(s) over budget in {len(args.notebooks)} notebook(s)")
    return 2 if over else 0


if __name__ == "__main__":
    sys.exit(main())
