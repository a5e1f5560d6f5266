"""ONNX RNN, GRU and LSTM, unrolled over the (static) sequence into opforge ops.

Per direction, the input projection of every step is one MatMul up front;
each step then adds H_{t-1} R^T and applies the gates as the ONNX schemas
write them (activations, alpha/beta, clip, GRU's linear_before_reset, LSTM's
peepholes and input_forget). sequence_lens: past a sequence's end the state
is held and Y is zero; the reverse direction reads each sequence backwards
within its own length. Composed of differentiable ops, so the unrolled
network trains too.
"""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx import _take
from opforge.onnx._node import FLOAT, FLOATS, INT, STRING, converter, dtype_of, shape_of

STRINGS = 8  # AttributeProto.STRINGS
_ATTRS = {"activation_alpha": FLOATS, "activation_beta": FLOATS, "activations": STRINGS, "clip": FLOAT,
          "direction": STRING, "hidden_size": INT, "layout": INT}


def _activation(name, alpha, beta, dt):
    c = lambda v: np.array(v, dtype=dt)  # noqa: E731
    name = name.lower()
    if name == "sigmoid":
        return P.sigmoid
    if name == "tanh":
        return P.tanh
    if name == "relu":
        return P.relu
    if name == "affine":
        return lambda x: P.add(P.mul(c(alpha if alpha is not None else 1.0), x), c(beta or 0.0))
    if name == "leakyrelu":
        a = c(0.01 if alpha is None else alpha)
        return lambda x: P.select(P.greater_equal(x, c(0)), x, P.mul(x, a))
    if name == "thresholdedrelu":
        a = c(1.0 if alpha is None else alpha)
        return lambda x: P.select(P.greater(x, a), x, c(0))
    if name == "scaledtanh":
        return lambda x: P.mul(c(1.0 if alpha is None else alpha), P.tanh(P.mul(c(1.0 if beta is None else beta), x)))
    if name == "hardsigmoid":
        a, b = c(0.2 if alpha is None else alpha), c(0.5 if beta is None else beta)
        return lambda x: P.minimum(P.maximum(P.add(P.mul(a, x), b), c(0)), c(1))
    if name == "elu":
        a = c(1.0 if alpha is None else alpha)
        return lambda x: P.select(P.greater_equal(x, c(0)), x, P.mul(a, P.sub(P.exp(x), c(1))))
    if name == "softsign":
        return lambda x: P.div(x, P.add(c(1), P.abs(x)))
    if name == "softplus":
        return lambda x: P.log(P.add(c(1), P.exp(x)))
    return None


_TAKES_ALPHA = {"affine", "leakyrelu", "thresholdedrelu", "scaledtanh", "hardsigmoid", "elu"}
_TAKES_BETA = {"affine", "scaledtanh", "hardsigmoid"}


def _activations(n, defaults, dirs, dt):
    """The activation functions of each direction, in the schema's order."""
    names = next((list(a.strings) for a in n.node.attribute if a.name == "activations"), None)
    names = [s.decode("utf-8", "replace") for s in names] if names is not None else defaults * dirs
    if len(names) != len(defaults) * dirs:
        raise n.fail(f"activations {names} must name {len(defaults)} functions per direction ({dirs})")
    # The alpha and beta lists are consumed in order by the functions that take them.
    alphas, betas = list(n.attr("activation_alpha", [])), list(n.attr("activation_beta", []))
    fns = []
    for name in names:
        alpha = alphas.pop(0) if name.lower() in _TAKES_ALPHA and alphas else None
        beta = betas.pop(0) if name.lower() in _TAKES_BETA and betas else None
        fn = _activation(name, alpha, beta, dt)
        if fn is None:
            raise n.fail(f"activation {name!r} is not supported", UnimplementedError)
        fns.append(fn)
    return [fns[d * len(defaults):(d + 1) * len(defaults)] for d in range(dirs)]


def _split_last(x, parts):
    shape = list(shape_of(x))
    size = shape[-1] // parts
    return [P.slice(x, begin=[0] * (len(shape) - 1) + [i * size], size=shape[:-1] + [size]) for i in range(parts)]


def _direction_slice(v, d):
    """v[d] of a [num_directions, ...] weight (numpy or tensor)."""
    return _take.take(v, np.array(d, np.int64), 0)


