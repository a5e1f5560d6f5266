"""The registry, its declaration DSL, fingerprints and generated modules."""

import inspect
import json
import pathlib
import sys

import numpy as np
import pytest

import opforge as of
from opforge import _pywrap_internal as pw

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from codegen import naming  # noqa: E402
EXPECTED_OPS = {
    "Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Pow", "Neg", "Abs", "Exp", "Log", "Sqrt",
    "Square", "Sin", "Cos", "Tanh", "Sigmoid", "Relu", "Equal", "NotEqual", "Less", "LessEqual",
    "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "Select", "Sum", "Mean",
    "Max", "Min", "Prod", "ArgMax", "ArgMin", "MatMul", "Reshape", "Transpose", "Cast", "Fill",
    "ZerosLike", "OnesLike", "Concat", "Slice", "Identity", "Softmax", "RmsNorm",
    "LogSoftmax",
    "SoftmaxGrad", "RmsNormGrad", "MatMulGrad", "ReduceGrad", "ReduceGradGrad", "SliceGrad", "ConcatGrad",
}


def registry():
    return json.loads(pw.registry_json())


def test_every_required_op_is_registered_documented_and_has_kernels():
    ops = {op["name"]: op for op in registry()["ops"]}
    assert EXPECTED_OPS <= set(ops)
    for name, op in ops.items():
        assert op["summary"], name
        assert op["kernels"].get("cpu"), name
        for arg in op["inputs"] + op["outputs"]:
            assert arg["doc"], f"{name}.{arg['name']} is undocumented"
        for attr in op["attrs"]:
            assert attr["inferred"] or attr["doc"], f"{name} attr {attr['name']} is undocumented"
        assert op["source"]["file"].startswith("cpp/ops/"), op["source"]


def test_public_names_and_docstrings_come_from_the_declarations():
    for op in registry()["ops"]:
        fn = getattr(of.ops, _snake(op["name"]))
        assert getattr(of.ops, f"gen_{op['group']}_ops").__dict__[fn.__name__] is fn
        raw = op["group"] in ("grad", "optim", "state") or op["name"].endswith("Grad") or "Backprop" in op["name"]
        # User ops in of.*; backward ops and optimizer kernels in of.raw_ops only.
        assert getattr(of if not raw else of.raw_ops, fn.__name__) is fn, op["name"]
        # (of.group is the Python tf.group, not the raw Group op's wrapper.)
        assert (getattr(of, fn.__name__, None) is fn) is not raw and (fn.__name__ in of.raw_ops.__all__) is raw, \
            op["name"]
        assert fn.__doc__.startswith(op["summary"][:40])
        assert f"{op['source']['file']}:{op['source']['line']}" in fn.__doc__
    assert of.matmul is of.mat_mul and of.where is of.select and of.argmax is of.arg_max


def _snake(name):
    return naming.op_python_name(name)  # codegen's rule, not a copy of it


def test_committed_registry_json_matches_the_compiled_registry():
    committed = json.loads((ROOT / "generated" / "registry.json").read_text())
    assert committed == registry()


def test_fingerprint_mismatch_names_the_regenerate_command():
    with pytest.raises(ImportError, match=r"python -m codegen"):
        pw.check_fingerprint("math", "0000000000000000")


def test_stale_generated_module_refuses_to_import(tmp_path):
    source = (pathlib.Path(of.ops.gen_math_ops.__file__)).read_text()
    fingerprint = next(g["fingerprint"] for g in registry()["groups"] if g["name"] == "math")
    stale = source.replace(fingerprint, "deadbeefdeadbeef")
    assert stale != source
    with pytest.raises(ImportError, match="python -m codegen"):
        exec(compile(stale, "gen_math_ops_stale.py", "exec"), {"__name__": "stale"})


@pytest.mark.parametrize("specs,needle", [
    ([("input", "x: T"), ("output", "y: T")], "'T' is neither a dtype nor a type attr"),
    ([("input", "x: complex64"), ("output", "y: float32")], "'complex64'"),
    ([("attr", "a: int >= 2 = 1"), ("output", "y: float32")], "below the minimum"),
    ([("attr", "a: int = 1"), ("attr", "b: int"), ("output", "y: float32")], "follows a parameter"),
    ([("attr", "T: {float32, float17}"), ("output", "y: T")], "unknown dtype 'float17'"),
    ([("attr", "a: tensor"), ("output", "y: float32")], "unknown attr type"),
    ([("attr", "a: bool = maybe"), ("output", "y: float32")], "bad default"),
    ([("input", "x: float32"), ("input", "x: float32"), ("output", "y: float32")], "declared twice"),
    ([("input", "x: float32")], "at least one output"),
    ([("input", "xs: N * float32"), ("output", "y: float32")], "'N' must be a declared int attr"),
    ([("attr", "T: {int32} = float32"), ("output", "y: T")], "not an allowed dtype"),
])
def test_invalid_declarations_name_the_op_and_location(specs, needle):
    with pytest.raises(of.errors.InvalidArgumentError) as info:
        pw._validate_declaration("Broken", specs)
    assert "op 'Broken' at <validate>:0" in str(info.value)
    assert needle in str(info.value)


