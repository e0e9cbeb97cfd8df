"""Primer: what `GCNConv(improved=True)` computes for each kind of graph input.

PyG documents `improved=True` as A + 2I. With an `edge_index` and no edge weights it computes
exactly what `improved=False` does; with edge weights of 1.0, or with a sparse adjacency
(`torch.sparse` here; torch_sparse's `SparseTensor` takes the same branch of `gcn_norm`), the
self-loops weigh 2.
"""

import torch
from _common import header

header("book/python/ch00_improved.py")
from torch_geometric.nn import GCNConv  # noqa: E402
from torch_geometric.utils import to_torch_coo_tensor  # noqa: E402


def diff(a, b):
    """The largest absolute difference between two outputs."""
    return f"{(a - b).abs().max().item():.2g}"


torch.manual_seed(0)
# ANCHOR: improved
x = torch.randn(4, 3)
edge_index = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
plain = GCNConv(3, 2)
improved = GCNConv(3, 2, improved=True)
improved.load_state_dict(plain.state_dict())  # the same weights

reference = plain(x, edge_index)  # A + I
ones = torch.ones(edge_index.size(1))
with_ones = improved(x, edge_index, ones)  # A + 2I
adj_t = to_torch_coo_tensor(edge_index, size=4).t()  # a sparse adjacency

print("improved, edge_index, no weights  vs improved=False:",
      diff(improved(x, edge_index), reference))
print("improved, edge_index, weights 1.0 vs improved=False:",
      diff(with_ones, reference))
print("improved, sparse adjacency        vs weights 1.0:   ",
      diff(improved(x, adj_t), with_ones))
# ANCHOR_END: improved
