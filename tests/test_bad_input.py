"""Every registered op, driven with bad and awkward input by hypothesis.

Two properties per op, both enumerated from the registry so new ops are
covered (a new op without an oracle in robustness_oracles.py fails loudly):

* test_matches_numpy_or_raises: valid and invalid shapes, axes and attr
  values, empty / 0-d / NaN / inf data, and inputs in every numpy layout
  (strided, Fortran, read-only, misaligned, byte-swapped, subclass, zero
  stride, Tensor, Python list, numpy scalar). The op returns what numpy
  returns, or raises the opforge.errors class matching numpy's exception,
  with the op's name in the message. Inputs are never modified, except
  those an optimizer op updates in place (MUTATES), which must be writable.
* test_bad_input_raises_named_error: generic bad input built from the op's
  declaration alone: unsupported, disallowed and mismatched dtypes, object
  arrays, non-array objects, wrongly typed and out-of-range attrs, wrong
  argument counts and unknown keywords, impossible copies.

Profiles: OPFORGE_FUZZ_PROFILE=ci (the default: quick, the same examples every run)
or =local (thorough, new examples every run: how new bugs are found; the
default under OPFORGE_TEST_PROFILE=long, see tests/suite_profile.py).
OPFORGE_FUZZ_REPORT=path writes the per-op case counts and classes as JSON.
"""

import collections
import inspect
import json
import os
import pathlib
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis import given

import opforge as of
from opforge import _opinfo  # the registry, through its one reader
from opforge import errors

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from codegen import naming  # noqa: E402
from robustness_oracles import (MUTATES, NP, NP_NAMES, ORACLES, PRODUCTS, SUMS, TOLERANCES,  # noqa: E402
                                DropoutValues, EmptyOf)
import suite_profile  # noqa: E402

# CI's profile draws the same examples every run (a red CI must be the change's,
# and reproducible): 40 per op in the sanitizer pass, which is the memory-safety
# fuzzer's real run, and 20 in the README pass. The local profile (the default
# of the long test profile) explores new ones each run.
settings.register_profile("opforge-ci", max_examples=40 if suite_profile.SANITIZED else 20, deadline=None,
                          print_blob=True, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
settings.register_profile("opforge-local", max_examples=1000, deadline=None, print_blob=True,
                          suppress_health_check=list(HealthCheck))
PROFILE_NAME = os.environ.get("OPFORGE_FUZZ_PROFILE", "local" if suite_profile.LONG else "ci")
PROFILE = settings.get_profile("opforge-" + PROFILE_NAME)

REGISTRY = {op["name"]: op for op in _opinfo.registry_dict()["ops"]}


snake_case = naming.op_python_name  # codegen's rule, not a copy of it


# Ops of the built-in groups; ops from loaded libraries have no of.<name>.
# The state group's ops need a variable to exist first: their bad input
# (uninitialized, wrong dtype or shape, bad step) is tested in
# tests/test_state_resources.py and tests/test_variables.py.
PUBLIC = sorted(n for n, op in REGISTRY.items()
                if hasattr(of.ops, f"gen_{op['group']}_ops") and op["group"] != "state")
ALL_DTYPES = list(NP)

CASES = collections.Counter()    # op -> examples run
CLASSES = collections.defaultdict(collections.Counter)  # class -> op -> examples


def count(op, *classes):
    for c in classes:
        CLASSES[c][op] += 1


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    path = os.environ.get("OPFORGE_FUZZ_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump({"profile": PROFILE_NAME, "cases_per_op": dict(CASES),
                       "classes": {c: dict(v) for c, v in sorted(CLASSES.items())}}, f, indent=1, sort_keys=True)


def function(op):
    return getattr(of.ops, snake_case(op))  # of.ops: user ops and raw ops alike


def attr_def(op, name):
    return next(a for a in REGISTRY[op]["attrs"] if a["name"] == name)


