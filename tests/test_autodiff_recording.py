"""The tape's recording path in C (swig/py_autograd.cc): ops record without a
hook, through hooks, in async mode and from op libraries' generic path; the
Node and Meta types are safe against misuse."""

import threading

import numpy as np
import pytest

import opforge as of
from opforge import _hooks
from opforge.autodiff import state


def test_recording_installs_no_hook():
    x = of.tensor([1.0, 2.0], requires_grad=True)
    assert not _hooks.hooks  # the wrappers keep their one-branch fast path
    y = of.exp(x)
    assert y.grad_fn.type == "Exp" and y.grad_fn.name == "Exp"
    assert repr(y.grad_fn) == "<grad_fn Exp>"
    assert y.grad_fn.edges == (x._ag,) and y.grad_fn.inputs[0] is x
    of.sum(y).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]))


def test_node_holds_completed_attrs_and_saved_inputs():
    x = of.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = of.sum(x, [1], True)
    node = y.grad_fn
    assert node.get_attr("keepdims") is True and node.get_attr("T") == of.float64
    assert tuple(node.get_attr("axis")) == (1,)
    with pytest.raises(of.errors.InvalidArgumentError, match="Sum: op has no attr 'nope'"):
        node.get_attr("nope")
    data = np.array([1.0, 2.0, 3.0])
    z = x * data  # `data` is borrowed writable memory: the Node keeps a copy
    data[:] = 0.0
    saved = z.grad_fn.inputs[1]
    np.testing.assert_array_equal(saved.numpy(), [1.0, 2.0, 3.0])
    assert z.grad_fn.edges[1] is None and z.grad_fn.outputs[0]._ag is None


def test_several_outputs_and_list_inputs_are_recorded():
    a = of.tensor(np.ones((2, 2)), requires_grad=True)
    b = np.full((2, 2), 2.0)
    c = of.concat([a, b, a], 1)
    assert c.grad_fn.type == "Concat" and len(c.grad_fn.inputs) == 3
    assert c.grad_fn.edges[1] is None and c.grad_fn.edges[0] is a._ag
    of.sum(c * c).backward()
    np.testing.assert_allclose(a.grad.numpy(), np.full((2, 2), 4.0))


def test_grad_mode_is_a_per_thread_flag_starting_on():
    seen = []
    with of.no_grad():
        assert not state.grad_enabled()
        t = threading.Thread(target=lambda: seen.append(state.grad_enabled()))
        t.start()
        t.join()
    assert seen == [True] and state.grad_enabled()
    assert state.set_grad_enabled(False) is True
    assert state.set_grad_enabled(True) is False


def test_recorded_once_through_an_installed_hook():
    x = of.tensor([3.0], requires_grad=True)
    seen = []

    def hook(call):
        seen.append((call.op_type, call.record))
        return call.run()

    with _hooks.installed(hook):
        y = x * x + 1.0
    assert seen == [("Mul", True), ("Add", True)]
    y.backward()
    assert x.grad.item() == 6.0  # recorded once per op, not twice


def test_async_mode_runs_recorded_ops_eagerly():
    x = of.tensor(np.linspace(0.1, 1.0, 5), requires_grad=True)
    with of.execution_mode("async"):
        loss = of.sum(of.sin(x) * 2.0)
        loss.backward()
        of.flush()
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * np.cos(np.linspace(0.1, 1.0, 5)))


def test_no_gradient_op_is_not_recorded():
    x = of.tensor([1.0, 2.0], requires_grad=True)
    assert of.equal(x, 1.0).grad_fn is None


def test_foreign_autograd_state_is_ignored_not_trusted():
    t = of.tensor([1.0])
    t._ag = "not a Meta"  # only Meta objects are read by the C check
    assert of.add(t, 1.0).grad_fn is None
    with pytest.raises(TypeError):
        state.Node()
    with pytest.raises(TypeError, match="grad_fn"):
        state.Meta(grad_fn=3)


def test_a_long_chain_is_freed_without_exhausting_the_c_stack():
    x = of.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(50_000):
        y = y + 1.0
    assert y.item() == 50_001.0
    del y  # frees 50,000 Nodes; the tuples between them bound the recursion
