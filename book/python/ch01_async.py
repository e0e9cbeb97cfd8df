"""Chapter 1: an `edge_index` id that is not a node, as PyG meets it: `Data` accepts it, the
message-passing gather fails on it, and `Data.validate()` catches it before any kernel.

This machine has no GPU: the CPU reports the fault at the faulting operation
(`IndexError: index out of range in self`), as a simulated device does in its default mode. On
a GPU the same gather trips a device-side assert that is reported later ("CUDA error:
device-side assert triggered ... CUDA kernel errors might be asynchronously reported at some
other API call"); the chapter cites that text from PyTorch's source.
"""

import torch
from _common import error, header, section

header("book/python/ch01_async.py")
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.nn import SimpleConv  # noqa: E402

# ANCHOR: ring
x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]])
# four nodes in a ring, ids read from a file that counts from 1
edge_index = torch.tensor([[1, 2, 3, 4], [2, 3, 4, 1]])
data = Data(x=x, edge_index=edge_index)  # accepted: Data checks nothing
# ANCHOR_END: ring
print("Data:", data)

section("cpu")
# ANCHOR: cpu
# x_j = x.index_select(0, edge_index[0]), summed at edge_index[1]
conv = SimpleConv(aggr="sum")
try:
    conv(data.x, data.edge_index)
except Exception as e:
    print(error(e))
try:  # the same gather written with PyTorch alone
    x.index_select(0, edge_index[0])
except Exception as e:
    print(error(e))
# ANCHOR_END: cpu

section("validate")
# ANCHOR: validate
try:
    data.validate(raise_on_error=True)
except ValueError as e:
    print(error(e))
for bad in ([[0, -1], [1, 2]], [[0, 1, 2]]):  # a negative id; one row
    try:
        Data(x=x, edge_index=torch.tensor(bad)).validate(raise_on_error=True)
    except ValueError as e:
        print(error(e))
# ANCHOR_END: validate

section("fixed")
# ANCHOR: fixed
data.edge_index = data.edge_index - 1  # ids counted from 0
print("validate:", data.validate(raise_on_error=True))
print("sum of neighbours:", conv(data.x, data.edge_index).tolist())
# ANCHOR_END: fixed
