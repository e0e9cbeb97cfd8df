"""Chapter 2: what `load_state_dict` copies and what `assign=True` replaces; `torch.load`'s
`weights_only` default; the device of a module.

This machine has no GPU, so the device half uses the `meta` device (shapes without data),
which `load_state_dict` treats like any other device.
"""

import io

import torch
from _common import error, header, section

header("book/python/ch02_loading.py")
from torch import nn  # noqa: E402
from torch_geometric.nn import GCNConv  # noqa: E402


# ANCHOR: model
class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GCNConv(4, 8)
        self.conv2 = GCNConv(8, 2)

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)
# ANCHOR_END: model


torch.manual_seed(0)
saved = GCN().state_dict()

section("assign")
# ANCHOR: assign
sd64 = {k: v.double() for k, v in saved.items()}
model = GCN()
opt = torch.optim.Adam(model.parameters())  # holds the current Parameters
before = model.conv1.lin.weight
model.load_state_dict(sd64)  # copy_: casts into the existing Parameter
w = model.conv1.lin.weight
print("copy:  ", w.dtype, "| same Parameter:", w is before)
model.load_state_dict(sd64, assign=True)  # takes the file's tensors
w = model.conv1.lin.weight
print("assign:", w.dtype, "| same Parameter:", w is before,
      "| in the optimiser:", any(p is w for p in opt.param_groups[0]["params"]))
# ANCHOR_END: assign

section("assign_device")
# ANCHOR: assign_device
with torch.device("meta"):
    model = GCN()  # no memory allocated
model.load_state_dict(saved)
print("copy:  ", model.conv1.lin.weight.device)
model.load_state_dict(saved, assign=True)
print("assign:", model.conv1.lin.weight.device)
# ANCHOR_END: assign_device

section("weights_only")
# ANCHOR: weights_only
buffer = io.BytesIO()
torch.save(GCN(), buffer)  # the whole module, pickled
buffer.seek(0)
try:
    torch.load(buffer)  # weights_only=True by default since 2.6
except Exception as e:
    print(error(e))
# ANCHOR_END: weights_only

section("module_device")
# ANCHOR: module_device
model = GCN()
try:
    model.device
except AttributeError as e:
    print(error(e))
print("next(model.parameters()).device:", next(model.parameters()).device)
# ANCHOR_END: module_device

section("intermediates")
# ANCHOR: intermediates
x = torch.randn(5, 4, device="meta")  # stands in for a tensor on the GPU
for name, t in [("torch.zeros(5, 8)", torch.zeros(5, 8)),
                ("x.new_zeros(5, 8)", x.new_zeros(5, 8)),
                ("torch.zeros(5, 8, device=x.device)",
                 torch.zeros(5, 8, device=x.device))]:
    print(f"{name + ':':36}", t.device)
# ANCHOR_END: intermediates
