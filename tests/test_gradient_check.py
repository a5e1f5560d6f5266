"""Every differentiable op in the registry, gradient-checked in float64 against
central differences (opforge.testing), with broadcasting and keepdims.

The test walks the registry: an op with a floating-point input must declare a
gradient or NoGradient(), and every op with a gradient needs a case below."""
import json

import numpy as np
import pytest

import opforge as of
from opforge import _pywrap_internal as _pw

RNG = np.random.default_rng(7)


def r(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape)


def away_from_zero(*shape):
    x = r(*shape, low=0.3, high=2.0)
    return x * RNG.choice([-1.0, 1.0], size=shape)


def distinct(*shape):
    # Elements far apart, so max/min/ties and finite differences agree.
    return RNG.permutation(np.arange(int(np.prod(shape)), dtype=np.float64)).reshape(shape) * 0.37 - 1.1


def positive(*shape):
    return r(*shape, low=0.5, high=2.0)


UNARY = [((r(3),), {}), ((r(2, 3),), {}), ((r(),), {})]
BINARY = [((r(2, 3), r(2, 3)), {}), ((r(2, 3), r(3)), {}), ((r(2, 1), r(1, 3)), {}), ((r(), r(2)), {})]
REDUCTIONS = [((distinct(2, 3),), {}), ((distinct(2, 3, 2),), {"axis": [1]}),
              ((distinct(2, 3),), {"axis": [-1], "keepdims": True}),
              ((distinct(2, 3, 2),), {"axis": [0, 2], "keepdims": True})]

# Op -> [(inputs, attrs)]: valid float64 inputs where the op is smooth.
CASES = {
    "Add": BINARY, "Sub": BINARY, "Mul": BINARY,
    "Div": [((r(2, 3), away_from_zero(3)), {}), ((r(2, 1), away_from_zero(1, 3)), {})],
    "Maximum": [((distinct(2, 3), distinct(2, 3) + 0.05), {}), ((distinct(2, 3), distinct(3) + 0.01), {})],
    "Minimum": [((distinct(2, 3), distinct(2, 3) + 0.05), {}), ((distinct(2, 3), distinct(3) + 0.01), {})],
    "Pow": [((positive(2, 3), r(2, 3)), {}), ((positive(3), r(2, 1)), {})],
    "Neg": UNARY, "Square": UNARY, "Exp": UNARY, "Sin": UNARY, "Cos": UNARY, "Tanh": UNARY,
    "Sigmoid": UNARY, "Identity": UNARY,
    "Abs": [((away_from_zero(2, 3),), {})],
    "Relu": [((away_from_zero(2, 3),), {})],
    "Log": [((positive(2, 3),), {})],
    "Sqrt": [((positive(2, 3),), {})],
    "Select": [((RNG.random((2, 3)) > 0.5, r(2, 3), r(2, 3)), {}), ((RNG.random(3) > 0.5, r(2, 3), r(1)), {})],
    "Reshape": [((r(2, 3),), {"shape": [3, 2]}), ((r(6),), {"shape": [1, 2, 3]})],
    "Transpose": [((r(2, 3, 4),), {}), ((r(2, 3, 4),), {"perm": [1, 2, 0]})],
    "Cast": [((r(2, 3),), {"dtype": of.float64})],
    "Fill": [((r(),), {"shape": [2, 3]})],
    "Concat": [(([r(2, 3), r(1, 3)],), {"axis": 0}), (([r(2, 1), r(2, 2), r(2, 3)],), {"axis": -1})],
    "Slice": [((r(3, 4),), {"begin": [1, 0], "size": [2, 3]}), ((r(4),), {"begin": [1], "size": [2]})],
    "MatMul": [((r(2, 3), r(3, 4)), {}), ((r(3, 2), r(3, 4)), {"transpose_a": True}),
               ((r(2, 3), r(4, 3)), {"transpose_b": True}), ((r(2, 2, 3), r(3, 2)), {}),
               ((r(3), r(3, 2)), {}), ((r(2, 1, 2, 3), r(3, 3, 2)), {"transpose_a": False})],
    "Sum": REDUCTIONS, "Mean": REDUCTIONS, "Max": REDUCTIONS, "Min": REDUCTIONS,
    "Prod": [((positive(2, 3),), {}), ((r(2, 3),), {"axis": [1], "keepdims": True})],
    "Softmax": [((r(2, 4),), {}), ((r(3, 2),), {"axis": 0})],
    "LogSoftmax": [((r(2, 4),), {}), ((r(3, 2),), {"axis": 0})],
    "RmsNorm": [((r(2, 4), r(4)), {}), ((r(3), positive(3)), {"epsilon": 0.1})],
    "Gelu": UNARY,
    "LayerNorm": [((r(2, 4), r(4), r(4)), {}), ((r(3), positive(3), r(3)), {"epsilon": 0.1})],
    "Gather": [((r(5, 3), np.array([4, 0, 4, 2])), {}), ((r(4), np.array([[1, 3], [3, 0]])), {})],
    # Output 0, the loss; its second output (the backprop) gets no gradient here.
    "SparseSoftmaxCrossEntropyWithLogits": [((r(3, 4), np.array([0, 3, 1])), {})],
}


