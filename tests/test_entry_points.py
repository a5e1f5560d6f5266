"""The generated op functions are the C++ entry points themselves
(swig/py_entry_points.cc): Python's argument rules, the declared defaults,
and what inspect, help, pickle and copy see, checked against the real
extension and registry."""
import copy
import importlib
import inspect
import json
import pickle
import pkgutil
import pydoc

import numpy as np
import pytest

import opforge as of
import opforge.ops
from opforge import _pywrap_internal as _pw

X = np.arange(12, dtype=np.float32).reshape(3, 4)


def test_keywords_and_left_out_defaults_match_numpy():
    np.testing.assert_array_equal(of.sum(X, keepdims=True).numpy(), X.sum(keepdims=True))
    np.testing.assert_array_equal(of.sum(X, axis=1).numpy(), X.sum(axis=1))
    np.testing.assert_array_equal(of.sum(x=X, keepdims=True, axis=0).numpy(), X.sum(axis=0, keepdims=True))
    np.testing.assert_array_equal(of.sum(X, 1, True).numpy(), X.sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(of.add(y=X, x=1.0).numpy(), X + 1)
    np.testing.assert_array_equal(of.concat([X, X], axis=1).numpy(), np.concatenate([X, X], axis=1))


@pytest.mark.parametrize("call, message", [
    (lambda: of.add(X), r"^add\(\) missing required argument 'y' \(pos 2\)$"),
    (lambda: of.add(X, X, X), r"^add\(\) takes 2 positional arguments but 3 were given$"),
    (lambda: of.add(X, z=X), r"^add\(\) got an unexpected keyword argument 'z'$"),
    (lambda: of.add(X, x=X), r"^add\(\) got multiple values for argument 'x'$"),
    (lambda: of.sum(X, 1, False, 3), r"^sum\(\) takes 3 positional arguments but 4 were given$"),
    (lambda: of.sum(), r"^sum\(\) missing required argument 'x' \(pos 1\)$"),
])
def test_calls_that_do_not_fit_raise_pythons_type_errors(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_a_bad_value_still_gets_an_opforge_error_naming_the_op():
    with pytest.raises(of.errors.InvalidArgumentError, match="keepdims"):
        of.sum(X, keepdims="yes")


def test_every_signature_and_default_is_the_registrys():
    registry = json.loads(_pw.registry_json())
    ops = {op["name"]: op for op in registry["ops"]}
    modules = [importlib.import_module(f"opforge.ops.{m.name}") for m in pkgutil.iter_modules(opforge.ops.__path__)
               if m.name.startswith("gen_") and m.name.endswith("_ops")]
    assert len(modules) > 20
    for module in modules:
        for name in module.__all__:
            fn = getattr(module, name)
            assert inspect.isbuiltin(fn) and fn.__name__ == name and fn.__module__ == module.__name__
            op = ops[fn.__doc__.rsplit("(op ", 1)[1].split(")")[0]]
            sig = inspect.signature(fn)
            assert list(sig.parameters) == op["params"], name
            attrs = {a["name"]: a for a in op["attrs"]}
            for p in sig.parameters.values():
                a = attrs.get(p.name)
                if a is None or not a["has_default"]:
                    assert p.default is inspect.Parameter.empty, (name, p.name)
                else:
                    want = a["default"]
                    assert p.default == (tuple(want) if isinstance(want, list) else want), (name, p.name)


def test_help_pickle_and_copy_see_a_named_function():
    text = pydoc.render_doc(of.add, renderer=pydoc.plaintext)
    assert "add(x, y)" in text and "Returns x + y element-wise" in text
    assert of.add.__doc__.startswith("Returns x + y element-wise")
    assert pickle.loads(pickle.dumps(of.add)) is of.add
    assert copy.deepcopy(of.sum) is of.sum


def test_public_entry_takes_only_generated_entry_points():
    for not_an_entry in (len, np.add, lambda x: x, "Add"):
        with pytest.raises(TypeError, match="generated entry point"):
            _pw.public_entry(not_an_entry, "f", __name__, "f(x)\n--\n\n")
    f = _pw.public_entry(_pw.Add, "plus", __name__, "plus(x, y)\n--\n\nAdds.")
    assert f.__name__ == "plus" and f.__doc__ == "Adds." and str(inspect.signature(f)) == "(x, y)"
    np.testing.assert_array_equal(f(X, y=X).numpy(), X + X)