def arg_dtypes(op, arg):
    """The dtypes an input arg accepts and has kernels for."""
    if arg["fixed_type"]:
        return [arg["fixed_type"]]
    allowed = attr_def(op, arg["type_attr"])["allowed"] or ALL_DTYPES
    kernels = REGISTRY[op]["kernels"]["cpu"]
    # A kernel keyed on another attr (Cast: SrcT vs dtype) does not restrict this one.
    return [d for d in allowed if d in kernels] or allowed


def check_error(exc, cls, op, names=()):
    assert isinstance(exc, cls), f"{op}: expected {cls.__name__}, got {type(exc).__name__}: {exc}"
    msg = str(exc)
    assert msg.startswith(op + ":"), f"message does not name the op {op}: {msg}"
    for n in names:
        assert f"'{n}" in msg, f"message does not name {n!r}: {msg}"


# --------------------------------------------------------------- layouts


class Sub(np.ndarray):
    """A plain ndarray subclass."""


def noncontiguous(a):
    if a.ndim == 0:
        return a
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    big[..., ::2] = a
    return big[..., ::2]


def misaligned(a):
    raw = np.zeros(a.nbytes + 1, np.uint8)
    view = raw[1:].view(a.dtype).reshape(a.shape)
    view[...] = a
    return view


def readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


# name -> (applies(a), make(a) -> (what the op gets, what the oracle gets))
LAYOUTS = {
    "contiguous": (lambda a: True, lambda a: (a, a)),
    "non_contiguous": (lambda a: a.ndim >= 1, lambda a: (noncontiguous(a), a)),
    "fortran_order": (lambda a: a.ndim >= 2, lambda a: (np.asfortranarray(a), a)),
    "read_only": (lambda a: True, lambda a: (readonly(a), a)),
    "misaligned": (lambda a: a.itemsize > 1, lambda a: (misaligned(a), a)),
    "byte_swapped": (lambda a: a.itemsize > 1, lambda a: (a.astype(a.dtype.newbyteorder()), a)),
    "subclass": (lambda a: True, lambda a: (a.view(Sub), a)),
    "zero_stride": (lambda a: a.ndim >= 1 and a.shape[0] > 1,
                    lambda a: (np.broadcast_to(a[:1], a.shape), np.broadcast_to(a[:1], a.shape).copy())),
    "opforge_tensor": (lambda a: True, lambda a: (of.tensor(a), a)),
    "python_list": (lambda a: a.dtype in (np.float64, np.int64, np.bool_) and a.size > 0,
                    lambda a: (a.tolist(), a)),
    "numpy_scalar": (lambda a: a.ndim == 0, lambda a: (a[()], a)),
}


def apply_layouts(draw, value, used):
    """(op value, oracle value) with a random layout per array."""
    if isinstance(value, list):
        pairs = [apply_layouts(draw, v, used) for v in value]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if not isinstance(value, np.ndarray):
        return value, value
    name = draw(st.sampled_from([n for n, (ok, _) in LAYOUTS.items() if ok(value)]))
    used.add(name)
    return LAYOUTS[name][1](value)


def data_classes(value, out):
    if isinstance(value, list):
        for v in value:
            data_classes(v, out)
    elif isinstance(value, np.ndarray):
        if value.size == 0:
            out.add("empty_tensor")
        if value.ndim == 0:
            out.add("0d_tensor")
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            out.add("nan_or_inf")


def shape_classes(shape, out):
    """Classes of a drawn shape attr (Fill, Reshape): negative, huge, overflowing."""
    if not isinstance(shape, list):
        return
    if any(d < -1 for d in shape) or (-1 in shape and shape.count(-1) > 1):
        out.add("negative_shape")
    if any(d >= 2**40 for d in shape):
        out.add("huge_shape")
        if np.prod([float(d) for d in shape if d > 0]) >= 2.0**63:
            out.add("shape_product_overflows_int64")


# ----------------------------------------------------------- comparisons


def magnitude(values):
    total = 0.0
    for v in values:
        if isinstance(v, list):
            total += magnitude(v)
        elif isinstance(v, np.ndarray) and v.dtype.kind in "fi":
            f = np.abs(v.astype(np.float64))
            total += float(f[np.isfinite(f)].sum())
    return total


