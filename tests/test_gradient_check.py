"""Every differentiable op in the registry, gradient-checked in float64 against
central differences (opforge.testing), with broadcasting and keepdims.

The test walks the registry: an op with a floating-point input must declare a
gradient or NoGradient(), and every op with a gradient needs a case below."""

import numpy as np
import pytest

import opforge as of
from opforge import _opinfo  # the registry, through its one reader
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
    "ReshapeTo": [((r(2, 3), np.array([3, 2], np.int64)), {}), ((r(6), np.array([0, -1], np.int64)), {})],
    "Transpose": [((r(2, 3, 4),), {}), ((r(2, 3, 4),), {"perm": [1, 2, 0]})],
    "Cast": [((r(2, 3),), {"dtype": of.float64})],
    "Fill": [((r(),), {"shape": [2, 3]})],
    "Concat": [(([r(2, 3), r(1, 3)],), {"axis": 0}), (([r(2, 1), r(2, 2), r(2, 3)],), {"axis": -1})],
    "Slice": [((r(3, 4),), {"begin": [1, 0], "size": [2, 3]}), ((r(4),), {"begin": [1], "size": [2]})],
    "MatMul": [((r(2, 3), r(3, 4)), {}), ((r(3, 2), r(3, 4)), {"transpose_a": True}),
               ((r(2, 3), r(4, 3)), {"transpose_b": True}), ((r(2, 2, 3), r(3, 2)), {}),
               ((r(3), r(3, 2)), {}), ((r(2, 1, 2, 3), r(3, 3, 2)), {"transpose_a": False}),
               # One operand held (needs no gradient): its GEMM is skipped.
               ((r(2, 3), r(3, 4)), {}, {"a"}), ((r(2, 2, 3), r(3, 2)), {"transpose_a": False}, {"b"})],
    "Sum": REDUCTIONS, "Mean": REDUCTIONS, "Max": REDUCTIONS, "Min": REDUCTIONS,
    "Prod": [((positive(2, 3),), {}), ((r(2, 3),), {"axis": [1], "keepdims": True})],
    "Softmax": [((r(2, 4),), {}), ((r(3, 2),), {"axis": 0})],
    "LogSoftmax": [((r(2, 4),), {}), ((r(3, 2),), {"axis": 0})],
    "RmsNorm": [((r(2, 4), r(4)), {}), ((r(3), positive(3)), {"epsilon": 0.1})],
    "Gelu": UNARY,
    "LayerNorm": [((r(2, 4), r(4), r(4)), {}), ((r(3), positive(3), r(3)), {"epsilon": 0.1})],
    "Gather": [((r(5, 3), np.array([4, 0, 4, 2])), {}), ((r(4), np.array([[1, 3], [3, 0]])), {})],
    # Both outputs: the loss, and the backprop (second derivatives of the loss).
    "SparseSoftmaxCrossEntropyWithLogits": [((r(3, 4), np.array([0, 3, 1])), {})],
    # special_ops: Erf is smooth; the rounding ops are flat (zero gradient) away from their jumps.
    "Erf": UNARY,
    # trig_ops: inside each domain, away from its edges.
    "Asin": [((r(3, low=-0.8, high=0.8),), {})], "Acos": [((r(3, low=-0.8, high=0.8),), {})],
    "Atan": UNARY, "Asinh": UNARY, "Acosh": [((r(3, low=1.3, high=3.0),), {})],
    "Atanh": [((r(3, low=-0.8, high=0.8),), {})],
    "Floor": [((np.floor(r(2, 3)) + 0.4,), {})], "Ceil": [((np.floor(r(2, 3)) + 0.6,), {})],
    "Round": [((np.floor(r(2, 3)) + 0.3,), {})], "Sign": [((away_from_zero(2, 3),), {})],
    # index_ops: indices are held; the scatters with distinct indices ('none' and 'add').
    "GatherND": [((r(3, 4), np.array([[2, 1], [0, -1]])), {}), ((r(3, 2, 2), np.array([[1], [1]])), {})],
    "GatherElements": [((r(3, 4), np.array([[0, 3], [2, 2]])), {"axis": 1}),
                       ((r(3, 2), np.array([[2, 0], [0, 0]])), {})],
    "ScatterND": [((r(4, 2), np.array([[3], [1]]), r(2, 2)), {}),
                  ((r(4, 2), np.array([[3], [3], [0]]), r(3, 2)), {}),  # repeated: the last write wins
                  ((r(4, 2), np.array([[3], [3]]), r(2, 2)), {"reduction": "add"})],
    "ScatterElements": [((r(3, 3), np.array([[2, 0], [1, 1]]), r(2, 2)), {"axis": 1}),
                        ((r(3, 3), np.array([[2, 2]]), r(1, 2)), {"reduction": "add"})],
    "TopK": [((distinct(3, 5),), {"k": 2}), ((distinct(4, 3),), {"k": 3, "axis": 0, "largest": False})],
    # attention_ops: the mask has no gradient (held); grouped heads, causal, an explicit scale.
    "ScaledDotProductAttention": [((r(1, 2, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 2), r(3, 3)), {}, {"mask"}),
                                  ((r(1, 4, 2, 3), r(1, 2, 5, 3), r(1, 2, 5, 2), r(1)),
                                   {"causal": True, "scale": 0.7}, {"mask"})],
}


