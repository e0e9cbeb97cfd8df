"""Chapter 2: `torch.load` of PyG's trained Cora GCN as `.pt` files (the fixtures the workbook's
importer is tested on, crates/workbook/tests/fixtures/pyg/pt): saved on `cuda:0`, saved from a
`DataParallel` wrapper, and a whole pickled module.

This machine has no GPU, which is the point: the `cuda:0` file is what a GPU machine writes
(see the fixtures' README for how it was tagged), and this is what a laptop does with it.
"""

from pathlib import Path

import torch
from _common import error, header, section

header("book/python/ch02_pt.py")
from torch_geometric.nn import GCNConv  # noqa: E402

pt = Path(__file__).resolve().parents[2] / "crates/workbook/tests/fixtures/pyg/pt"


class GCN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GCNConv(1433, 16)
        self.conv2 = GCNConv(16, 7)


section("as_saved")
# ANCHOR: as_saved
try:
    torch.load(pt / "cora_gcn_state_dict_cuda0.pt")  # no map_location
except RuntimeError as e:
    print(error(e))
sd = torch.load(pt / "cora_gcn_state_dict_cuda0.pt", map_location="cpu")
w = sd["conv1.lin.weight"]
print("map_location='cpu':", w.device, tuple(w.shape))
# ANCHOR_END: as_saved

section("dataparallel")
# ANCHOR: dataparallel
sd = torch.load(pt / "cora_gcn_dataparallel.pt")
print(list(sd)[:2])
try:
    GCN().load_state_dict(sd)
except RuntimeError as e:
    print(error(e))
# ANCHOR_END: dataparallel

section("whole_module")
# ANCHOR: whole_module
try:
    torch.load(pt / "cora_gcn_whole_module.pt")  # weights_only=True since 2.6
except Exception as e:
    print(error(e).splitlines()[0])
# ANCHOR_END: whole_module

section("compiled")
# ANCHOR: compiled
compiled = torch.compile(GCN())  # an OptimizedModule; nothing compiles yet
print(list(compiled.state_dict())[:2])
try:
    GCN().load_state_dict(compiled.state_dict())
except RuntimeError as e:
    print("\n".join(error(e).splitlines()[:2]))
# ANCHOR_END: compiled