def assert_same(op, got, want, inputs):
    if isinstance(want, tuple):  # several outputs
        assert isinstance(got, tuple) and len(got) == len(want), f"{op}: {len(want)} outputs expected"
        for g, w in zip(got, want):
            assert_same(op, g, w, inputs)
        return
    if isinstance(want, DropoutValues):  # random: only the shape, dtype and the two allowed values
        got = got.numpy()
        assert got.shape == want.shape and got.dtype == want.dtype
        keep = np.asarray(1 / (1 - want.rate), want.dtype)
        assert np.isin(got, [0, keep]).all(), f"{op}: values other than 0 and {keep}"
        return
    if isinstance(want, EmptyOf):
        assert got.shape == want.shape and got.dtype == want.dtype and got.size == 0
        return
    want = np.asarray(want)
    if want.size == 0:  # numpy may refuse to view e.g. (0, 2**62) float32 memory
        assert got.shape == want.shape and got.dtype == want.dtype, f"{op}: {got} != {want!r}"
        return
    got = got.numpy()
    assert got.shape == want.shape, f"{op}: shape {got.shape} != numpy's {want.shape}"
    assert got.dtype == want.dtype, f"{op}: dtype {got.dtype} != numpy's {want.dtype}"
    if want.dtype.name in TOLERANCES.get(op, {}):  # an op's own measured bound
        rtol, atol = TOLERANCES[op][want.dtype.name]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True, err_msg=op)
        return
    if want.dtype.itemsize == 2 and want.dtype.kind in "fV":  # float16, bfloat16: one rounding of float32 math
        rtol = 1e-3 if want.dtype.kind == "f" else 8e-3  # one unit in the last place, either way
        atol = 0.0
        if op in SUMS:  # float32 sums in another order: their rounding may differ near zero
            atol = 1e-5 * (1.0 + magnitude([np.asarray(v).astype(np.float32) if isinstance(v, np.ndarray)
                                             and v.dtype.itemsize == 2 and v.dtype.kind in "fV" else v
                                             for v in inputs]))
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=rtol, atol=atol,
                                   equal_nan=True, err_msg=op)
        return
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=op)
        return
    f32 = want.dtype == np.float32
    rtol = (1e-5 if f32 else 1e-12) * (10 if op in SUMS else 1)
    atol = 1e-37 if f32 else 1e-300
    if op in SUMS:
        scale = 1.0 + magnitude(inputs)
        atol = rtol * scale * (scale if op in PRODUCTS else 1.0)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=op)


def snapshot(values):
    return [np.array(v, copy=True) if isinstance(v, np.ndarray) else
            (snapshot(v) if isinstance(v, list) else None) for v in values]


def assert_unchanged(before, after):
    for b, a in zip(before, after):
        if isinstance(b, list):
            assert_unchanged(b, a)
        elif b is not None:
            a = np.asarray(a)
            if b.dtype.kind == "V":  # bfloat16: numpy's testing sees NaN != NaN; its bits must not change
                a, b = a.view(np.uint16), b.view(np.uint16)
            np.testing.assert_array_equal(a, b, err_msg="an op modified its input")


# ------------------------------------------------------ property 1: numpy


def borrowed_read_only(a):
    """A read-only array opforge borrows (others are copied, and the copy is updated)."""
    return (isinstance(a, np.ndarray) and not a.flags.writeable and a.flags.c_contiguous and a.flags.aligned
            and a.dtype.isnative)


HALF = ("float16", "bfloat16")
# Ops taking every dtype (Cast, the data moves, comparisons, Select).
EVERY_DTYPE = {n for n, op in REGISTRY.items()
               if any(a["allowed"] and set(a["allowed"]) >= set(NP_NAMES) for a in op["attrs"])}


def _widen(v, half):
    if isinstance(v, list):
        return [_widen(x, half) for x in v]
    if isinstance(v, np.ndarray) and v.dtype == half:
        return v.astype(np.float32)
    return v