def test_valid_declaration_with_every_attr_type():
    pw._validate_declaration("Everything", [
        ("input", "xs: N * T"), ("input", "flag: bool"), ("output", "y: T"),
        ("attr", "N: int >= 1"), ("attr", "T: {float32, float64}"), ("attr", "i: int = -1"),
        ("attr", "f: float >= 0 = 1e-6"), ("attr", "b: bool = false"), ("attr", "s: string = 'x'"),
        ("attr", "t: type = int32"), ("attr", "sh: shape = [2, 3]"), ("attr", "li: list(int) = None"),
        ("attr", "lf: list(float) = [0.5]"), ("attr", "lt: list(type) = [bool]"),
    ])


def test_no_kernel_error_lists_registered_kernels():
    # Every T of Add has a kernel, so check the message shape through the
    # executor's dtype check instead: bool is outside Add's T.
    with pytest.raises(of.errors.InvalidArgumentError, match=r"Add: .*bool.*one of \{float32"):
        of.add(np.ones(2, bool), np.ones(2, bool))


def test_errors_hierarchy():
    e = of.errors
    assert issubclass(e.InvalidArgumentError, (e.OpError, ValueError))
    assert issubclass(e.NotFoundError, (e.OpError, LookupError))
    assert issubclass(e.UnimplementedError, (e.OpError, NotImplementedError))
    assert issubclass(e.ResourceExhaustedError, (e.OpError, MemoryError))
    assert issubclass(e.InternalError, e.OpError)


def test_impossible_allocation_raises_resource_exhausted():
    with pytest.raises(of.errors.ResourceExhaustedError, match="Fill"):
        of.fill([2**31, 2**31], 1.0)
    with pytest.raises(of.errors.InvalidArgumentError, match="overflows"):
        of.fill([2**40, 2**40], 1.0)


@pytest.mark.parametrize("call,needle", [
    (lambda: of.sum(np.ones(3), axis="0"), "attr 'axis'"),
    (lambda: of.sum(np.ones(3), keepdims=1), "attr 'keepdims' must be a bool"),
    (lambda: of.cast(np.ones(3), "complex64"), "attr 'dtype'"),
    (lambda: of.rms_norm(np.ones((2, 3)), np.ones(3), epsilon=-1.0), "attr 'epsilon'"),
    (lambda: of.concat([], axis=0), "Concat"),
    (lambda: of.concat(np.ones(3)), "argument 'values' must be a list"),
    (lambda: of.softmax(np.ones(3), axis=1.5), "attr 'axis' must be an int"),
    (lambda: of.reshape(np.ones(3), None), "attr 'shape'"),
])
def test_bad_attrs_raise_invalid_argument_naming_op_and_attr(call, needle):
    with pytest.raises(of.errors.InvalidArgumentError) as info:
        call()
    assert needle in str(info.value)


def test_hooks_see_every_call_and_can_replace_the_result():
    from opforge import _hooks
    seen = []

    def hook(call):
        seen.append(call.op_type)
        return call.run()

    with _hooks.installed(hook):
        got = of.add(np.ones(2), 1.0)
        of.sum(got)
    assert seen == ["Add", "Sum"]
    np.testing.assert_array_equal(got.numpy(), [2.0, 2.0])
    with _hooks.installed(lambda call: "replaced"):
        assert of.add(1.0, 2.0) == "replaced"
    assert all(h is _hooks._recorder for h in _hooks.hooks)


@pytest.mark.parametrize("doc,needle", [
    ("Sums.\n\nx: In.\nxs: Typo.\ny: Out.", "Doc line 'xs: Typo.' documents 'xs', which is no input, output or attr"),
    ("Sums.\n\nNote: prose.\n", "documents 'Note'"),
])
def test_doc_line_naming_no_argument_is_an_error(doc, needle):
    with pytest.raises(of.errors.InvalidArgumentError) as info:
        pw._validate_declaration("Broken", [("input", "x: float32"), ("output", "y: float32"), ("doc", doc)])
    assert "op 'Broken' at <validate>:0" in str(info.value) and needle in str(info.value)


