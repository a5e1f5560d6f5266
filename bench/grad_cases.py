"""Gradient cases: the cost of recording, and an MLP training step's
forward + backward (numpy: backpropagation written by hand; opforge and
torch: their tapes). Each statement returns d loss / d w1."""
import numpy as np


def _numpy_mlp(x, onehot, w1, b1, w2, b2):
    pre = x @ w1 + b1
    h = np.maximum(pre, 0)
    logits = h @ w2 + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    dlogits = (p - onehot) / x.shape[0]
    dh = dlogits @ w2.T
    dh[pre <= 0] = 0
    return x.T @ dh


def _opforge_mlp(of):
    def step(x, onehot, w1, b1, w2, b2):
        logits = of.matmul(of.relu(of.matmul(x, w1) + b1), w2) + b2
        loss = -of.sum(onehot * of.log(of.softmax(logits))) / float(x.shape[0])
        loss.backward()
        g = w1.grad
        for w in (w1, b1, w2, b2):
            w.grad = None
        return g
    return step


def _torch_mlp(torch):
    def step(x, onehot, w1, b1, w2, b2):
        logits = torch.relu(x @ w1 + b1) @ w2 + b2
        loss = -(onehot * torch.log_softmax(logits, dim=1)).sum() / x.shape[0]
        loss.backward()
        g = w1.grad
        for w in (w1, b1, w2, b2):
            w.grad = None
        return g.detach()
    return step


def build(add, of, torch, rng):
    """Adds the cases through cases.build's `add`; returns (id, setup) pairs: setup()
    makes the case's tensors that require gradients, just before it runs."""
    def normal(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    extra = []
    x, y = normal(1), normal(1)
    add("grad.add_1_recorded", "gradients", "add, 1 float32, input requires grad (recorded)", (1,), "time", 0,
        "np.add(x, y)", "of.add(gx, y)", "torch.add(tgx, ty).detach()", {"x": x, "y": y})
    def add_setup():
        ns = {"gx": of.tensor(x, requires_grad=True)}
        if torch is not None:
            ns["tgx"] = torch.tensor(x, requires_grad=True)
        return ns
    extra.append(("grad.add_1_recorded", add_setup))
    # The same add with no input requiring grad while such a tensor is alive:
    # nothing is recorded, and it must cost what dispatch.add_1 does.
    add("grad.add_1_beside_tape", "gradients", "add, 1 float32, while a tensor requires grad (not recorded)",
        (1,), "time", 0, "np.add(x, y)", "of.add(x, y)", "torch.add(tx, ty)", {"x": x, "y": y})
    extra.append(("grad.add_1_beside_tape", add_setup))

    batch, sizes = 64, (784, 256, 10)
    arrays = {"x": normal(batch, sizes[0]), "onehot": np.eye(sizes[2], dtype=np.float32)[rng.integers(0, 10, batch)],
              "w1": normal(sizes[0], sizes[1], scale=0.05), "b1": normal(sizes[1], scale=0.05),
              "w2": normal(sizes[1], sizes[2], scale=0.05), "b2": normal(sizes[2], scale=0.05)}
    add("grad.mlp_step", "gradients", "MLP 784-256-10 forward + backward, batch 64 float32", (batch,), "time", 0,
        "np_mlp(x, onehot, w1, b1, w2, b2)", "of_mlp(x, onehot, ow1, ob1, ow2, ob2)",
        "torch_mlp(tx, tonehot, rw1, rb1, rw2, rb2)", arrays, rtol=1e-3, atol=1e-5)
    def mlp_setup():
        ns = {"np_mlp": _numpy_mlp, "of_mlp": _opforge_mlp(of)}
        ns.update({"o" + k: of.tensor(arrays[k], requires_grad=True) for k in ("w1", "b1", "w2", "b2")})
        if torch is not None:
            ns["torch_mlp"] = _torch_mlp(torch)
            ns.update({"r" + k: torch.tensor(arrays[k], requires_grad=True) for k in ("w1", "b1", "w2", "b2")})
        return ns
    extra.append(("grad.mlp_step", mlp_setup))
    return extra