def _narrow(v, half):
    if isinstance(v, tuple):
        return tuple(_narrow(x, half) for x in v)
    if isinstance(v, (np.ndarray, np.generic)) and v.dtype == np.float32:
        return np.asarray(v).astype(half)
    return v


def in_float32(oracle, half, *args, **kwargs):
    """The numpy reference of a float16/bfloat16 call: computed in float32 and rounded once."""
    return _narrow(oracle(*_widen(list(args), half), **kwargs), half)


def first_typed_input(op):
    inputs = REGISTRY[op]["inputs"]
    return next((a for a in inputs if a["type_attr"]), inputs[0])


@pytest.mark.parametrize("op", PUBLIC)
def test_matches_numpy_or_raises(op):
    if op not in ORACLES:
        pytest.fail(f"{op} has no numpy oracle: add one to tests/robustness_oracles.py")
    draw_call, oracle = ORACLES[op]
    fn = function(op)
    signature = inspect.signature(fn)
    # Ops without inputs (the random ops) take their dtype from the dtype attr.
    dtypes = arg_dtypes(op, first_typed_input(op)) if REGISTRY[op]["inputs"] else \
        attr_def(op, "dtype")["allowed"] if any(a["name"] == "dtype" for a in REGISTRY[op]["attrs"]) else ["int64"]

    @PROFILE
    @given(st.data())
    def run(data):
        dtype = data.draw(st.sampled_from(dtypes), label="dtype")
        args, kwargs = draw_call(data.draw, dtype)
        used = set()
        pairs = [apply_layouts(data.draw, a, used) for a in args]
        op_args, np_args = [p[0] for p in pairs], [p[1] for p in pairs]
        classes = set(used) - {"contiguous"}
        data_classes(np_args, classes)
        shape_classes(signature.bind(*args, **kwargs).arguments.get("shape"), classes)
        before = snapshot(op_args)
        try:
            if dtype in HALF and op not in EVERY_DTYPE:  # moves and compares are exact: numpy's own answer
                want = in_float32(oracle, np.dtype(NP[dtype]), *np_args, **kwargs)
            else:
                want = oracle(*np_args, **kwargs)
        except MemoryError as e:
            want = e
        except (ValueError, IndexError, TypeError) as e:
            want = e
        mutated = MUTATES.get(op, 0)
        if any(borrowed_read_only(a) for a in op_args[:mutated]):
            want = ValueError("an op that updates an input in place was given a read-only array")
        try:
            got = fn(*op_args, **kwargs)
        except errors.OpError as e:
            got = e
        CASES[op] += 1
        if isinstance(want, Exception):
            if isinstance(want, MemoryError):
                cls, label = errors.ResourceExhaustedError, "impossible_allocation"
            elif "too big" in str(want):
                cls, label = (errors.ResourceExhaustedError, errors.InvalidArgumentError), "impossible_allocation"
            else:
                cls, label = errors.InvalidArgumentError, "invalid_shape_axis_or_attr_value"
            count(op, label, *classes)
            assert isinstance(got, Exception), f"{op}: numpy raised {want!r} but opforge returned a tensor of shape {got.shape}"
            check_error(got, cls, op)
        else:
            count(op, "valid_numpy_answer", *classes)
            assert not isinstance(got, Exception), f"{op}: numpy returned but opforge raised {got!r}"
            assert_same(op, got, want, np_args)
        assert_unchanged(before[mutated:], op_args[mutated:])

    run()


# --------------------------------------------- property 2: generic bad input

UNSUPPORTED = ["longdouble", "clongdouble", "complex64", "complex128",
               "U3", "S3", "datetime64[s]", "timedelta64[s]", [("a", "i4"), ("b", "f8")]]
NON_ARRAYS = [None, "text", b"bytes", {}, {1, 2}, object(), 1j, len, iter([1.0]), range(3), [1, "a"],
              [[1, 2], [3]], [[1], [[2]]], of.float32, np.longdouble(1),
              np.complex64(1), [None], [1.0, 2**70]]
