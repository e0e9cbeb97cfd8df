"""Chapter 6: DistributedDataParallel with uneven batch counts, on the CPU (two processes, the
gloo backend). Rank 0 has one batch more than rank 1: its extra step waits in the gradient
all-reduce for a partner that never comes (here the process group's timeout is 5 s; NCCL's
default is 10 minutes). `model.join()` lets the rank that ran out shadow the collectives.
"""

import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from _common import header, quiet


def worker(rank, use_join, port, results):
    quiet()
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=5))
    torch.manual_seed(rank)
    # ANCHOR: uneven
    # One process per device; here both processes on the cpu.
    model = DDP(nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # Each rank's own share of the batches: one more on rank 0.
    batches = 3 if rank == 0 else 2

    def train():
        for _ in range(batches):
            opt.zero_grad()
            model(torch.randn(8, 4)).sum().backward()  # all-reduce in here
            opt.step()
    # ANCHOR_END: uneven
    try:
        if use_join:
            # ANCHOR: join
            # A rank that runs out joins the others' all-reduces.
            with model.join():
                train()
            # ANCHOR_END: join
        else:
            train()
            if rank == 1:
                time.sleep(10)  # rank 1 is done and moves on (evaluation, say)
        results.put(f"rank {rank}: {batches} steps done")
    except RuntimeError as e:
        results.put(f"rank {rank}: RuntimeError: {str(e).splitlines()[0]}")
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass


if __name__ == "__main__":
    header("book/python/ch06_ddp_uneven.py")
    from torch.distributed import constants

    print(f"default timeouts: {constants.default_pg_timeout} (gloo), "
          f"{constants.default_pg_nccl_timeout} (NCCL); this demo's: 0:00:05")
    context = mp.get_context("spawn")
    for use_join, port in [(False, 29511), (True, 29512)]:
        results = context.Queue()
        ranks = [context.Process(target=worker, args=(r, use_join, port, results))
                 for r in range(2)]
        for p in ranks:
            p.start()
        lines = sorted(results.get(timeout=120) for _ in ranks)
        for p in ranks:
            p.join(60)
        print("with model.join():" if use_join else "without join:")
        for line in lines:
            print("  " + line)
