"""opforge.optim: optimizers whose update steps are fused C++ ops (ApplyAdam style).

    opt = of.optim.Adam(model.parameters(), lr=1e-3)
    loss.backward(); opt.step(); opt.zero_grad()

Each step calls one op per parameter that updates the weight and its slots
in place (see cpp/ops/optim_ops.cc), so a step allocates nothing.
"""

from opforge.optim.optimizers import SGD, Adam, Optimizer

__all__ = ["Optimizer", "SGD", "Adam"]
