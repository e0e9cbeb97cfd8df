"""Chapter 1, "Refused by the compiler": where PyTorch catches a device mismatch. It is at the
kernel, while the program runs: the operation that meets two devices raises.

This machine has no GPU, so the second device is PyTorch's `meta` device (tensors with a shape
and no data): a model moved there meets a graph left on the CPU, and logits there meet labels
left on the CPU. PyTorch raises at the same place as on a GPU, with its check for a device it did
not expect; on a GPU the text is "Expected all tensors to be on the same device, but found at
least two devices, cuda:0 and cpu!" (chapter 1.1 quotes it).
"""

import torch
import torch.nn.functional as F
from _common import error, header, section

header("book/python/ch01_refused.py")
from torch_geometric.datasets import KarateClub  # noqa: E402
from torch_geometric.nn import GCNConv  # noqa: E402

data = KarateClub()[0]

section("model")
# ANCHOR: model
device = torch.device("meta")  # stands for cuda:0 on this GPU-less machine
model = GCNConv(data.num_features, 4).to(device)
try:
    model(data.x, data.edge_index)  # the graph was never moved
except RuntimeError as e:
    print(error(e))
# ANCHOR_END: model

section("labels")
# ANCHOR: labels
logits = torch.zeros(data.num_nodes, 4, device=device)  # the model's output, on the device
try:
    F.cross_entropy(logits, data.y)  # the labels were never moved
except RuntimeError as e:
    print(error(e))
# ANCHOR_END: labels