OBJECT_ARRAYS = [lambda: np.array([1, None], dtype=object), lambda: np.array([1.0, 2.0], dtype=object),
                 lambda: np.empty((0,), dtype=object)]
WRONG_ATTR = {
    "int": ["1", 1.5, [1.5], {}, True, object(), 1j, np.float64(1.0), np.bool_(True)],
    "float": ["1.0", [[1.0]], {}, True, object(), 1j, np.bool_(False)],
    "bool": [1, 0, "true", 1.0, [], np.int64(1)],
    "string": [1, b"x", 1.5, ["a"]],
    "type": ["complex64", "longdouble", "no_such_type", 5, object(), np.complex128, [np.float32]],
    "shape": ["ab", [1.5], [None], [[1]], {}, [1, "a"], object()],
    "list(int)": ["ab", [1.5], [None], [[1]], {}, [1, "a"], object(), [True]],
    "list(float)": ["ab", [None], ["a"], {}, object(), [[1.0]]],
    "list(type)": ["float32", [5], [object()], {}, object()],
}
OUT_OF_RANGE = {"int": [2**63, -2**63 - 1, 10**30], "float": [10**400, -(10**400)],
                "shape": [[2**64], [1, -2**63 - 1]], "list(int)": [[2**64], [1, -2**63 - 1], 2**63]}
PLACEHOLDER = {"int": 0, "float": 0.0, "bool": False, "string": "", "type": "float32", "shape": [2, 2],
               "list(int)": [0, 0], "list(float)": [0.0], "list(type)": ["float32"]}


class Call:
    """A base call built from the declaration: (2, 2) arrays, placeholder attrs."""

    def __init__(self, op):
        self.op, self.fn = op, function(op)
        self.params = list(inspect.signature(self.fn).parameters.values())
        self.inputs = {a["name"]: a for a in REGISTRY[op]["inputs"]}
        self.attrs = {a["name"]: a for a in REGISTRY[op]["attrs"] if not a["inferred"]}
        self.values = {}
        for p in self.params:
            name = p.name.rstrip("_")
            if name in self.inputs:
                arg = self.inputs[name]
                x = np.ones((2, 2), NP[arg_dtypes(op, arg)[0]])
                self.values[p.name] = [x, x.copy()] if arg["number_attr"] else x
            elif p.default is inspect.Parameter.empty:
                self.values[p.name] = PLACEHOLDER[self.attrs[name]["type"]]

    def param(self, name):
        return next(p.name for p in self.params if p.name.rstrip("_") == name)

    def set_input(self, name, value, k=0):
        """Puts value in input `name` (element k of a list input); returns its label."""
        p = self.param(name)
        if self.inputs[name]["number_attr"] and not isinstance(value, _WholeList):
            self.values[p] = list(self.values[p])
            self.values[p][k] = value
        else:
            self.values[p] = value.value if isinstance(value, _WholeList) else value
        return name

    def __call__(self, *extra, **kwargs):
        return self.fn(**self.values, **kwargs) if not extra else self.fn(*extra)


class _WholeList:
    def __init__(self, value):
        self.value = value


def input_slots(call):
    """(arg name, element index) for every input slot of the base call."""
    return [(n, k) for n, a in call.inputs.items() for k in range(2 if a["number_attr"] else 1)]


def type_groups(call):
    groups = collections.defaultdict(list)
    for n, k in input_slots(call):
        arg = call.inputs[n]
        if arg["type_attr"]:
            groups[arg["type_attr"]].append((n, k))
    return groups


def bad_unsupported_dtype(draw, call):
    name, k = draw(st.sampled_from(input_slots(call)))
    dt = np.dtype(draw(st.sampled_from(UNSUPPORTED)))
    return call.set_input(name, np.zeros(draw(st.sampled_from([(), (2, 2), (0,)])), dt), k), \
        errors.InvalidArgumentError