def test_doc_prose_that_is_no_label_is_fine():
    pw._validate_declaration("Fine", [("input", "x: float32"), ("output", "y: float32"), ("doc", (
        "Sums.\n\nSee https://numpy.org: it is prose.\n  Note: indented, prose.\nx: In.\ny: Out."))])


@pytest.mark.parametrize("spec,allowed", [
    ("T: numbertype", ["float32", "float64", "int32", "int64"]),
    ("T: floattype", ["float32", "float64"]),
    ("T: inttype", ["int32", "int64"]),
    ("T: alltypes", ["float32", "float64", "int32", "int64", "bool", "float16", "bfloat16", "int8", "uint8", "int16",
                     "uint16", "uint32", "uint64"]),
    ("T: halftype", ["float16", "bfloat16"]),
    ("T: {floattype, halftype}", ["float32", "float64", "float16", "bfloat16"]),
    ("T: {numbertype, halftype}", ["float32", "float64", "int32", "int64", "float16", "bfloat16"]),
    ("T: {floattype, bool}", ["float32", "float64", "bool"]),
])
def test_dtype_set_shorthands(spec, allowed):
    pw._validate_declaration("Sets", [("input", "x: T"), ("output", "y: T"), ("attr", spec)])
    # The built-in ops use them; the JSON carries the expanded set.
    ops = {op["name"]: op for op in registry()["ops"]}
    shorthand = spec.split(": ")[1]
    users = {"alltypes": "Identity", "{numbertype, halftype}": "Add", "{floattype, halftype}": "Div"}
    if shorthand in users:
        assert next(a for a in ops[users[shorthand]]["attrs"] if a["name"] == "T")["allowed"] == allowed


def test_category_is_declared_and_checked():
    decl = [("input", "x: float32"), ("output", "y: float32")]
    pw._validate_declaration("Fine", decl + [("category", "elementwise")])
    with pytest.raises(of.errors.InvalidArgumentError) as info:
        pw._validate_declaration("Broken", decl + [("category", "pointwise")])
    assert "op 'Broken' at <validate>:0" in str(info.value)
    assert "Category('pointwise') is not one of elementwise, reduction" in str(info.value)
    # The JSON carries it; undeclared is "none" (opforge.dask refuses those ops).
    ops = {op["name"]: op["category"] for op in registry()["ops"]}
    assert (ops["Add"], ops["Sum"], ops["MatMul"], ops["Softmax"], ops["ApplyAdam"]) == \
        ("elementwise", "reduction", "contraction", "whole_axis", "none")


def test_unknown_dtype_set_is_an_error():
    with pytest.raises(of.errors.InvalidArgumentError, match="unknown attr type 'realnumbertype'"):
        pw._validate_declaration("Sets", [("input", "x: T"), ("output", "y: T"), ("attr", "T: realnumbertype")])


def test_registry_json_carries_the_dtype_table_and_params():
    reg = registry()
    names = ["float32", "float64", "int32", "int64", "bool", "float16", "bfloat16", "int8", "uint8", "int16",
             "uint16", "uint32", "uint64"]
    assert [d["name"] for d in reg["dtypes"]] == names
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for d in reg["dtypes"]:
        t = of.as_dtype(d["name"])
        np_dtype = np.dtype(getattr(ml_dtypes, d["numpy"])) if d["numpy"] == "bfloat16" else np.dtype(d["numpy"])
        assert t._enum == d["enum"] and t.itemsize == d["size"] == np_dtype.itemsize
        assert d["is_floating"] == (np.issubdtype(np_dtype, np.floating) or d["name"] == "bfloat16")
        assert d["is_integer"] == np.issubdtype(np_dtype, np.integer)
        assert t == np_dtype and of.as_dtype(np_dtype) is t
    assert [n for n in of.dtypes.__all__ if n not in ("DType", "as_dtype", "promote_types", "result_type")] == [
        "bool_" if n == "bool" else n for n in names]
    assert "list(type)" in reg["attr_types"] and len(reg["attr_types"]) == 9
    for op in reg["ops"]:
        assert "arg_order" not in op
        fn = getattr(of.ops, _snake(op["name"]))
        assert list(inspect.signature(fn).parameters) == [naming.python_ident(p) for p in op["params"]]
