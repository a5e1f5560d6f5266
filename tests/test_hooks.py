"""The wrappers' hook: structured calls, per-thread stacks, chaining."""
import threading

import numpy as np
import pytest

import opforge as of
from opforge import _hooks


def test_a_call_names_inputs_and_attrs_and_records_what_ran():
    calls = []

    def hook(call):
        calls.append(call)
        call.record = True
        return call.run()

    x = np.arange(6.0).reshape(2, 3)
    with _hooks.installed(hook):
        out = of.concat([x, x], axis=1)
        of.fill([2], 1.5)
    concat, fill = calls
    assert concat.op_type == "Concat"
    assert list(concat.inputs) == ["values"] and len(concat.inputs["values"]) == 2
    assert concat.attrs == {"axis": 1}
    assert concat.completed_attrs == {"N": 2, "axis": 1, "T": of.float64}
    assert [t.shape for t in concat.input_tensors["values"]] == [(2, 3), (2, 3)]
    assert concat.outputs[0] is out and out.shape == (2, 6)
    # Fill declares its attr before its input: positions follow the signature.
    assert fill.inputs == {"value": 1.5} and fill.attrs == {"shape": [2]}
    assert fill.completed_attrs["T"] == of.float64


def test_hooks_are_per_thread():
    seen = []
    in_hook = threading.Event()
    release = threading.Event()

    def hook(call):
        seen.append(call.op_type)
        return call.run()

    def other():
        in_hook.wait()
        of.neg([1.0])  # another thread: not seen
        release.set()

    t = threading.Thread(target=other)
    t.start()
    with _hooks.installed(hook):
        in_hook.set()
        release.wait()
        of.abs([1.0])
    t.join()
    assert seen == ["Abs"]


def test_hooks_chain_innermost_first():
    order = []

    def outer(call):
        order.append("outer")
        return call.run()

    def inner(call):
        order.append("inner")
        return call.run()

    with _hooks.installed(outer), _hooks.installed(inner):
        np.testing.assert_array_equal(of.add(1.0, 2.0).numpy(), 3.0)
    assert order == ["inner", "outer"]
    assert not any(h is outer or h is inner for h in _hooks.hooks)


def test_removing_a_hook_that_is_not_innermost_is_an_error():
    a, b = (lambda call: call.run()), (lambda call: call.run())
    _hooks.push(a)
    _hooks.push(b)
    try:
        with pytest.raises(ValueError, match="innermost"):
            _hooks.pop(a)
    finally:
        _hooks.pop(b)
        _hooks.pop(a)
    assert not any(h is a or h is b for h in _hooks.hooks)


def test_errors_raise_through_the_hook_path():
    with _hooks.installed(lambda call: call.run()):
        with pytest.raises(of.errors.InvalidArgumentError, match="Add"):
            of.add(np.ones(2, np.int64), np.ones(2, np.uint64))  # no common dtype