class _Seq:
    """The per-step inputs and the bookkeeping of sequence_lens for one direction."""

    def __init__(self, n, x, lens, reverse):
        self.steps, self.batch = shape_of(x)[0], shape_of(x)[1]
        self.reverse, self.lens = reverse, lens
        self.dt = dtype_of(x)
        if reverse:
            x = self.flip(x)
        self.x = x

    def flip(self, v):
        """v [seq, batch, ...] with each batch row's first lens[b] steps reversed (all steps without lens)."""
        if self.lens is None:
            return _take.flip(v, 0)
        shape = list(shape_of(v))
        i = np.arange(self.steps, dtype=np.int64).reshape([self.steps, 1] + [1] * (len(shape) - 2))
        ln = P.reshape(P.cast(self.lens, dtype=np.dtype(np.int64)), shape=[1, self.batch] + [1] * (len(shape) - 2))
        src = P.select(P.less(i, ln), P.sub(P.sub(ln, np.int64(1)), i), P.add(i, np.zeros_like(i)))
        src = P.add(src, np.zeros(shape, dtype=np.int64))
        return _take.moved(lambda u: P.gather_elements(u, src, axis=0), v)

    def mask(self, t):
        """[batch, 1] of 1 where step t is inside the sequence (None: every step is)."""
        if self.lens is None:
            return None
        lens = P.reshape(P.cast(self.lens, dtype=np.dtype(np.int64)), shape=[self.batch, 1])
        return P.cast(P.less(np.array(t, np.int64), lens), dtype=self.dt)


def _hold(mask, new, old):
    if mask is None:
        return new
    return P.add(P.mul(mask, new), P.mul(P.sub(np.array(1, dtype=dtype_of(mask)), mask), old))


def _run(n, cell, gates, dirs, defaults, states):
    """Unrolls cell over X for each direction; returns Y and the final states, ONNX's layout."""
    x = n.input(0)
    dt = dtype_of(x)
    if dt.kind != "f":
        raise n.fail(f"X of {dt} is not supported (floats only)")
    layout = n.attr("layout", 0)
    if layout == 1:
        x = P.transpose(x, perm=[1, 0, 2])
    if any(d is None for d in shape_of(x)):
        raise n.fail(f"X needs static dims, got {list(shape_of(x))}", UnimplementedError)
    steps, batch, _ = shape_of(x)
    hidden = shape_of(n.input(2))[-1]
    if n.has_attr("hidden_size") and n.attr("hidden_size") != hidden:
        raise n.fail(f"hidden_size {n.attr('hidden_size')} does not match R's {hidden}")
    w, r = n.input(1), n.input(2)
    b = n.input(3) if n.has(3) else None
    lens = n.input(4) if n.has(4) else None
    acts = _activations(n, defaults, dirs, dt)
    clip = n.attr("clip")
    ys, finals = [], [[] for _ in states]
    direction = n.attr("direction", "forward")
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        seq = _Seq(n, x, lens, reverse)
        wd, rd = _direction_slice(w, d), _direction_slice(r, d)
        xw = P.mat_mul(P.reshape(seq.x, shape=[steps * batch, -1]), wd, transpose_b=True)
        wb = rb = None
        if b is not None:
            wb, rb = _split_last(_direction_slice(b, d), 2)
            xw = P.add(xw, wb)
        xw = P.reshape(xw, shape=[steps, batch, gates * hidden])
        init = []
        for k, (idx, _) in enumerate(states):
            if n.has(idx):
                v = n.input(idx)  # [num_directions, batch, hidden], or [batch, num_directions, hidden] in layout 1
                init.append(_take.take(v, np.array(d, np.int64), 1 if layout == 1 else 0))
            else:
                init.append(np.zeros((batch, hidden), dtype=dt))
        extra = {"rb": rb, "peep": _direction_slice(n.input(7), d) if cell is _lstm_cell and n.has(7) else None}
        carry, outs = init, []
        for t in range(steps):
            xt = _take.take(xw, np.array(t, np.int64), 0)
            new = cell(n, xt, carry, rd, acts[d], clip, extra)
            mask = seq.mask(t)
            carry = [_hold(mask, v, c) for v, c in zip(new, carry)]
            outs.append(new[0] if mask is None else P.mul(mask, new[0]))
        y = P.concat([P.reshape(o, shape=[1, batch, hidden]) for o in outs], axis=0)
        ys.append(seq.flip(y) if reverse else y)
        for k, v in enumerate(carry):
            finals[k].append(P.reshape(v, shape=[1, batch, hidden]))
    y = P.concat([P.reshape(v, shape=[steps, 1, batch, hidden]) for v in ys], axis=1)
    finals = [P.concat(f, axis=0) if len(f) > 1 else f[0] for f in finals]
    if layout == 1:
        y = P.transpose(y, perm=[2, 0, 1, 3])
        finals = [P.transpose(f, perm=[1, 0, 2]) for f in finals]
    return (y, *finals)


