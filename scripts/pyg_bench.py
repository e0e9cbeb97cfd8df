#!/usr/bin/env python3
"""Time PyTorch Geometric's GCN / GATv2 on a graph file, printing the keys `workbook bench` prints.

The graph file is what `workbook data --dataset NAME --out FILE` writes (safetensors: x,
edge_index, y, train/val/test masks), so both sides run on the same graph. The models and
optimiser settings are PyG's examples (gcn.py, gat.py), which are also the workbook's recipes:

  GCN:   dropout(0.5) -> GCNConv(F, 16) -> ReLU -> dropout(0.5) -> GCNConv(16, C);
         Adam lr 0.01, weight decay 5e-4 on the first layer only.
  GATv2: dropout(0.6) -> GATv2Conv(F, 8, heads=8, dropout=0.6) -> ELU -> dropout(0.6)
         -> GATv2Conv(64, C, heads=1, concat=False, dropout=0.6); Adam lr 0.005, decay 5e-4.

GCNConv runs with cached=False, as the workbook's does (it normalises every call).

forward_ms: one evaluation forward pass under torch.no_grad(); epoch_ms: forward with dropout,
cross-entropy on the training nodes, backward, optimiser step. Medians of --epochs runs after
--warmup untimed ones. Memory: peak resident set (ru_maxrss) and the resident set before the
model was built, as `workbook bench` reports them.

With --batches FILE (written by `workbook bench --batch-size N --save-batches FILE` on the same
graph) a second line, "bench": "minibatch", follows: a fresh model of the same recipe trained
over exactly the batches the workbook trained on, epoch by epoch (the file's warm-up epochs
untimed). Each step is PyG's mini-batch step: forward on (x[n_id], edge_index), cross-entropy
on the first batch_size rows, backward, optimiser step. epoch_ms is the median over the timed
epochs of the sum of those steps; gathering x[n_id] and y[n_id] (the loader's work) happens
before each step's timer starts. PyG's own sampling is not timed: its NeighborLoader needs
pyg-lib or torch-sparse, whose wheels come from data.pyg.org, and this keeps the comparison to
compute on identical subgraphs.

Needs: torch, torch_geometric, safetensors (pip install torch torch_geometric safetensors).
"""

import argparse
import json
import resource
import statistics
import sys
import time


