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

Mini-batch rows (--batch-size 128, with --num-neighbors, default 10,10): `workbook bench` also
trains by mini-batches (its "bench": "minibatch" line: epoch time, sampling share, and
compute_ms, the training steps alone) and, in the first round, writes every batch it trained on
(`--save-batches`). PyG cannot sample here (PyG 2.8's NeighborLoader needs pyg-lib or
torch-sparse, whose wheels come only from data.pyg.org), so `pyg_bench.py --batches` times PyG's
training step on exactly those batches: the ratio compares compute on identical subgraphs, and
sampling is the workbook's alone (its share is reported, PyG's is not timed). The loader is
deterministic in (seed, epoch, batch), so the batches of every later round are the same ones.
An epoch of a small training set is a single step of a few milliseconds: --batch-epochs times
more of them per run than --epochs (PyG replays as many), so one slow stretch of a process does
not move the median.

  python3 scripts/compare.py --datasets cora,csbm:100000 --threads 1,2 --rounds 3 \
      --batch-size 128 --python /work/pyg-venv/bin/python

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
    p.add_argument("--batch-size", type=int, default=None,
                   help="also mini-batch rows: seeds per batch (e.g. 128)")
    p.add_argument("--num-neighbors", default="10,10", help="with --batch-size: per hop, as PyG's")
    p.add_argument("--batch-epochs", type=int, default=None,
                   help="with --batch-size: timed mini-batch epochs (default: --epochs); PyG "
                        "replays as many")
    p.add_argument("--raw", default=None, help="also write every JSON line to this file")
    args = p.parse_args()
    if args.raw:
        open(args.raw, "w").close()

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
    runs, mini, raw = {}, {}, []
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
                        if args.batch_size:
                            batches = os.path.join(tmp, f"{dataset.replace(':', '_')}_{model}.batches.safetensors")
                            ours_cmd += ["--batch-size", str(args.batch_size),
                                         "--num-neighbors", args.num_neighbors]
                            if args.batch_epochs:
                                ours_cmd += ["--batch-epochs", str(args.batch_epochs)]
                            if not os.path.exists(batches):
                                # Round 0 runs ours first: it writes the batches PyG replays.
                                ours_cmd += ["--save-batches", batches]
                            pyg_cmd += ["--batches", batches]
                        sides = [("ours", ours_cmd)] + ([("pyg", pyg_cmd)] if have_pyg else [])
                        if r % 2 == 1:
                            sides.reverse()
                        cell = runs.setdefault((dataset, model, t), {"ours": [], "pyg": []})
                        mcell = mini.setdefault((dataset, model, t), {"ours": [], "pyg": []})
                        for side, cmd in sides:
                            for line in run_json(cmd):
                                line["round"] = r
                                (mcell if line.get("bench") == "minibatch" else cell)[side].append(line)
                                raw.append(line)
                                if args.raw:
                                    # As they come, so a run cut short keeps what it measured.
                                    with open(args.raw, "a") as f:
                                        f.write(json.dumps(line) + "\n")
    load_after = os.getloadavg()

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

    if not args.batch_size:
        return
    print(f"\nMini-batch epochs: batch size {args.batch_size}, num_neighbors {args.num_neighbors}, "
          f"medians of {args.batch_epochs or args.epochs} epochs per run; "
          "PyG trains on the workbook's batches (its sampling is not timed: PyG's NeighborLoader "
          "needs pyg-lib or torch-sparse). Ratio: ours compute / PyG compute.\n")
    print("| graph | model | threads | batches/epoch | ours ms/epoch | sampling share "
          "| ours compute ms | PyG compute ms | ratio | full-batch ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (dataset, model, t), cell in mini.items():
        o, p_ = cell["ours"], cell["pyg"]
        oe, share, oc = med(o, "epoch_ms"), med(o, "sampling_share"), med(o, "compute_ms")
        pc = med(p_, "epoch_ms")
        print(
            f"| {dataset} | {model} | {o[0]['threads']} | {o[0]['batches_per_epoch']} "
            f"| {fmt(oe, '.2f')} | {fmt(share * 100 if share is not None else None, '.0f')}% "
            f"| {fmt(oc, '.2f')} | {fmt(pc, '.2f')} | {fmt(oc / pc if pc else None, '.2f')} "
            f"| {fmt(med(o, 'full_batch_epoch_ms'), '.2f')} |"
        )


if __name__ == "__main__":
    main()
