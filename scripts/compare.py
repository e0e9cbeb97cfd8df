#!/usr/bin/env python3
"""Workbook vs PyTorch Geometric: per-epoch and forward times on the same graphs, as a markdown table.

For every dataset, `workbook data` writes the graph file once; `workbook bench --graph FILE` and
`scripts/pyg_bench.py --graph FILE` then time the same models on it. Ratios are ours / PyG's
(below 1: the workbook is faster). Every raw JSON line is kept in --raw.

  python3 scripts/compare.py --datasets cora,csbm:100000 --models gcn,gatv2 --epochs 20

Run it with a Python that has torch, torch_geometric and safetensors (or pass --python); without
them only the workbook's numbers are printed. Build first: cargo build --release.
"""

import argparse
import json
import os
import platform
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
    p.add_argument("--threads", type=int, default=None)
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
    if args.threads:
        common += ["--threads", str(args.threads)]
    rows, raw = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for dataset in args.datasets.split(","):
            path = os.path.join(tmp, dataset.replace(":", "_") + ".safetensors")
            subprocess.run(
                [args.workbook, "--device", "cpu", "data", "--dataset", dataset, "--out", path],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            for model in args.models.split(","):
                ours = run_json(
                    [args.workbook, "--device", args.device, "bench", "--model", model, "--graph", path]
                    + common
                )[0]
                raw.append(ours)
                theirs = None
                if have_pyg:
                    theirs = run_json(
                        [args.python, os.path.join(ROOT, "scripts/pyg_bench.py"), "--graph", path,
                         "--model", model, "--device", args.device]
                        + common
                    )[0]
                    raw.append(theirs)
                rows.append((dataset, model, ours, theirs))

    if args.raw:
        with open(args.raw, "w") as f:
            for line in raw:
                f.write(json.dumps(line) + "\n")

    versions = ""
    if any(t for *_, t in rows):
        t = next(t for *_, t in rows if t)
        versions = f", torch {t['torch']}, torch_geometric {t['torch_geometric']}"
    print(f"Machine: {os.cpu_count()} CPUs ({cpu_model()}), device {args.device}{versions}; "
          f"medians of {args.epochs} runs after {args.warmup} warm-up.\n")
    print("| graph | nodes | edges | model | ours ms/epoch | PyG ms/epoch | ratio | ours fwd ms | PyG fwd ms | ratio | ours MiB | PyG MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")

    def fmt(v, spec=".1f"):
        return "n/a" if v is None else format(v, spec)

    for dataset, model, o, t in rows:
        te, tf, tm = (t["epoch_ms"], t["forward_ms"], t["peak_mem_mb"]) if t else (None, None, None)
        print(
            f"| {dataset} | {o['nodes']} | {o['edges']} | {model} "
            f"| {fmt(o['epoch_ms'])} | {fmt(te)} | {fmt(o['epoch_ms'] / te if te else None, '.2f')} "
            f"| {fmt(o['forward_ms'])} | {fmt(tf)} | {fmt(o['forward_ms'] / tf if tf else None, '.2f')} "
            f"| {fmt(o['peak_mem_mb'], '.0f')} | {fmt(tm, '.0f')} |"
        )


if __name__ == "__main__":
    main()