def registry_ops():
    return json.loads(_pw.registry_json())["ops"]


def may_be_float(op, arg):
    if arg["fixed_type"] is not None:
        return arg["fixed_type"].startswith("float")
    allowed = next(a for a in op["attrs"] if a["name"] == arg["type_attr"])["allowed"]
    return allowed is None or any(t.startswith("float") for t in allowed)


DIFFERENTIABLE = sorted(op["name"] for op in registry_ops() if op["gradient"]["rules"])


# Backward ops whose own gradient is not declared yet: a second derivative
# through them raises NotFoundError naming them (never a silent zero).
NO_SECOND_DERIVATIVE = {"SoftmaxGrad", "RmsNormGrad", "MatMulGrad", "ConcatGrad", "ReduceGradGrad",
                        "GeluGrad", "LayerNormGrad", "GatherGrad"}


def test_every_op_with_a_float_input_declares_its_gradient():
    undeclared = [op["name"] for op in registry_ops()
                  if any(may_be_float(op, a) for a in op["inputs"])
                  and not op["gradient"]["rules"] and not op["gradient"]["none"]
                  and op["name"] not in NO_SECOND_DERIVATIVE]
    assert undeclared == [], f"ops with a float input but no .Gradient() or .NoGradient(): {undeclared}"


def test_every_differentiable_op_has_a_gradient_check_case():
    grad_ops = {op["name"] for op in registry_ops() if op["group"] == "grad"}
    missing = sorted(set(DIFFERENTIABLE) - set(CASES) - grad_ops)
    assert missing == [], f"add gradient-check cases for {missing}"


def wrapper(op_name):
    from codegen.naming import op_python_name
    return getattr(of.ops, op_python_name(op_name))


@pytest.mark.parametrize("op_name", sorted(CASES))
def test_gradient_matches_finite_differences(op_name):
    fn = wrapper(op_name)
    names, is_list, _, _ = _pw.op_signature(op_name)
    for inputs, attrs in CASES[op_name]:
        if any(is_list):  # Concat: check each element of the list
            check_inputs = list(inputs[0])

            def call(*xs, attrs=attrs):
                return fn(list(xs), **attrs)
        else:
            # The float inputs are checked; others (a condition, indices, labels) are held.
            held = {n: v for n, v in zip(names, inputs) if np.asarray(v).dtype.kind != "f"}
            free = [n for n in names if n not in held]
            check_inputs = [v for n, v in zip(names, inputs) if n not in held]

            def call(*xs, attrs=attrs, held=held, free=free):
                out = fn(**held, **dict(zip(free, xs)), **attrs)
                return out[0] if isinstance(out, tuple) else out
        call.__name__ = op_name
        of.testing.check_gradients(call, check_inputs, atol=1e-6, rtol=1e-5, delta=1e-6)


def test_checker_names_the_op_and_input():
    @of.RegisterGradient("Identity")  # registered once per process: restore below
    def wrong(op, dy):
        return [dy * 2.0]
    try:
        with pytest.raises(AssertionError, match=r"gradient of identity w\.r\.t\. input 0"):
            of.testing.check_gradients(of.identity, [r(3)])
    finally:
        from opforge.autodiff import registry
        del registry._python["Identity"]


def test_compute_gradient_returns_jacobians():
    x = r(3)
    (analytic, numeric), = of.testing.compute_gradient(of.sin, [x])
    np.testing.assert_allclose(analytic, np.diag(np.cos(x)), atol=1e-12)
    np.testing.assert_allclose(numeric, np.diag(np.cos(x)), atol=1e-6)
