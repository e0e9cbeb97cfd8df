"""Chapters 2 and 6: where `Optimizer.load_state_dict` puts the state, and the order that
breaks it (state created, then the model moved).

This machine has no GPU: the device half uses the `meta` device, and the failure is shown with
a dtype move (`model.to(torch.float64)`), which leaves the state behind exactly as
`model.to("cuda")` does.
"""

import torch
from _common import error, header, section

header("book/python/ch02_optimizer.py")
from torch import nn  # noqa: E402

torch.manual_seed(0)


def trained():
    """A model and an Adam that has stepped once (so its state exists), on the cpu."""
    model = nn.Linear(4, 2)
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
    return model, opt


section("load_moves")
# ANCHOR: load_moves
_, opt = trained()
saved = opt.state_dict()  # state on the cpu, as after map_location="cpu"
with torch.device("meta"):
    model = nn.Linear(4, 2)  # the parameters live elsewhere
opt = torch.optim.Adam(model.parameters())
opt.load_state_dict(saved)
for key, value in opt.state[model.weight].items():
    print(f"{key:11}", value.device)
# ANCHOR_END: load_moves

section("stepped_then_moved")
# ANCHOR: stepped_then_moved
model, opt = trained()  # exp_avg, exp_avg_sq: float32, on the cpu
model.to(torch.float64)  # in place; the optimiser's state stays
model(torch.randn(3, 4, dtype=torch.float64)).sum().backward()
try:
    opt.step()
except RuntimeError as e:
    print(error(e))
# ANCHOR_END: stepped_then_moved

section("move_first")
# ANCHOR: move_first
model, old = trained()
model.to(torch.float64)
opt = torch.optim.Adam(model.parameters())
opt.load_state_dict(old.state_dict())  # cast to the parameters' dtype
model(torch.randn(3, 4, dtype=torch.float64)).sum().backward()
opt.step()
print("step ok; exp_avg is", opt.state[model.weight]["exp_avg"].dtype)
# ANCHOR_END: move_first
