"""Which opforge ops are written as default-domain ONNX operators, and back.

Each entry is exact for what it accepts: ``to_onnx`` returns None when a
node's attrs have no ONNX spelling (a transposed MatMul, an integer Div,
whose ONNX form truncates), and the node is then written in the
``opforge`` domain instead. The reverse is derived from the same entries, so
a saved graph loads back to the ops it was saved from. The opset is 17:
ReduceSum takes its axes as an input there, the other reductions as an
attribute.
"""

import numpy as np

OPSET = 17

# opforge op -> ONNX operator, no attrs on either side (numpy broadcasting on both).
SIMPLE = {
    "Add": "Add", "Sub": "Sub", "Mul": "Mul", "Neg": "Neg", "Abs": "Abs", "Exp": "Exp", "Log": "Log",
    "Sqrt": "Sqrt", "Tanh": "Tanh", "Sigmoid": "Sigmoid", "Relu": "Relu", "Erf": "Erf", "Floor": "Floor",
    "Ceil": "Ceil", "Round": "Round", "Sin": "Sin", "Cos": "Cos", "Sign": "Sign", "Identity": "Identity",
    "Pow": "Pow", "Maximum": "Max", "Minimum": "Min", "Equal": "Equal", "Greater": "Greater", "Less": "Less",
    "GreaterEqual": "GreaterOrEqual", "LessEqual": "LessOrEqual", "LogicalAnd": "And", "LogicalOr": "Or",
    "LogicalNot": "Not", "Select": "Where", "IsNan": "IsNaN", "Gather": "Gather",
}
REDUCE = {"Sum": "ReduceSum", "Mean": "ReduceMean", "Max": "ReduceMax", "Min": "ReduceMin", "Prod": "ReduceProd"}


class Onnx:
    """How one node is written: operator, attributes, extra constant inputs (int64 arrays)."""

    __slots__ = ("op_type", "attrs", "const_inputs")

    def __init__(self, op_type, attrs=None, const_inputs=()):
        self.op_type, self.attrs, self.const_inputs = op_type, dict(attrs or {}), list(const_inputs)


def to_onnx(op_type, attrs):
    """The default-domain spelling of an opforge node, or None (then the opforge domain).

    attrs: the node's attrs, inferred ones included (T...)."""
    if op_type in SIMPLE:
        return Onnx(SIMPLE[op_type])
    if op_type == "Div":
        return Onnx("Div") if np.dtype(attrs["T"].as_numpy_dtype).kind == "f" else None
    if op_type == "MatMul":
        return None if attrs["transpose_a"] or attrs["transpose_b"] else Onnx("MatMul")
    if op_type in ("Softmax", "LogSoftmax"):
        return Onnx(op_type, {"axis": attrs["axis"]})
    if op_type == "Transpose":
        return Onnx("Transpose", {"perm": list(attrs["perm"])}) if attrs["perm"] is not None else None
    if op_type == "Reshape":
        # allowzero: a 0 in shape means a dim of 0, as opforge reads it (not "copy the input's dim").
        return Onnx("Reshape", {"allowzero": 1}, [np.array(attrs["shape"], np.int64)])
    if op_type == "Cast":
        return Onnx("Cast", {"to": attrs["dtype"]})
    if op_type == "Concat":
        return Onnx("Concat", {"axis": attrs["axis"]})
    if op_type in REDUCE:
        axis, keep = attrs["axis"], int(bool(attrs["keepdims"]))
        if op_type == "Sum":
            return Onnx("ReduceSum", {"keepdims": keep}, [] if axis is None else [np.array(axis, np.int64)])
        return Onnx(REDUCE[op_type], {"keepdims": keep} if axis is None else {"keepdims": keep, "axes": list(axis)})
    return None


_SIMPLE_BACK = {v: k for k, v in SIMPLE.items()}
_REDUCE_BACK = {v: k for k, v in REDUCE.items()}
# ONNX operator -> the attributes its reverse reads (anything else is refused).
_ATTRS_BACK = {"Softmax": {"axis"}, "LogSoftmax": {"axis"}, "Transpose": {"perm"}, "Reshape": {"allowzero"},
               "Cast": {"to"}, "Concat": {"axis"}, **{r: {"keepdims", "axes"} for r in REDUCE.values()}}


def known(onnx_op):
    return onnx_op in _SIMPLE_BACK or onnx_op in _ATTRS_BACK or onnx_op in ("Div", "MatMul")


def from_onnx(onnx_op, attrs, const_inputs, fail):
    """(opforge op, its user attrs) for an ONNX node this module writes.

    attrs: the node's attributes as Python values; const_inputs: the values
    of its inputs past the data inputs (must be initializers); fail(msg)
    returns the exception to raise."""
    extra = set(attrs) - _ATTRS_BACK.get(onnx_op, set())
    if extra:
        raise fail(f"attribute(s) {sorted(extra)} of {onnx_op} are not read by opforge")
    if onnx_op in _SIMPLE_BACK:
        return _SIMPLE_BACK[onnx_op], {}
    if onnx_op in ("Div", "MatMul"):
        return onnx_op, {}
    if onnx_op in ("Softmax", "LogSoftmax"):
        return onnx_op, {"axis": attrs.get("axis", -1)}
    if onnx_op == "Transpose":
        if "perm" not in attrs:
            raise fail("Transpose without perm is not written by opforge")
        return "Transpose", {"perm": list(attrs["perm"])}
    if onnx_op == "Reshape":
        shape = _const(const_inputs, 0, "shape", fail)
        if attrs.get("allowzero", 0) != 1 and 0 in shape:
            raise fail("Reshape with a 0 in shape and allowzero=0 (copy a dim) is not supported")
        return "Reshape", {"shape": [int(d) for d in shape]}
    if onnx_op == "Cast":
        return "Cast", {"dtype": attrs["to"]}
    if onnx_op == "Concat":
        return "Concat", {"axis": attrs["axis"]}
    if onnx_op in _REDUCE_BACK:
        op = _REDUCE_BACK[onnx_op]
        axes = attrs.get("axes")
        if onnx_op == "ReduceSum" and len(const_inputs):
            axes = _const(const_inputs, 0, "axes", fail)
        return op, {"axis": None if axes is None else [int(a) for a in axes],
                    "keepdims": bool(attrs.get("keepdims", 1))}
    raise fail(f"operator {onnx_op} is not one opforge.saved_graph reads")


def _const(values, i, what, fail):
    if i >= len(values) or values[i] is None:
        raise fail(f"input '{what}' must be an initializer (a constant)")
    return np.asarray(values[i]).reshape(-1)
