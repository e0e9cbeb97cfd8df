"""Chapter 5: `GCNConv(cached=True)` on mini-batches. The first batch's normalised graph is
cached and reused for every later batch, whatever its size.
"""

import torch
from _common import error, header

header("book/python/ch05_cached.py")
from torch_geometric.nn import GCNConv  # noqa: E402

torch.manual_seed(0)


def batch(num_nodes):
    """A path graph of `num_nodes` nodes, standing in for a sampled batch."""
    nodes = torch.arange(num_nodes - 1)
    return torch.randn(num_nodes, 3), torch.stack([nodes, nodes + 1])


# ANCHOR: cached
cached = GCNConv(3, 2, cached=True)  # meant for one fixed graph
fresh = GCNConv(3, 2)
fresh.load_state_dict(cached.state_dict())  # the same weights, no cache
for step, n in enumerate([4, 6, 3]):
    x, edge_index = batch(n)
    try:
        out = cached(x, edge_index)
        diff = (out - fresh(x, edge_index)).abs().max().item()
        print(f"batch {step}: {n} nodes, max |cached - uncached| = {diff:.2f}")
    except Exception as e:
        print(f"batch {step}: {n} nodes, {error(e)}")
# ANCHOR_END: cached
