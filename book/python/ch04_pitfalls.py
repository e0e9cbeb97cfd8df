"""Chapter 4 (and 6): three seed-style export mistakes, run with both exporters where they
differ: the mode (`model.eval()` forgotten), a `DataParallel` wrapper, and mixed precision.
"""

import os
import tempfile

import torch
from _common import error, header, section

header("book/python/ch04_pitfalls.py", extra=("onnxruntime", "onnx"))
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch_geometric.nn import GCNConv  # noqa: E402

out_dir = tempfile.mkdtemp()


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GCNConv(4, 8)
        self.conv2 = GCNConv(8, 2)

    def forward(self, x, edge_index):
        x = F.dropout(x, p=0.5, training=self.training)
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


torch.manual_seed(0)
x, edge_index = torch.randn(10, 4), torch.randint(0, 10, (2, 30))
feed = {"x": x.numpy(), "edge_index": edge_index.numpy()}
names = ["x", "edge_index"]

section("training_mode")
# ANCHOR: training_mode
model = GCN()  # a new module is in training mode
for dynamo in [True, False]:
    path = os.path.join(out_dir, f"train_{dynamo}.onnx")
    torch.onnx.export(model, (x, edge_index), path, dynamo=dynamo,
                      input_names=names, verbose=False)
    ops = [n.op_type for n in onnx.load(path).graph.node]
    session = ort.InferenceSession(path)
    a, b = (session.run(None, feed)[0] for _ in range(2))
    print(f"dynamo={dynamo!s:5}: Dropout nodes: {ops.count('Dropout')}; "
          f"two runs differ by {np.abs(a - b).max():.2f}")
print("model.training after both exports:", model.training)
# ANCHOR_END: training_mode

section("data_parallel")
# ANCHOR: data_parallel
dp = nn.DataParallel(GCN().eval())  # no GPU here: device_ids is []
for dynamo in [False, True]:
    path = os.path.join(out_dir, f"dp_{dynamo}.onnx")
    try:
        torch.onnx.export(dp, (x, edge_index), path, dynamo=dynamo,
                          verbose=False)
        graph = onnx.load(path).graph
        weights = [i.name for i in graph.initializer if "conv" in i.name]
        inputs = [i.name for i in graph.input]
        print(f"dynamo={dynamo}: exported; inputs {inputs}, weights {weights}")
    except Exception as e:
        print(f"dynamo={dynamo}: {error(e)}")
# ANCHOR_END: data_parallel

section("autocast")
# ANCHOR: autocast
model = GCN().eval()
with torch.autocast("cpu", dtype=torch.bfloat16):  # "cuda" on a GPU
    h = model.conv1.lin(x)
print("inside autocast: conv1.lin(x) is", h.dtype,
      "| conv1.lin.weight is", model.conv1.lin.weight.dtype)
print("after .half():   conv1.lin.weight is",
      model.half().conv1.lin.weight.dtype)
# ANCHOR_END: autocast