def resident_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", required=True, help="graph file from `workbook data --out`")
    p.add_argument("--model", required=True, choices=["gcn", "gatv2"])
    p.add_argument("--epochs", type=int, default=20, help="timed repeats (median reported)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batches", default=None, help="also time mini-batch steps on this batch file")
    args = p.parse_args()

    try:
        import torch
        import torch.nn.functional as F
        import torch_geometric
        from safetensors import safe_open
        from safetensors.torch import load_file
        from torch_geometric.nn import GATv2Conv, GCNConv
    except ImportError as e:
        sys.exit(f"pyg_bench.py needs torch, torch_geometric and safetensors: {e}")

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    t = load_file(args.graph)
    x = t["x"].float().to(device)
    edge_index = t["edge_index"].long().to(device)
    y = t["y"].long().to(device)
    train = t["train_mask"].bool().to(device)
    n, f = x.shape
    classes = int(y.max()) + 1

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

    class GatV2(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = GATv2Conv(f, 8, heads=8, dropout=0.6)
            self.conv2 = GATv2Conv(64, classes, heads=1, concat=False, dropout=0.6)

        def forward(self, x, ei):
            x = F.dropout(x, p=0.6, training=self.training)
            x = F.elu(self.conv1(x, ei))
            x = F.dropout(x, p=0.6, training=self.training)
            return self.conv2(x, ei)

    # Linux: reset the peak (VmHWM / ru_maxrss) so loading does not count as training.
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass

    def build():
        if args.model == "gcn":
            model = Gcn().to(device)
            opt = torch.optim.Adam(
                [
                    dict(params=model.conv1.parameters(), weight_decay=5e-4),
                    dict(params=model.conv2.parameters(), weight_decay=0),
                ],
                lr=0.01,
            )
        else:
            model = GatV2().to(device)
            opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
        return model, opt

    base_rss = resident_mb()
    model, opt = build()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    forward, epoch = [], []
    for k in range(args.warmup + args.epochs):
        model.eval()
        start = time.perf_counter()
        with torch.no_grad():
            out = model(x, edge_index)
        sync()
        fwd = (time.perf_counter() - start) * 1e3
        del out

        model.train()
        start = time.perf_counter()
        opt.zero_grad()
        out = model(x, edge_index)
        loss = F.cross_entropy(out[train], y[train])
        loss.backward()
        opt.step()
        sync()
        ep = (time.perf_counter() - start) * 1e3
        if k >= args.warmup:
            forward.append(fwd)
            epoch.append(ep)

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    line = {
        "impl": "pyg",
        "model": args.model,
        "dataset": args.graph.rsplit("/", 1)[-1].split(".")[0],
        "device": args.device,
        "threads": torch.get_num_threads(),
        "nodes": n,
        "edges": int(edge_index.shape[1]),
        "warmup": args.warmup,
        "repeats": args.epochs,
        "forward_ms": statistics.median(forward),
        "epoch_ms": statistics.median(epoch),
        "epoch_ms_min": min(epoch),
        "peak_rss_mb": peak,
        "base_rss_mb": base_rss,
        "peak_mem_mb": peak - base_rss if base_rss is not None else None,
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
    }
    if device.type == "cuda":
        line["cuda_peak_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    print(json.dumps(line))

    if args.batches:
        print(json.dumps(minibatch(args, torch, F, safe_open, build, sync, x, y, n, line)))


def minibatch(args, torch, F, safe_open, build, sync, x, y, n, full_line):
    """Times PyG's training step on the batches of --batches (see the module docs)."""
    with safe_open(args.batches, framework="pt") as f:
        meta = f.metadata() or {}
        if meta.get("format") != "workbook-batches/1":
            sys.exit(f"{args.batches}: not a batch file from `workbook bench --save-batches`")
        if int(meta["num_nodes"]) != n:
            sys.exit(f"{args.batches} was sampled from a graph of {meta['num_nodes']} nodes, "
                     f"but --graph has {n}: pass the graph file the batches came from")
        epochs, warmup = int(meta["epochs"]), int(meta["warmup"])
        names = set(f.keys())
        batches = []  # per epoch: [(n_id, edge_index, batch_size), ...], on the device
        for e in range(1, epochs + 1):
            ep = []
            while f"epoch{e}.batch{len(ep)}.n_id" in names:
                key = f"epoch{e}.batch{len(ep)}."
                n_id = f.get_tensor(key + "n_id").long().to(x.device)
                ei = f.get_tensor(key + "edge_index").long().to(x.device)
                bs = int(f.get_tensor(key + "batch_size")[0])
                if (int(n_id.max()) >= n or (ei.numel() and int(ei.max()) >= n_id.numel())
                        or bs > n_id.numel()):
                    sys.exit(f"{args.batches}: batch {key[:-1]} has ids out of range")
                ep.append((n_id, ei, bs))
            if not ep:
                sys.exit(f"{args.batches}: epoch {e} has no batches")
            batches.append(ep)

    torch.manual_seed(args.seed)
    model, opt = build()
    model.train()
    timed = []
    for e, ep in enumerate(batches):
        total = 0.0
        for n_id, ei, bs in ep:
            xb, yb = x[n_id], y[n_id]  # the loader's gather, not timed
            sync()
            start = time.perf_counter()
            opt.zero_grad()
            out = model(xb, ei)
            loss = F.cross_entropy(out[:bs], yb[:bs])
            loss.backward()
            opt.step()
            sync()
            total += (time.perf_counter() - start) * 1e3
        if e >= warmup:
            timed.append(total)
    return {
        "impl": "pyg",
        "bench": "minibatch",
        "model": args.model,
        "dataset": full_line["dataset"],
        "device": args.device,
        "threads": full_line["threads"],
        "nodes": n,
        "edges": full_line["edges"],
        "batch_size": max(bs for ep in batches for _, _, bs in ep),
        "num_neighbors": json.loads(meta["num_neighbors"]),
        "batches_per_epoch": len(batches[0]),
        "warmup": warmup,
        "repeats": len(timed),
        "epoch_ms": statistics.median(timed) if timed else None,
        "sampling": "not timed (PyG's NeighborLoader needs pyg-lib or torch-sparse); "
                    "the workbook's batches replayed",
        "torch": full_line["torch"],
        "torch_geometric": full_line["torch_geometric"],
    }


if __name__ == "__main__":
    main()