def bad_object_dtype(draw, call):
    name, k = draw(st.sampled_from(input_slots(call)))
    return call.set_input(name, draw(st.sampled_from(OBJECT_ARRAYS))(), k), errors.InvalidArgumentError


def bad_non_array(draw, call):
    name, k = draw(st.sampled_from(input_slots(call)))
    value = draw(st.sampled_from(NON_ARRAYS))
    if call.inputs[name]["number_attr"] and draw(st.booleans()) and not isinstance(value, (list, tuple)):
        value = _WholeList(value)  # the list argument itself is not a list
    return call.set_input(name, value, k), errors.InvalidArgumentError


def bad_disallowed_dtype(draw, call):
    options = []
    for name, k in input_slots(call):
        arg = call.inputs[name]
        allowed = [arg["fixed_type"]] if arg["fixed_type"] else (attr_def(call.op, arg["type_attr"])["allowed"]
                                                                   or ALL_DTYPES)
        options += [(name, d) for d in ALL_DTYPES if d not in allowed]
    name, dtype = draw(st.sampled_from(options))
    arg = call.inputs[name]
    group = type_groups(call).get(arg["type_attr"], [(name, 0)]) if arg["type_attr"] else [(name, 0)]
    for n, k in group:  # the whole group, so this is the only defect
        call.set_input(n, np.zeros((2, 2), NP[dtype]), k)
    return [n for n, _ in group], errors.InvalidArgumentError


def promotes(op):
    """Elementwise ops and contractions promote mixed dtypes by the table (binder)."""
    r = REGISTRY[op]
    return r["category"] in ("elementwise", "contraction") and not any(a["number_attr"] for a in r["inputs"])


def mismatched(call, name, first):
    """The dtypes of input `name` that are a defect beside `first` (an array): any
    other dtype, or for an op that promotes, one with no common dtype in the table
    or a common dtype the op does not take."""
    dtypes = arg_dtypes(call.op, call.inputs[name])
    out = [d for d in dtypes if np.dtype(NP[d]) != first.dtype]
    if not promotes(call.op):
        return out
    bad = []
    for d in out:
        try:
            common = of.promote_types(of.as_dtype(first.dtype), d).name
        except TypeError:
            bad.append(d)
            continue
        if common not in dtypes:
            bad.append(d)
    return bad


def _mismatch_groups(call):
    def first(g):
        v = call.values[call.param(g[0][0])]
        return v[0] if isinstance(v, list) else v
    return [g for g in type_groups(call).values()
            if len(g) >= 2 and any(mismatched(call, n, first(g)) for n, _ in g[1:])], first


def bad_dtype_mismatch(draw, call):
    groups, first = _mismatch_groups(call)
    group = draw(st.sampled_from(groups))
    name, k = draw(st.sampled_from([(n, k) for n, k in group[1:] if mismatched(call, n, first(group))]))
    other = draw(st.sampled_from(mismatched(call, name, first(group))))
    return call.set_input(name, np.zeros((2, 2), NP[other]), k), errors.InvalidArgumentError


def bad_python_scalar(draw, call):
    groups = [g for g in type_groups(call).values() if len(g) >= 2]
    group = draw(st.sampled_from(groups))
    dtypes = [d for d in arg_dtypes(call.op, call.inputs[group[0][0]]) if d in ("int32", "bool")]
    dtype = draw(st.sampled_from(dtypes))
    for n, k in group:
        call.set_input(n, np.zeros((2, 2), NP[dtype]), k)
    name, k = draw(st.sampled_from(group))
    value = draw(st.sampled_from([1.5, [1.5, 2.0], float("nan")] + ([2**40, -2**31 - 1, [2**40]]
                                                                    if dtype == "int32" else [2, [0, 1]])))
    return call.set_input(name, value, k), errors.InvalidArgumentError


def bad_attr_type(draw, call):
    name = draw(st.sampled_from(sorted(call.attrs)))
    call.values[call.param(name)] = draw(st.sampled_from(WRONG_ATTR[call.attrs[name]["type"]]))
    return "attr '" + name, errors.InvalidArgumentError


