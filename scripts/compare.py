#!/usr/bin/env python3
"""Workbook vs PyTorch Geometric: per-epoch and forward times on the same graphs, as a markdown table.

For every dataset, `workbook data` writes the graph file once; `workbook bench --graph FILE` and
`scripts/pyg_bench.py --graph FILE` then time the same models on it. Ratios are ours / PyG's
(below 1: the workbook is faster). Every raw JSON line is kept in --raw.

  python3 scripts/compare.py --datasets cora,csbm:100000 --models gcn,gatv2 --epochs 20

With --threads 1,2 every thread count gets its rows; with --rounds R the whole set of runs is
repeated R times, ours and PyG's alternating within each round (PyG first in every other round,
so neither side always runs on a warmer machine), and each cell is the median over the rounds
of each run's median. The issue-19 table (Cora, both models, 1 and 2 threads, 3 rounds):

  python3 scripts/compare.py --datasets cora --threads 1,2 --rounds 3 --python /work/pyg-venv/bin/python

Run it with a Python that has torch, torch_geometric and safetensors (or pass --python); without
them only the workbook's numbers are printed. Build first: cargo build --release.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_json(cmd):
    print("$ " + " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default="cora,csbm:100000")
    p.add_argument("--models", default="gcn,gatv2")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", default=None, help="thread count(s), e.g. 2 or 1,2 (default: all cores)")
    p.add_argument("--rounds", type=int, default=1, help="repeat everything, alternating sides")
    p.add_argument("--device", default="cpu", help="cpu or cuda (both sides)")
    p.add_argument("--workbook", default=os.path.join(ROOT, "target/release/workbook"))
    p.add_argument("--python", default=sys.executable, help="a Python with torch_geometric")
    p.add_argument("--raw", default=None, help="also write every JSON line to this file")
    args = p.parse_args()

    if not os.path.exists(args.workbook):
        sys.exit(f"{args.workbook} not found: run `cargo build --release` first")
    have_pyg = (
        subprocess.run(
            [args.python, "-c", "import torch, torch_geometric, safetensors"],
            stderr=subprocess.DEVNULL,
        ).returncode
        == 0
    )
    if not have_pyg:
        print(f"note: {args.python} lacks torch/torch_geometric/safetensors; PyG skipped", file=sys.stderr)

    common = ["--epochs", str(args.epochs), "--warmup", str(args.warmup)]
    threads = [int(t) for t in str(args.threads).split(",")] if args.threads else [None]
    load_before = os.getloadavg()
    # (dataset, model, threads) -> {"ours": [json, ...], "pyg": [json, ...]}, one entry per round
    runs, raw = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for dataset in args.datasets.split(","):
            paths[dataset] = os.path.join(tmp, dataset.replace(":", "_") + ".safetensors")
            subprocess.run(
                [args.workbook, "--device", "cpu", "data", "--dataset", dataset, "--out", paths[dataset]],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        for r in range(args.rounds):
            for dataset, path in paths.items():
                for model in args.models.split(","):
                    for t in threads:
                        extra = ["--threads", str(t)] if t else []
                        ours_cmd = [args.workbook, "--device", args.device, "bench", "--model", model,
                                    "--graph", path] + common + extra
                        pyg_cmd = [args.python, os.path.join(ROOT, "scripts/pyg_bench.py"), "--graph", path,
                                   "--model", model, "--device", args.device] + common + extra
                        sides = [("ours", ours_cmd)] + ([("pyg", pyg_cmd)] if have_pyg else [])
                        if r % 2 == 1:
                            sides.reverse()
                        cell = runs.setdefault((dataset, model, t), {"ours": [], "pyg": []})
                        for side, cmd in sides:
                            line = run_json(cmd)[0]
                            line["round"] = r
                            cell[side].append(line)
                            raw.append(line)
    load_after = os.getloadavg()

    if args.raw:
        with open(args.raw, "w") as f:
            for line in raw:
                f.write(json.dumps(line) + "\n")

    versions = ""
    pyg_lines = [l for c in runs.values() for l in c["pyg"]]
    if pyg_lines:
        versions = f", torch {pyg_lines[0]['torch']}, torch_geometric {pyg_lines[0]['torch_geometric']}"
    rounds = f"median over {args.rounds} alternating rounds of " if args.rounds > 1 else ""
    print(f"Machine: {os.cpu_count()} CPUs ({cpu_model()}), device {args.device}{versions}; "
          f"{rounds}medians of {args.epochs} runs after {args.warmup} warm-up; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after.\n")
    print("| graph | nodes | edges | model | threads | ours ms/epoch | PyG ms/epoch | ratio | ours fwd ms | PyG fwd ms | ratio | ours MiB | PyG MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def fmt(v, spec=".1f"):
        return "n/a" if v is None else format(v, spec)

    def med(lines, key):
        values = [l[key] for l in lines if l.get(key) is not None]
        return statistics.median(values) if values else None

    for (dataset, model, t), cell in runs.items():
        o, p_ = cell["ours"], cell["pyg"]
        oe, of, om = med(o, "epoch_ms"), med(o, "forward_ms"), med(o, "peak_mem_mb")
        te, tf, tm = med(p_, "epoch_ms"), med(p_, "forward_ms"), med(p_, "peak_mem_mb")
        print(
            f"| {dataset} | {o[0]['nodes']} | {o[0]['edges']} | {model} | {o[0]['threads']} "
            f"| {fmt(oe)} | {fmt(te)} | {fmt(oe / te if te else None, '.2f')} "
            f"| {fmt(of, '.2f')} | {fmt(tf, '.2f')} | {fmt(of / tf if tf else None, '.2f')} "
            f"| {fmt(om, '.0f')} | {fmt(tm, '.0f')} |"
        )


if __name__ == "__main__":
    main()
