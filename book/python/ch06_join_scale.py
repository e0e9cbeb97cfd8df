"""Chapter 6: what `model.join()` does to the gradient of the steps in which some ranks have run
out. Two CPU processes (gloo); every rank's gradient is 1.0 in every step it runs; rank 0 runs
two steps, rank 1 one. The joined rank adds zeros to the all-reduce, and by default the sum is
still divided by the initial world size.
"""

import datetime
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from _common import header, quiet


def worker(rank, divide, port, results):
    quiet()
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=30))
    model = DDP(nn.Linear(1, 1, bias=False))
    # ANCHOR: scale
    grads = []
    with model.join(divide_by_initial_world_size=divide):
        for _ in range(2 if rank == 0 else 1):  # rank 1 runs out first
            model.zero_grad()
            model(torch.ones(1, 1)).sum().backward()  # this rank's gradient: 1.0
            grads.append(model.module.weight.grad.item())
    # ANCHOR_END: scale
    results.put(f"rank {rank}: gradient per step {grads}")
    dist.destroy_process_group()


if __name__ == "__main__":
    header("book/python/ch06_join_scale.py")
    context = mp.get_context("spawn")
    for divide, port in [(True, 29521), (False, 29522)]:
        results = context.Queue()
        ranks = [context.Process(target=worker, args=(r, divide, port, results))
                 for r in range(2)]
        for p in ranks:
            p.start()
        lines = sorted(results.get(timeout=120) for _ in ranks)
        for p in ranks:
            p.join(60)
        print(f"join(divide_by_initial_world_size={divide}):")
        for line in lines:
            print("  " + line)