def bad_attr_range(draw, call):
    name = draw(st.sampled_from(sorted(a for a in call.attrs if call.attrs[a]["type"] in OUT_OF_RANGE)))
    call.values[call.param(name)] = draw(st.sampled_from(OUT_OF_RANGE[call.attrs[name]["type"]]))
    return "attr '" + name, errors.InvalidArgumentError


def bad_required_attr_none(draw, call):
    name = draw(st.sampled_from(sorted(a for a, d in call.attrs.items() if not d["has_default"])))
    call.values[call.param(name)] = None
    return "attr '" + name, errors.InvalidArgumentError


def bad_impossible_copy(draw, call):
    name, k = draw(st.sampled_from(input_slots(call)))
    dtype = NP[arg_dtypes(call.op, call.inputs[name])[0]]
    # A 16 TiB+ zero-stride view: borrowing needs a contiguous copy.
    return call.set_input(name, np.broadcast_to(np.zeros((), dtype), (2**44,)), k), \
        errors.ResourceExhaustedError


ARITY = object()


def bad_too_many_args(draw, call):
    return ARITY, lambda: call(*([np.ones(2)] * (len(call.params) + 1)))


def bad_missing_args(draw, call):
    return ARITY, lambda: call.fn()


def bad_unknown_keyword(draw, call):
    return ARITY, lambda: call(no_such_argument=1)


BAD = {
    "unsupported_numpy_dtype": (lambda c: bool(c.inputs), bad_unsupported_dtype),
    "object_dtype_array": (lambda c: bool(c.inputs), bad_object_dtype),
    "non_array_object": (lambda c: bool(c.inputs), bad_non_array),
    "dtype_not_allowed": (lambda c: any(
        a["fixed_type"] or len(attr_def(c.op, a["type_attr"])["allowed"] or ALL_DTYPES) < 5
        for a in c.inputs.values()), bad_disallowed_dtype),
    "mismatched_dtypes": (lambda c: bool(_mismatch_groups(c)[0]), bad_dtype_mismatch),
    "python_scalar_kind_or_range": (lambda c: any(
        len(g) >= 2 and {"int32", "bool"} & set(arg_dtypes(c.op, c.inputs[g[0][0]]))
        for g in type_groups(c).values()), bad_python_scalar),
    "attr_wrong_type": (lambda c: bool(c.attrs), bad_attr_type),
    "attr_out_of_int64_or_float_range": (lambda c: any(a["type"] in OUT_OF_RANGE for a in c.attrs.values()),
                                         bad_attr_range),
    "required_attr_none": (lambda c: any(not a["has_default"] for a in c.attrs.values()), bad_required_attr_none),
    "impossible_copy_allocation": (lambda c: bool(c.inputs), bad_impossible_copy),
    "too_many_arguments": (lambda c: True, bad_too_many_args),
    "missing_arguments": (lambda c: any(p.default is inspect.Parameter.empty for p in c.params), bad_missing_args),
    "unknown_keyword": (lambda c: True, bad_unknown_keyword),
}


@pytest.mark.parametrize("op", PUBLIC)
def test_bad_input_raises_named_error(op):
    classes = [name for name, (applies, _) in BAD.items() if applies(Call(op))]

    @PROFILE
    @given(st.data())
    def run(data):
        cls = data.draw(st.sampled_from(classes), label="class")
        call = Call(op)
        names, expected = BAD[cls][1](data.draw, call)
        CASES[op] += 1
        count(op, cls)
        if names is ARITY:
            # Arity is checked by the generated Python def, before opforge runs:
            # a TypeError naming the Python function, like any Python callable.
            with pytest.raises(TypeError, match=snake_case(op)):
                expected()
            return
        with pytest.raises(errors.OpError) as info:
            call()
        names = [names] if isinstance(names, str) else names
        check_error(info.value, expected, op)
        msg = str(info.value)
        assert any(f"'{n}" in msg or n in msg for n in names), f"{op}: message names none of {names}: {msg}"

    run()
