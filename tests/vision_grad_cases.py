"""Gradient-check cases (float64) for the conv / pool ops; test_gradient_check.py adds them to CASES."""
import numpy as np

RNG = np.random.default_rng(23)


def r(*shape):
    return RNG.uniform(-2.0, 2.0, size=shape)


def distinct(*shape):
    return RNG.permutation(np.arange(int(np.prod(shape)), dtype=np.float64)).reshape(shape) * 0.37 - 1.1


_CONV = [
    ((r(2, 3, 5, 4), r(4, 3, 3, 2)), {}),
    ((r(1, 4, 6, 5), r(4, 2, 2, 3)), {"strides": [2, 1], "pads": [1, 0, 0, 2], "dilations": [1, 2], "groups": 2}),
    ((r(2, 3, 4, 4), r(3, 1, 3, 3)), {"pads": [1, 1, 1, 1], "groups": 3}),  # depthwise
    ((r(2, 3, 3, 3), r(2, 3, 1, 1)), {}),  # pointwise
]


def _backprop_cases():
    from opforge import ops
    cases = []
    for (x, f), attrs in _CONV:
        y = ops.conv2d(x, f, **attrs).numpy()
        cases.append(((x, f, r(*y.shape)), attrs))
    return cases


def _pool_cases(op, distinct_x):
    from opforge import ops
    fn = {"MaxPool2DGrad": ops.max_pool2d, "AvgPool2DGrad": ops.avg_pool2d,
          "AdaptiveAvgPool2DGrad": ops.adaptive_avg_pool2d}[op]
    out = []
    for (x,), attrs in (MAX if op == "MaxPool2DGrad" else AVG if op == "AvgPool2DGrad" else ADAPTIVE):
        y = fn(x, **attrs).numpy()
        out.append(((x, r(*y.shape)), attrs, {"x"} if distinct_x else set()))
    return out


MAX = [((distinct(2, 2, 5, 5),), {"ksize": [2, 2], "strides": [2, 2]}),
       ((distinct(1, 2, 5, 6),), {"ksize": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1], "dilations": [1, 2],
                                  "ceil_mode": True})]
AVG = [((r(2, 2, 5, 5),), {"ksize": [2, 2], "strides": [2, 2]}),
       ((r(1, 2, 5, 6),), {"ksize": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": True}),
       ((r(1, 2, 5, 6),), {"ksize": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": True})]
ADAPTIVE = [((r(2, 2, 5, 7),), {"output_size": [3, 2]}), ((r(1, 3, 4, 4),), {"output_size": [1, 1]})]


_CONVT = [
    ((r(2, 3, 3, 4), r(3, 2, 3, 2)), {}),
    ((r(1, 4, 3, 3), r(4, 1, 2, 3)), {"strides": [2, 3], "pads": [1, 0, 0, 1], "dilations": [1, 2], "groups": 2,
                                      "output_padding": [1, 2]}),
]
_PAD = [((r(2, 3, 4),), {"pads": [0, 1, 2, 1, 0, 1]}),
        ((r(2, 3, 4),), {"pads": [0, 2, 3, 0, 1, 2], "mode": "reflect"}),
        ((r(3, 4),), {"pads": [2, 1, 3, 2], "mode": "edge"}),
        ((r(3, 4),), {"pads": [2, 1, 3, 4], "mode": "wrap"}),
        ((r(2, 3),), {"pads": [1, 0, 1, 2], "constant_value": 1.5})]
_BN = [((r(4, 3, 2, 2), r(3), r(3), r(3), r(3) ** 2 + 0.5), {"training": True}),
       ((r(3, 2, 5), r(2), r(2), r(2), r(2) ** 2 + 0.5), {"epsilon": 0.1}),
       ((r(5, 3), r(3), r(3), r(3), r(3) ** 2 + 0.5), {"training": True, "epsilon": 0.01})]
_RESIZE = [((r(1, 2, 3, 4),), {"size": [5, 7]}),
           ((r(2, 1, 4, 3),), {"size": [2, 5], "coordinate_mode": "align_corners"}),
           ((r(1, 1, 3, 3),), {"size": [7, 4], "coordinate_mode": "asymmetric", "scales": [2.5, 1.5]}),
           ((r(1, 1, 3, 3),), {"size": [1, 6], "coordinate_mode": "pytorch_half_pixel"})]


def _grad_op_cases(fn, cases):
    out = []
    for (x,), attrs in cases:
        a = {k: v for k, v in attrs.items() if k != "constant_value"}
        out.append(((x, r(*fn(x, **attrs).numpy().shape)), a))
    return out


def vision_cases():
    from opforge import ops
    bp = _backprop_cases()
    return {
        "ConvTranspose2D": _CONVT,
        "Pad": _PAD,
        "PadGrad": _grad_op_cases(ops.pad, _PAD),
        "BatchNorm": _BN,
        "ResizeBilinear": _RESIZE,
        "ResizeBilinearGrad": _grad_op_cases(ops.resize_bilinear, _RESIZE),
        "Conv2D": _CONV,
        "Conv2DBackpropInput": bp,
        "Conv2DBackpropFilter": bp,
        "MaxPool2D": MAX,
        "AvgPool2D": AVG,
        "AvgPool2DGrad": _pool_cases("AvgPool2DGrad", False),
        "AdaptiveAvgPool2D": ADAPTIVE,
        "AdaptiveAvgPool2DGrad": _pool_cases("AdaptiveAvgPool2DGrad", False),
    }