def _max_of(x, axis, keepdims):
    return np.max(x, axis=None if axis is None else tuple(axis), keepdims=keepdims)


def _sum_of(x, axis, keepdims):
    return np.sum(x, axis=None if axis is None else tuple(axis), keepdims=keepdims)


def reduce_grad_cases(extra_direction):
    """(x, y, grad[, directions]) for each reduction. For max/min, x and y are
    held: they only pick the ties (piecewise constant; a nudge breaks a tie)."""
    cases = []
    for reduction, axis, keepdims in [("sum", [1], False), ("mean", None, False), ("max", [0, 2], True),
                                      ("min", [-1], False), ("prod", [1], True), ("prod", None, False)]:
        x = distinct(2, 3, 2) if reduction in ("max", "min") else r(2, 3, 2)
        y = (_max_of(x, axis, keepdims) if reduction == "max"
             else -_max_of(-x, axis, keepdims) if reduction == "min" else _sum_of(x, axis, keepdims))
        n = (2 if reduction == "prod" else 1) if extra_direction else 0  # prod: up to fourth derivatives
        inputs = (x, y, r(*y.shape)) + (([r(2, 3, 2) for _ in range(n)],) if n else ())
        held = {"x", "y"} if reduction in ("max", "min") else set()
        cases.append((inputs, {"reduction": reduction, "axis": axis, "keepdims": keepdims}, held))
    return cases


# The backward ops: their own gradients make second derivatives (and, as
# compositions, higher ones) work through every op.
CASES.update({
    "SoftmaxGrad": [((r(2, 4), r(2, 4)), {}), ((r(3, 2), r(3, 2)), {"axis": 0})],
    "RmsNormGrad": [((r(2, 4), r(4), r(2, 4)), {}), ((r(3), positive(3), r(3)), {"epsilon": 0.1}),
                    ((r(2, 2, 3), r(3), r(2, 2, 3)), {"epsilon": 0.01})],
    "LayerNormGrad": [((r(2, 4), r(2, 4), r(4)), {}), ((r(3), r(3), positive(3)), {"epsilon": 0.1}),
                      ((r(2, 2, 3), r(2, 2, 3), r(3)), {"epsilon": 0.01})],
    "GeluGrad": [((r(2, 3), r(2, 3)), {}), ((r(), r()), {})],
    "GatherGrad": [((r(5, 3), np.array([4, 0, 4, 2]), r(4, 3)), {}),
                   ((r(4), np.array([[1, 3], [3, 0]]), r(2, 2)), {})],
    "MatMulGrad": [((r(2, 3), r(3, 4), r(2, 4)), {}),
                   ((r(3, 2), r(3, 4), r(2, 4)), {"transpose_a": True}),
                   ((r(2, 3), r(4, 3), r(2, 4)), {"transpose_b": True}),
                   ((r(2, 1, 2, 3), r(3, 3, 2), r(2, 3, 2, 2)), {}),
                   ((r(3, 1, 3, 2), r(2, 4, 3), r(3, 2, 2, 4)), {"transpose_a": True, "transpose_b": True}),
                   ((r(3), r(3, 2), r(2)), {}), ((r(2, 3), r(3), r(2)), {}), ((r(3), r(3), r()), {}),
                   # A result not computed is constant zeros: its gradient is zero.
                   ((r(2, 3), r(3, 4), r(2, 4)), {"compute_grad_a": False}),
                   ((r(2, 1, 2, 3), r(3, 3, 2), r(2, 3, 2, 2)), {"compute_grad_b": False}),
                   ((r(2, 3), r(3, 4), r(2, 4)), {"compute_grad_a": False, "compute_grad_b": False}),
                   # Only some inputs needing a gradient (held ones do not).
                   ((r(2, 3), r(3, 4), r(2, 4)), {}, {"a"}),
                   ((r(2, 3), r(3, 4), r(2, 4)), {"compute_grad_a": False}, {"a", "b"}),
                   ((r(3, 2), r(4, 3), r(2, 4)), {"transpose_a": True, "transpose_b": True}, {"grad"})],
    "ConcatGrad": [((r(3, 3), [r(2, 3), r(1, 3)]), {"axis": 0, "index": 1}),
                   ((r(2, 6), [r(2, 1), r(2, 2), r(2, 3)]), {"axis": -1, "index": 1})],
    "ConcatGradGrad": [((r(1, 3), [r(2, 3), r(1, 3)]), {"axis": 0, "index": 1}),
                       ((r(2, 2), [r(2, 1), r(2, 2), r(2, 3)]), {"axis": -1, "index": 1})],
    "SliceGrad": [((r(3, 4), r(2, 3)), {"begin": [1, 0], "size": [2, 3]}),
                  ((r(4), r(2)), {"begin": [1], "size": [2]})],
    "ReduceGrad": reduce_grad_cases(False),
    "ReduceGradGrad": reduce_grad_cases(True),
})

