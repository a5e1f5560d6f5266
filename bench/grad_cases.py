"""Gradient cases: the cost of recording, an MLP training step's forward +
backward (numpy: backpropagation written by hand; opforge and torch: their
tapes; each statement returns d loss / d w1), and a Hessian-vector product
of an MLP (numpy: central differences of the hand-written gradient;
opforge and torch: a gradient of the gradient; each returns (H v) for w1)."""
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


def _numpy_hvp(x, labels, w1, b1, w2, b2, v1, vb1, v2, vb2, eps=1e-6):
    def grad_w1(w1, b1, w2, b2):
        h = np.tanh(x @ w1 + b1)
        logits = h @ w2 + b2
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        p[np.arange(len(labels)), labels] -= 1
        return x.T @ ((p / x.shape[0]) @ w2.T * (1 - h * h))
    plus = grad_w1(w1 + eps * v1, b1 + eps * vb1, w2 + eps * v2, b2 + eps * vb2)
    minus = grad_w1(w1 - eps * v1, b1 - eps * vb1, w2 - eps * v2, b2 - eps * vb2)
    return (plus - minus) / (2 * eps)


def _opforge_hvp(of):
    def hvp(x, labels, w1, b1, w2, b2, v1, vb1, v2, vb2):
        def loss(w1, b1, w2, b2):
            logits = of.matmul(of.tanh(of.matmul(x, w1) + b1), w2) + b2
            return of.mean(of.sparse_softmax_cross_entropy_with_logits(logits, labels)[0])

        def inner(*ps):
            g1, gb1, g2, gb2 = of.grad(loss, argnums=(0, 1, 2, 3))(*ps)
            return of.sum(g1 * v1) + of.sum(gb1 * vb1) + of.sum(g2 * v2) + of.sum(gb2 * vb2)
        return of.grad(inner, argnums=0)(w1, b1, w2, b2)
    return hvp


def _torch_hvp(torch):
    def hvp(x, labels, w1, b1, w2, b2, v1, vb1, v2, vb2):
        ps = [p.detach().requires_grad_(True) for p in (w1, b1, w2, b2)]
        logits = torch.tanh(x @ ps[0] + ps[1]) @ ps[2] + ps[3]
        loss = torch.nn.functional.cross_entropy(logits, labels)
        gs = torch.autograd.grad(loss, ps, create_graph=True)
        inner = sum((g * v).sum() for g, v in zip(gs, (v1, vb1, v2, vb2)))
        return torch.autograd.grad(inner, ps[0])[0]
    return hvp


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

    # float64: the numpy baseline is a central difference, accurate to ~1e-8 there.
    h64 = {k: v.astype(np.float64) for k, v in arrays.items() if k != "onehot"}
    h64["labels"] = rng.integers(0, 10, batch)
    h64.update({"v" + k: rng.standard_normal(arrays[k].shape) for k in ("w1", "b1", "w2", "b2")})
    add("grad.hvp_mlp", "gradients", "Hessian-vector product, MLP 784-256-10 + xent, batch 64 float64",
        (batch,), "time", 0,
        "np_hvp(x, labels, w1, b1, w2, b2, vw1, vb1, vw2, vb2)",
        "of_hvp(x, labels, w1, b1, w2, b2, vw1, vb1, vw2, vb2)",
        "torch_hvp(tx, tlabels, tw1, tb1, tw2, tb2, tvw1, tvb1, tvw2, tvb2)", h64, rtol=1e-5, atol=1e-8)
    def hvp_setup():
        ns = {"np_hvp": _numpy_hvp, "of_hvp": _opforge_hvp(of)}
        if torch is not None:
            ns["torch_hvp"] = _torch_hvp(torch)
        return ns
    extra.append(("grad.hvp_mlp", hvp_setup))
    return extra
