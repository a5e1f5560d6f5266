"""numpy oracle of FusedElementwise (cpp/framework/graph_fusion.cc makes it;
cpp/include/opforge/fused_elementwise.h has the program format), for
test_bad_input.py: random programs over one or two inputs, interpreted in numpy;
sometimes a register is read before it is written."""

import numpy as np
from hypothesis import strategies as st

from robustness_oracles import array, quiet, shapes

_FUSED_UNARY = {2: np.negative, 3: np.abs, 4: np.square, 5: lambda v: np.maximum(v, 0), 9: np.tanh,
                10: lambda v: 1 / (1 + np.exp(-v))}
_FUSED_BINARY = {14: np.add, 15: np.subtract, 16: np.multiply, 18: np.maximum, 19: np.minimum}


def fused_elementwise_gen(draw, dtype):
    shape = draw(shapes(0, 3))
    ins = [array(draw, dtype, shape, small=True)]
    if draw(st.booleans()):
        second = shape[len(shape) - draw(st.integers(0, len(shape))):] if draw(st.integers(0, 5)) else draw(shapes(0, 2))
        ins.append(array(draw, dtype, tuple(second), small=True))
    prog = [v for i in range(len(ins)) for v in (0, i, i, 0)]
    regs = len(ins)
    for _ in range(draw(st.integers(1, 5))):
        code = draw(st.sampled_from(sorted(_FUSED_UNARY) + sorted(_FUSED_BINARY) + [20]))
        top = regs if draw(st.integers(0, 7)) else regs + 1  # sometimes an unwritten register
        a, b = draw(st.integers(0, top - 1)), draw(st.integers(0, top - 1))
        prog += [code, regs, a, 0 if code == 20 else b]
        regs += 1
    return (ins,), {"program": prog, "constants": [draw(st.sampled_from([2.0, 3.0, -1.0, 0.5]))]}


@quiet
def fused_elementwise(inputs, program, constants):
    out = np.broadcast_shapes(*(np.shape(v) for v in inputs))
    dt = np.asarray(inputs[0]).dtype
    regs = {}
    for i in range(0, len(program), 4):
        code, dst, a, b = program[i:i + 4]
        if code == 0:
            regs[dst] = np.broadcast_to(np.asarray(inputs[a]), out).astype(dt)
            continue
        if a not in regs or (code in _FUSED_BINARY and b not in regs):
            raise ValueError("a register is read before it is written")
        x = regs[a]
        if code == 20:  # x ** constants[b], as the Pow kernel computes it
            c = constants[b]
            regs[dst] = (x * x if c == 2 else x * x * x if c == 3 else 1 / x if c == -1 else np.sqrt(x)).astype(dt)
        elif code in (9, 10):
            regs[dst] = _FUSED_UNARY[code](x.astype(np.float64)).astype(dt)
        elif code in _FUSED_UNARY:
            regs[dst] = _FUSED_UNARY[code](x)
        else:
            regs[dst] = _FUSED_BINARY[code](x, regs[b])
    return regs[program[-3]]


FUSED_ELEMENTWISE_ORACLES = {"FusedElementwise": (fused_elementwise_gen, fused_elementwise)}