def _clip(v, clip):
    if clip is None:
        return v
    c = np.array(clip, dtype=dtype_of(v))
    return P.minimum(P.maximum(v, P.neg(c)), c)


def _rnn_cell(n, xt, carry, r, acts, clip, extra):
    h = carry[0]
    z = P.add(xt, P.mat_mul(h, r, transpose_b=True))
    if extra["rb"] is not None:
        z = P.add(z, extra["rb"])
    return [acts[0](_clip(z, clip))]


def _gru_cell(n, xt, carry, r, acts, clip, extra):
    h = carry[0]
    f, g = acts
    hidden = shape_of(h)[-1]
    xz, xr, xh = _split_last(xt, 3)
    rz, rr, rh = (P.slice(r, begin=[i * hidden, 0], size=[hidden, hidden]) for i in range(3))
    rb = _split_last(extra["rb"], 3) if extra["rb"] is not None else [None] * 3

    def lin(a, b):
        return a if b is None else P.add(a, b)
    zt = f(_clip(P.add(xz, lin(P.mat_mul(h, rz, transpose_b=True), rb[0])), clip))
    rt = f(_clip(P.add(xr, lin(P.mat_mul(h, rr, transpose_b=True), rb[1])), clip))
    if n.attr("linear_before_reset", 0):
        pre = P.add(xh, P.mul(rt, lin(P.mat_mul(h, rh, transpose_b=True), rb[2])))
    else:
        pre = P.add(xh, lin(P.mat_mul(P.mul(rt, h), rh, transpose_b=True), rb[2]))
    ht = g(_clip(pre, clip))
    one = np.array(1, dtype=dtype_of(h))
    return [P.add(P.mul(P.sub(one, zt), ht), P.mul(zt, h))]


def _lstm_cell(n, xt, carry, r, acts, clip, extra):
    h, c = carry
    f, g, hfn = acts
    z = P.add(xt, P.mat_mul(h, r, transpose_b=True))
    if extra["rb"] is not None:
        z = P.add(z, extra["rb"])
    zi, zo, zf, zc = _split_last(z, 4)
    pi = po = pf = None
    if extra["peep"] is not None:
        pi, po, pf = _split_last(extra["peep"], 3)
    it = f(_clip(zi if pi is None else P.add(zi, P.mul(pi, c)), clip))
    if n.attr("input_forget", 0):
        ft = P.sub(np.array(1, dtype=dtype_of(c)), it)
    else:
        ft = f(_clip(zf if pf is None else P.add(zf, P.mul(pf, c)), clip))
    ct = g(_clip(zc, clip))
    c_new = P.add(P.mul(ft, c), P.mul(it, ct))
    ot = f(_clip(zo if po is None else P.add(zo, P.mul(po, c_new)), clip))
    return [P.mul(ot, hfn(c_new)), c_new]


def _dirs(n):
    d = n.attr("direction", "forward")
    if d not in ("forward", "reverse", "bidirectional"):
        raise n.fail(f"direction {d!r} is not one of forward, reverse, bidirectional")
    return 2 if d == "bidirectional" else 1


def _check(n):
    _dirs(n)
    if n.attr("layout", 0) not in (0, 1):
        raise n.fail(f"layout must be 0 or 1, got {n.attr('layout')}")


@converter("RNN", (7, 14, 22), _ATTRS, check=_check)
def _rnn(n):
    return _run(n, _rnn_cell, 1, _dirs(n), ["Tanh"], [(5, "h")])


@converter("GRU", (7, 14, 22), {**_ATTRS, "linear_before_reset": INT}, check=_check)
def _gru(n):
    return _run(n, _gru_cell, 3, _dirs(n), ["Sigmoid", "Tanh"], [(5, "h")])


@converter("LSTM", (7, 14, 22), {**_ATTRS, "input_forget": INT}, check=_check)
def _lstm(n):
    return _run(n, _lstm_cell, 4, _dirs(n), ["Sigmoid", "Tanh", "Tanh"], [(5, "h"), (6, "c")])
