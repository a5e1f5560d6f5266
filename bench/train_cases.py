"""Issue 12's cases: a training step of the digits MLP, and one Adam update of 10M parameters.

Each library trains its own copy of the same MLP (64-256-10, ReLU, batch 64,
float32, Adam) on the same batch, so the first step's losses agree and are
checked against numpy's. numpy's step is a hand-written backward pass (the
baseline any numpy user would write); opforge's uses the gradient tape when
opforge has one, else its backward ops called directly (the title says
which: the manual path also runs under no_grad); torch's uses autograd and torch.optim.Adam.
"""

import numpy as np

F32 = 4
HIDDEN, BATCH = 256, 64


def _init(rng):
    b1, b2 = 1 / np.sqrt(64), 1 / np.sqrt(HIDDEN)
    return [rng.uniform(-b1, b1, (HIDDEN, 64)).astype(np.float32), rng.uniform(-b1, b1, HIDDEN).astype(np.float32),
            rng.uniform(-b2, b2, (10, HIDDEN)).astype(np.float32), rng.uniform(-b2, b2, 10).astype(np.float32)]


def numpy_step(ws, state, x, y, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    w1, c1, w2, c2 = ws
    h = x @ w1.T + c1
    a = np.maximum(h, 0)
    z = a @ w2.T + c2
    z = z - z.max(1, keepdims=True)
    p = np.exp(z)
    s = p.sum(1, keepdims=True)
    loss = np.float32((np.log(s[:, 0]) - z[np.arange(len(y)), y]).mean())
    dz = p / s
    dz[np.arange(len(y)), y] -= 1
    dz /= len(y)
    da = dz @ w2
    dh = da * (h > 0)
    grads = [dh.T @ x, dh.sum(0), dz.T @ a, dz.sum(0)]
    state["t"] += 1
    t = state["t"]
    for w, g, m, v in zip(ws, grads, state["m"], state["v"]):
        m *= b1
        m += (1 - b1) * g
        v *= b2
        v += (1 - b2) * g * g
        w -= (lr / (1 - b1**t)) * m / (np.sqrt(v) / np.sqrt(1 - b2**t) + eps)
    return loss


def has_tape_gradients(of):
    """The tape path needs MatMul's and Mean's gradient declarations (the grad-kernels work)."""
    import json
    reg = {o["name"]: o["gradient"] for o in json.loads(of._pywrap_internal.registry_json())["ops"]}
    return all(reg[n]["rules"] for n in ("MatMul", "Mean")) or all(
        n in getattr(of.autodiff.registry, "_python", {}) for n in ("MatMul", "Mean"))


def opforge_step(of, model, opt, x, y, tape):
    if tape:
        loss = of.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    with of.no_grad():
        return _manual_step(of, model, opt, x, y)


def _manual_step(of, model, opt, x, y):
    l1, l2 = model[0], model[2]
    h = l1(x)
    a = of.relu(h)
    loss, back = of.sparse_softmax_cross_entropy_with_logits(l2(a), y)
    dz = of.div(back, float(len(y)))
    dh = of.where(of.greater(h, 0.0), of.mat_mul(dz, model.parameters()[2]), 0.0)
    opt.step(grads=[of.mat_mul(dh, x, transpose_a=True), of.sum(dh, axis=0),
                    of.mat_mul(dz, a, transpose_a=True), of.sum(dz, axis=0)])
    return of.mean(loss)


def torch_step(torch, model, opt, x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach()


def build(add, sizes_large, of, torch, quick):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 64)).astype(np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int64)
    init = _init(rng)

    ns = {"of": of, "np": np, "torch": torch, "x": x, "y": y, "np_ws": [w.copy() for w in init],
          "np_state": {"t": 0, "m": [np.zeros_like(w) for w in init], "v": [np.zeros_like(w) for w in init]},
          "numpy_step": numpy_step, "opforge_step": opforge_step, "torch_step": torch_step}

    def model_setup():
        # Made just before the case runs (bench/run.py): parameters that require
        # gradients switch opforge's recorder on while they live.
        model = of.nn.Sequential(of.nn.Linear(64, HIDDEN), of.nn.ReLU(), of.nn.Linear(HIDDEN, 10))
        model.set_weights(dict(zip(model.weights(), init)))
        return {"model": model, "opt": of.optim.Adam(model.parameters(), lr=1e-3)}
    if torch is not None:
        tm = torch.nn.Sequential(torch.nn.Linear(64, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 10))
        with torch.no_grad():
            for p, w in zip(tm.parameters(), init):
                p.copy_(torch.from_numpy(w))
        ns.update(tmodel=tm, topt=torch.optim.Adam(tm.parameters(), lr=1e-3), tx=torch.from_numpy(x),
                  ty=torch.from_numpy(y))
    ns["tape"] = has_tape_gradients(of)
    how = "tape" if ns["tape"] else "backward ops by hand"
    add("train.digits_mlp_step", "training", f"digits MLP step: 64-{HIDDEN}-10, batch {BATCH}, Adam (opforge: {how})",
        (BATCH, 64), "time", 0, "numpy_step(np_ws, np_state, x, y)", "opforge_step(of, model, opt, x, y, tape)",
        "torch_step(torch, tmodel, topt, tx, ty)", ns, rtol=1e-4, atol=1e-5)

    # Adam on 10M parameters: reads var, m, v, grad and writes var, m, v once each (28 bytes per parameter).
    n = sizes_large
    w, g = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32) * 1e-3
    ns = {"of": of, "np": np, "g": g, "w0": w.copy(), "m0": np.zeros(n, np.float32), "v0": np.zeros(n, np.float32),
          "adam_np": _adam_np}
    for lib in ("np", "of"):
        ns.update({f"w_{lib}": w.copy(), f"m_{lib}": np.zeros(n, np.float32), f"v_{lib}": np.zeros(n, np.float32)})
    if torch is not None:
        tw = torch.nn.Parameter(torch.from_numpy(w.copy()))
        tw.grad = torch.from_numpy(g)
        ns.update(tw=tw, tadam=torch.optim.Adam([tw], lr=1e-3), torch=torch)
    add("train.adam_10M", "training", f"Adam update, {n:,} float32 params (numpy: in place, with temporaries)",
        (n,), "GB/s", 7 * F32 * n, "adam_np(w_np, m_np, v_np, g)",
        "of.raw_ops.apply_adam(w_of, m_of, v_of, g, lr=1e-3)", "(tadam.step(), tw.detach())[1]", ns, rtol=1e-5, atol=1e-6)
    # The bandwidth limit Adam is measured against: a plain copy (8 bytes per element).
    add("train.copy_10M", "training", f"copy, {n:,} float32 (the memory bandwidth reference)", (n,), "GB/s",
        2 * F32 * n, "(np.copyto(o, w0), o)[1]", "of.add(w0, 0.0)", "to.copy_(tw0)",
        {"of": of, "np": np, "torch": torch, "w0": w.copy(), "o": np.empty(n, np.float32),
         **({"to": torch.empty(n), "tw0": torch.from_numpy(w.copy())} if torch is not None else {})})
    return [("train.digits_mlp_step", model_setup)]


