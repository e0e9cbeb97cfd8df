"""Chapter 7 (and 2): `torch.load` of a checkpoint whose tensors were saved on `cuda:1`, on a
machine without that device.

This machine has no GPU, so the file is made by tagging CPU tensors as `cuda:1` while saving
(the tag is all `torch.load` reads to choose a device; a file saved on a GPU carries the same
one). Loading it is real.
"""

import io

import torch
import torch.serialization
from _common import error, header

header("book/python/ch07_map_location.py")

buffer = io.BytesIO()
tag = torch.serialization.location_tag
torch.serialization.location_tag = lambda storage: "cuda:1"  # as saved on cuda:1
torch.save({"conv1.lin.weight": torch.randn(16, 1433)}, buffer)
torch.serialization.location_tag = tag

# ANCHOR: load
for map_location in [None, "cpu"]:
    buffer.seek(0)
    try:
        sd = torch.load(buffer, map_location=map_location)
        print(f"map_location={map_location!r}: loaded onto",
              sd["conv1.lin.weight"].device)
    except RuntimeError as e:
        print(f"map_location={map_location!r}: {error(e)}")
# ANCHOR_END: load
