"""Chapter 6: where DistributedSampler's shuffle comes from. It does not use the global RNG: each
epoch it seeds its own generator with `seed + epoch` (`seed` is a constructor argument, 0 by
default). So `torch.manual_seed(rank)` before building it changes nothing, while
`DistributedSampler(ds, seed=rank)` shuffles differently on each rank and the shards overlap.
"""

from _common import header

header("book/python/ch06_sampler.py")

import torch
from torch.utils.data import DistributedSampler


def coverage(label, shards):
    every = [i for shard in shards for i in shard]
    print(f"{label + ':':<25}{len(every)} seeds per epoch, {len(set(every))} distinct of 140")


data = list(range(140))  # Cora's 140 training nodes, by position
# ANCHOR: sampler
# The global RNG seeded with the rank: the sampler does not read it.
shards = []
for rank in range(2):
    torch.manual_seed(rank)
    sampler = DistributedSampler(data, num_replicas=2, rank=rank)
    sampler.set_epoch(1)
    shards.append(list(sampler))
coverage("torch.manual_seed(rank)", shards)
# The sampler's own seed set to the rank: the mistake.
shards = []
for rank in range(2):
    sampler = DistributedSampler(data, num_replicas=2, rank=rank, seed=rank)
    sampler.set_epoch(1)
    shards.append(list(sampler))
coverage("seed=rank", shards)
# ANCHOR_END: sampler