def _adam_np(w, m, v, g, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, t=1):
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    w -= (lr / (1 - b1**t)) * m / (np.sqrt(v) / np.sqrt(1 - b2**t) + eps)
    return w


def targets(cases, row):
    """Issue 12's two targets, as rows of the targets table."""
    out = []
    step = cases.get("train.digits_mlp_step", {}).get("results", {})
    if "speedup_vs_torch" in step.get("opforge", {}):
        s = step["opforge"]["speedup_vs_torch"]
        out.append(row("digits MLP training step: at most torch's time", s, f"{s:.3f}x torch",
                       s >= 1.0 and step["opforge"]["ok"]))
    else:
        out.append(row("digits MLP training step: at most torch's time", None, "-", False,
                       "torch not installed" if step else "not measured in this run"))
    adam = cases.get("train.adam_10M", {}).get("results", {}).get("opforge", {})
    copy = cases.get("train.copy_10M", {}).get("results", {}).get("numpy", {})
    if "rate" in adam and "rate" in copy:
        ratio = copy["rate"] / adam["rate"]
        out.append(row("Adam 10M: within 1.2x of numpy copy's GB/s", ratio,
                       f"{adam['rate']:.1f} vs {copy['rate']:.1f} GB/s ({ratio:.2f}x)", ratio <= 1.2 and adam["ok"]))
    else:
        out.append(row("Adam 10M: within 1.2x of numpy copy's GB/s", None, "-", False, "not measured in this run"))
    return out
