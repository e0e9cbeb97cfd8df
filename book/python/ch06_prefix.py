"""Chapter 6: a state dict saved from a wrapped model (`module.` names) loaded into the bare
model, and PyTorch's own helper that strips the prefix.
"""

import torch
from _common import error, header

header("book/python/ch06_prefix.py")
from torch import nn  # noqa: E402
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present  # noqa: E402



def make():
    model = nn.Sequential()
    model.add_module("conv1", nn.Linear(4, 2))
    return model


# ANCHOR: prefix
dp = nn.DataParallel(make())  # DDP(model) names its parameters the same
sd = dp.state_dict()  # what torch.save(dp.state_dict(), path) writes
print(list(sd))
try:
    make().load_state_dict(sd)
except RuntimeError as e:
    print(error(e))
consume_prefix_in_state_dict_if_present(sd, "module.")  # in place
print(list(sd))
make().load_state_dict(sd)
print("loaded")
# ANCHOR_END: prefix
