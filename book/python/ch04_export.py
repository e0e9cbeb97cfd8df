"""Chapter 4: a PyG model through `torch.onnx.export` (the default, torch.export-based exporter
since 2.9) with dynamic sizes, checked in onnxruntime on graphs of three sizes; and the same
export without `dynamic_shapes`, whose sizes are frozen.
"""

import os
import tempfile

import torch
from _common import error, header, section

header("book/python/ch04_export.py", extra=("onnxruntime",))
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from torch import nn  # noqa: E402
from torch_geometric.nn import GCNConv  # noqa: E402

out_dir = tempfile.mkdtemp()


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GCNConv(4, 8)
        self.conv2 = GCNConv(8, 2)

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


def graph(num_nodes, num_edges):
    x = torch.randn(num_nodes, 4)
    return x, torch.randint(0, num_nodes, (2, num_edges))


torch.manual_seed(0)
section("export")
# ANCHOR: export
from torch.export import Dim  # noqa: E402

model = GCN().eval()  # eval() before export: dynamo=True keeps the mode
example = graph(10, 30)
path = os.path.join(out_dir, "gcn.onnx")
torch.onnx.export(
    model, example, path,
    input_names=["x", "edge_index"], output_names=["out"],
    verbose=False,  # no progress lines
    # dynamo=True (the default since 2.9) takes dynamic_shapes, keyed by
    # forward's argument names; dynamic_axes is for dynamo=False
    dynamic_shapes={"x": {0: Dim("num_nodes")},
                    "edge_index": {1: Dim("num_edges")}},
)
session = ort.InferenceSession(path)
print([(i.name, i.shape) for i in session.get_inputs()])
for n, e in [(10, 30), (50, 200), (3000, 12000)]:
    x, edge_index = graph(n, e)
    want = model(x, edge_index).detach().numpy()
    feed = {"x": x.numpy(), "edge_index": edge_index.numpy()}
    got = session.run(None, feed)[0]
    print(f"{n:5} nodes, {e:5} edges: max |onnxruntime - PyG| = "
          f"{np.abs(got - want).max():.1e}")
# ANCHOR_END: export

section("frozen")
# ANCHOR: frozen
path = os.path.join(out_dir, "gcn_frozen.onnx")
torch.onnx.export(model, example, path, input_names=["x", "edge_index"],
                  verbose=False)
session = ort.InferenceSession(path)
print([(i.name, i.shape) for i in session.get_inputs()])
x, edge_index = graph(12, 40)
try:
    session.run(None, {"x": x.numpy(), "edge_index": edge_index.numpy()})
except Exception as e:
    print(error(e))
# ANCHOR_END: frozen
