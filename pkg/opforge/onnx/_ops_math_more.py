"""More ONNX operators composed of opforge ops: Celu, Softsign,
ThresholdedRelu, Shrink, Sinh, Cosh, Tan, ReduceLogSum, Size, EyeLike,
ConstantOfShape (with a constant shape)."""

import numpy as np

from opforge import ops as P
from opforge.onnx import _dtypes, _validate
from opforge.onnx._node import FLOAT, INT, INTS, TENSOR, converter, dtype_of, shape_of
from opforge.onnx._ops_math import _const
from opforge.onnx._ops_nn import _reduce


@converter("Celu", (12, 28), {"alpha": FLOAT})
def _celu(n):
    x = n.input(0)
    alpha = _const(x, n.attr("alpha", 1.0))
    neg = P.mul(alpha, P.sub(P.exp(P.div(x, alpha)), _const(x, 1)))
    return P.select(P.less(x, _const(x, 0)), neg, x)


converter("Softsign", (1, 22))(lambda n: P.div(n.input(0), P.add(_const(n.input(0), 1), P.abs(n.input(0)))))


@converter("ThresholdedRelu", (10, 22), {"alpha": FLOAT})
def _thresholded_relu(n):
    x = n.input(0)
    return P.select(P.greater(x, _const(x, n.attr("alpha", 1.0))), x, _const(x, 0))


@converter("Shrink", (9,), {"bias": FLOAT, "lambd": FLOAT})
def _shrink(n):
    x = n.input(0)
    if dtype_of(x).kind != "f":
        raise n.fail(f"Shrink of {dtype_of(x)} is not supported (floats only)")
    lambd, bias = _const(x, n.attr("lambd", 0.5)), _const(x, n.attr("bias", 0.0))
    return P.select(P.less(x, P.neg(lambd)), P.add(x, bias),
                    P.select(P.greater(x, lambd), P.sub(x, bias), _const(x, 0)))


def _sinh(n):
    x = n.input(0)
    return P.mul(_const(x, 0.5), P.sub(P.exp(x), P.exp(P.neg(x))))


def _cosh(n):
    x = n.input(0)
    return P.mul(_const(x, 0.5), P.add(P.exp(x), P.exp(P.neg(x))))


converter("Sinh", (9, 22))(_sinh)
converter("Cosh", (9, 22))(_cosh)
converter("Tan", (7, 22))(lambda n: P.div(P.sin(n.input(0)), P.cos(n.input(0))))


def _log_sum(x, axis, keepdims):
    return P.log(P.sum(x, axis=axis, keepdims=keepdims))


converter("ReduceLogSum", (1, 11, 13, 18, 28), {"axes": INTS, "keepdims": INT, "noop_with_empty_axes": INT})(
    _reduce(_log_sum, 18))


@converter("Size", (1, 13, 19, 21, 23, 24, 25))
def _size(n):
    shape = shape_of(n.input(0))
    if any(d is None for d in shape):
        raise n.fail(f"needs the static shape of its input, got {list(shape)}")
    return np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)


@converter("EyeLike", (9, 22), {"dtype": INT, "k": INT})
def _eye_like(n):
    x = n.input(0)
    shape = shape_of(x)
    if len(shape) != 2 or None in shape:
        raise n.fail(f"input must be a static 2-D tensor, got shape {list(shape)}")
    dt = _dtypes.to_numpy(n.attr("dtype"), f"node {n.where} attribute 'dtype'") \
        if n.has_attr("dtype") else dtype_of(x)
    return np.eye(shape[0], shape[1], k=n.attr("k", 0), dtype=dt)


@converter("ConstantOfShape", (9, 20, 21, 23, 24, 25), {"value": TENSOR})
def _constant_of_shape(n):
    shape = n.static_ints(0, "input")
    if n.has_attr("value"):
        v = _validate.tensor_to_numpy(n.attr("value"), f"node {n.where} attribute 'value'")
        if v.size != 1:
            raise n.fail(f"attribute 'value' must hold one element, got {v.size}")
        return np.full(shape, v.reshape(-1)[0], dtype=v.dtype)
    return np.zeros(shape, dtype=np.float32)


# Converter modules of newer operator families register on import here.
from opforge.onnx import _ops_bitwise, _ops_control, _ops_detection, _ops_grid_sample  # noqa: E402,F401
from opforge.onnx import _ops_rnn, _ops_rotary, _ops_scan_math, _ops_tfidf, _ops_unique, _ops_window  # noqa: E402,F401
