"""Chapter 2: PyG's lazy layers (`in_channels=-1`), the behaviours the workbook's lazy layers
mirror or depart from: what exists before the first forward pass, where the weight is born,
an optimiser built before that pass, a `state_dict` and an export before it, `reset_parameters`
on a lazy weight, and a `state_dict` loaded into a lazy layer.

This machine has no GPU: where the weight is born is shown with the `meta` device (a lazy
parameter follows `.to(...)`; PyG's `gcn_norm` cannot run on `meta`, so the first forward pass
is shown with a dtype move, `.to(torch.float64)`, which the weight follows the same way).
"""

import io

import torch
from _common import error, header, section

header("book/python/ch02_lazy.py")
from torch_geometric.nn import GATv2Conv, GCNConv, SAGEConv  # noqa: E402

torch.manual_seed(0)
x = torch.randn(4, 3)
edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])


def params(module):
    """Each parameter's name and class, and its shape where it has one."""
    out = []
    for name, p in module.named_parameters():
        kind = type(p).__name__
        shape = "?" if isinstance(p, torch.nn.parameter.UninitializedParameter) else list(p.shape)
        out.append(f"{name}: {kind} {shape}")
    return ", ".join(out)


section("before")
# ANCHOR: before
for cls in (GCNConv, GATv2Conv, SAGEConv):
    conv = cls(-1, 2)
    print(f"{cls.__name__}(-1, 2):", params(conv))
# ANCHOR_END: before

section("placement")
# ANCHOR: placement
conv = GCNConv(-1, 2).to("meta")  # moved before the first forward pass
print("lazy, after .to('meta'):", conv.lin.weight.device)
conv = GCNConv(-1, 2).to(torch.float64)  # the same, with a dtype
conv(x.double(), edge_index)  # the first forward pass
print("born:", conv.lin.weight.dtype, list(conv.lin.weight.shape))
print("the module still says in_channels =", conv.in_channels)
print("its inner Linear says in_channels =", conv.lin.in_channels)
# ANCHOR_END: placement

section("optimizer")
# ANCHOR: optimizer
conv = GCNConv(-1, 2)
opt = torch.optim.Adam(conv.parameters())  # before the first forward pass
conv(x, edge_index).sum().backward()  # materialises lin.weight in place
opt.step()
shapes = [list(s["exp_avg"].shape) for s in opt.state.values()]
print("Adam built first, then a step:", shapes)
# ANCHOR_END: optimizer

section("save_export")
# ANCHOR: save_export
conv = GCNConv(-1, 2)
state = conv.state_dict()
print("state_dict:", {k: type(v).__name__ for k, v in state.items()})
saved = io.BytesIO()
torch.save(state, saved)
print("torch.save: no error")
saved.seek(0)
try:
    torch.load(saved)  # weights_only=True, the default since 2.6
except Exception as e:
    # the line that names the cause (the rest: weights_only advice)
    lines = error(e).splitlines()
    print(next(l.strip() for l in lines if "Unsupported global" in l))
try:
    torch.onnx.export(conv, (x, edge_index), io.BytesIO(), dynamo=False)
except Exception as e:
    print(error(e))
# ANCHOR_END: save_export

section("reset")
# ANCHOR: reset
conv = GCNConv(-1, 2)
conv.reset_parameters()  # nothing to reset yet
print("reset_parameters on a lazy weight:", params(conv))
loaded = GCNConv(-1, 2)
loaded.load_state_dict(GCNConv(3, 2).state_dict())  # shapes from the file
print("load_state_dict into a lazy layer:", params(loaded))
# PyG's Linear makes its bias with torch.empty-like memory and resets it
# only once it knows the width: mark it, then reset.
sage = SAGEConv(-1, 2)
with torch.no_grad():
    sage.lin_l.bias.fill_(7.0)
sage.reset_parameters()
print("lazy SAGEConv, lin_l.bias after reset:", sage.lin_l.bias.tolist())
sage(x, edge_index)  # the first pass resets what it materialises
print("after the first pass:", [round(b, 4) for b in sage.lin_l.bias.tolist()])
# ANCHOR_END: reset
