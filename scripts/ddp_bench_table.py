#!/usr/bin/env python3
"""The markdown table of scripts/ddp_bench.sh: medians per process count, ours and PyTorch's
DDP (gloo), each against its own one-process run and ours against PyTorch's.

  python3 scripts/ddp_bench_table.py RAW   (lines "N <json>", as ddp_bench.sh writes them)
"""

import json
import statistics
import sys


def main():
    ours, pyg = {}, {}
    for line in open(sys.argv[1]):
        n, j = line.split(" ", 1)
        j = json.loads(j)
        (pyg if j.get("impl") == "pyg-ddp-gloo" else ours).setdefault(int(n), []).append(j)

    def med(rs):
        return statistics.median(r["epoch_ms"] for r in rs)

    base = med(ours[min(ours)])
    pbase = med(pyg[min(pyg)]) if pyg else None
    print("\n| processes | steps per epoch | ours: epoch (ms) | ours: each rank's loop (ms) "
          "| ours vs 1 process | PyTorch DDP (gloo): epoch (ms) | PyTorch vs 1 process "
          "| ours / PyTorch |")
    print("|---|---|---|---|---|---|---|---|")
    for n, rs in sorted(ours.items()):
        e = med(rs)
        per = [statistics.median(r["rank_epoch_ms"][k] for r in rs) for k in range(n)]
        p = med(pyg[n]) if n in pyg else None
        cells = [f"{p:.1f}", f"{p / pbase:.2f}", f"{e / p:.2f}"] if p else ["-", "-", "-"]
        print(f"| {n} | {rs[0]['steps_per_epoch']} | {e:.1f} | "
              f"{' / '.join(f'{x:.1f}' for x in per)} | {e / base:.2f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