from vision_grad_cases import vision_cases  # noqa: E402  (conv / pool ops)

CASES.update(vision_cases())


def registry_ops():
    return _opinfo.registry_dict()["ops"]


def may_be_float(op, arg):
    if arg["fixed_type"] is not None:
        return arg["fixed_type"].startswith("float")
    allowed = next(a for a in op["attrs"] if a["name"] == arg["type_attr"])["allowed"]
    return allowed is None or any(t.startswith("float") for t in allowed)


DIFFERENTIABLE = sorted(op["name"] for op in registry_ops() if op["gradient"]["rules"])


def test_every_op_with_a_float_input_declares_its_gradient():
    undeclared = [op["name"] for op in registry_ops()
                  if any(may_be_float(op, a) for a in op["inputs"])
                  and not op["gradient"]["rules"] and not op["gradient"]["none"]]
    assert undeclared == [], f"ops with a float input but no .Gradient() or .NoGradient(): {undeclared}"


# Differentiable ops with float32 kernels only, which this float64 checker
# cannot run: where their gradient is checked instead.
FLOAT32_ONLY = {
    "FusedMatMul": "tests/test_gemm.py::test_fused_matmul_gradient (the unfused tape and central differences)",
    "FusedMatMulActivationGrad": "tests/test_fused_linear_tape.py (a Hessian-vector product against autograd, "
                                 "central differences in dy)",
}


def test_every_differentiable_op_has_a_gradient_check_case():
    # Backward ops included: their gradients are what second derivatives use.
    missing = sorted(set(DIFFERENTIABLE) - set(CASES) - set(FLOAT32_ONLY))
    assert missing == [], f"add gradient-check cases for {missing}"


def wrapper(op_name):
    from codegen.naming import op_python_name
    return getattr(of.ops, op_python_name(op_name))


def _flat(out):
    # Every output is checked: a multi-output op's outputs, flattened and joined.
    if not isinstance(out, tuple):
        return out
    # Integer outputs (TopK's indices) have no gradient: only float ones are checked.
    return of.concat([of.reshape(o, [-1]) for o in out if o.dtype in (of.float32, of.float64)], axis=0)


@pytest.mark.parametrize("op_name", sorted(CASES))
def test_gradient_matches_finite_differences(op_name):
    fn = wrapper(op_name)
    names, is_list, _, _ = _pw.op_signature(op_name)
    for case in CASES[op_name]:
        inputs, attrs = case[0], case[1]
        held_names = case[2] if len(case) > 2 else set()
        # The float inputs are checked (a list input element by element);
        # others (a condition, indices, labels) and held_names are held.
        slots, check_inputs = [], []   # per input: the value held, or how many of check_inputs it takes
        for name, listed, v in zip(names, is_list, inputs):
            if listed:
                slots.append(len(v))
                check_inputs.extend(v)
            elif name in held_names or np.asarray(v).dtype.kind != "f":
                slots.append(("held", v))
            else:
                slots.append(1)
                check_inputs.append(v)

        def call(*xs, attrs=attrs, slots=slots, names=names, is_list=is_list):
            args, k = {}, 0
            for name, slot, listed in zip(names, slots, is_list):
                if isinstance(slot, tuple):
                    args[name] = slot[1]
                elif listed:
                    args[name] = list(xs[k:k + slot])
                    k += slot
                else:
                    args[name] = xs[k]
                    k += 1
            return _flat(fn(**args, **attrs))
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
    (analytic,), (numeric,) = of.testing.compute_gradient(of.sin, [x])
    np.testing.assert_allclose(analytic, np.diag(np.cos(x)), atol=1e-12)
    np.testing.assert_allclose(numeric, np.diag(np.cos(x)), atol=1e-6)


def test_compute_gradient_has_tensorflows_shape():
    # tf.test.compute_gradient: (theoretical, numerical), each a list with one
    # (output size, input size) Jacobian per input, not a list of pairs.
    x, y = r(2, 3), r(3)
    result = of.testing.compute_gradient(of.mul, [x, y])
    assert isinstance(result, tuple) and len(result) == 2
    theoretical, numerical = result
    assert len(theoretical) == len(numerical) == 2
    assert [j.shape for j in theoretical] == [(6, 6), (6, 3)]
    assert [j.shape for j in numerical] == [(6, 6), (6, 3)]
    # d (x * y)[i, k] / d x = diag(y broadcast); / d y[k] = x[i, k] at column k.
    np.testing.assert_allclose(theoretical[0], np.diag(np.broadcast_to(y, (2, 3)).ravel()), atol=1e-12)
    want_y = np.zeros((6, 3))
    for i in range(2):
        for k in range(3):
            want_y[i * 3 + k, k] = x[i, k]
    np.testing.assert_allclose(theoretical[1], want_y, atol=1e-12)
    np.testing.assert_allclose(numerical[1], want_y, atol=1e-6)
