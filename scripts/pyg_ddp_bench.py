#!/usr/bin/env python3
"""PyTorch's DistributedDataParallel (gloo, one process per rank, one thread each) on the
workbook's batches: the anchor of scripts/ddp_bench.sh.

PyG cannot sample here (its NeighborLoader needs pyg-lib or torch-sparse, whose wheels come only
from data.pyg.org), so each rank replays the batches `workbook bench --save-batches` wrote:
rank r takes batches r, r+N, r+2N, ... of every epoch (what a DistributedSampler over the
batches gives), and DDP all-reduces the gradients after each backward. Every rank makes the
same number of steps (a rank whose share ran out repeats its last batch, as DistributedSampler
pads). epoch_ms is the slowest rank's loop (gather, steps, all-reduce), median over the epochs
after the file's warm-up; sampling is not in it.

  target/release/workbook data --dataset csbm:100000 --out g.safetensors
  target/release/workbook bench --model gcn --graph g.safetensors --batch-size 512 \\
      --save-batches b.safetensors --epochs 4
  python3 scripts/pyg_ddp_bench.py --graph g.safetensors --batches b.safetensors --world 2
"""

import argparse
import json
import os
import statistics
import sys
import time


def rank_main(rank, args, out):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from safetensors import safe_open
    from safetensors.torch import load_file
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch_geometric.nn import GCNConv

    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    t = load_file(args.graph)
    x, y = t["x"].float(), t["y"].long()
    f, classes = x.shape[1], int(y.max()) + 1
    with safe_open(args.batches, framework="pt") as fh:
        meta = fh.metadata() or {}
        names = set(fh.keys())
        epochs = []
        e = 1
        while f"epoch{e}.batch0.n_id" in names:
            ep, b = [], 0
            while f"epoch{e}.batch{b}.n_id" in names:
                k = f"epoch{e}.batch{b}."
                ep.append((fh.get_tensor(k + "n_id").long(), fh.get_tensor(k + "edge_index").long(),
                           int(fh.get_tensor(k + "batch_size")[0])))
                b += 1
            epochs.append(ep)
            e += 1
    warmup = int(meta.get("warmup", 1))

    class Gcn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = GCNConv(f, 16)
            self.conv2 = GCNConv(16, classes)

        def forward(self, x, ei):
            x = F.dropout(x, p=0.5, training=self.training)
            x = self.conv1(x, ei).relu()
            x = F.dropout(x, p=0.5, training=self.training)
            return self.conv2(x, ei)

    torch.manual_seed(0)
    model = DDP(Gcn())
    opt = torch.optim.Adam([
        dict(params=model.module.conv1.parameters(), weight_decay=5e-4),
        dict(params=model.module.conv2.parameters(), weight_decay=0),
    ], lr=0.01)
    model.train()
    times = []
    for i, ep in enumerate(epochs):
        mine = ep[rank::args.world]
        steps = -(-len(ep) // args.world)
        mine = mine + [mine[-1]] * (steps - len(mine))
        dist.barrier()
        start = time.perf_counter()
        for n_id, ei, bs in mine:
            xb, yb = x[n_id], y[n_id]
            opt.zero_grad()
            loss = F.cross_entropy(model(xb, ei)[:bs], yb[:bs])
            loss.backward()
            opt.step()
        ms = torch.tensor([(time.perf_counter() - start) * 1e3])
        dist.all_reduce(ms, op=dist.ReduceOp.MAX)
        if i >= warmup:
            times.append(float(ms))
    if rank == 0:
        out.put({
            "impl": "pyg-ddp-gloo", "world_size": args.world, "threads_per_rank": 1,
            "batches_per_epoch": len(epochs[0]), "steps_per_epoch": -(-len(epochs[0]) // args.world),
            "epoch_ms": statistics.median(times) if times else None, "repeats": len(times),
            "torch": torch.__version__,
        })
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", required=True)
    p.add_argument("--batches", required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--port", default="29517")
    args = p.parse_args()
    try:
        import torch.multiprocessing as mp
    except ImportError as e:
        sys.exit(f"pyg_ddp_bench.py needs torch, torch_geometric and safetensors: {e}")
    os.environ["MASTER_PORT"] = args.port
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    mp.start_processes(rank_main, args=(args, out), nprocs=args.world, start_method="spawn")
    print(json.dumps(out.get()))


if __name__ == "__main__":
    main()
