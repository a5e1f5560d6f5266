"""Post-accumulate gradient hooks: a leaf's hook runs as soon as backward has
made its gradient final, while the sweep goes on (issue 27: the way in for
overlapping gradient averaging with backward). Oracle: the same backward
without hooks, and the order a reverse sweep must take."""
import gc

import numpy as np
import pytest

import opforge as of
from opforge import errors


def _chain(seed=0):
    rng = np.random.default_rng(seed)
    x = of.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    ws = [of.tensor(rng.standard_normal((3, 3)).astype(np.float32), requires_grad=True) for _ in range(3)]
    return x, ws


def _loss(x, ws):
    h = x
    for w in ws:
        h = of.tanh(h @ w)
    return of.sum(h * h)


def test_hooks_run_in_reverse_layer_order_before_the_sweep_ends():
    x, ws = _chain()
    ref_x, ref_ws = _chain()
    _loss(ref_x, ref_ws).backward()
    seen = []

    def hook(t):
        # When a layer's hook runs, its gradient is stored and final, and the
        # earlier layers' gradients are not computed yet.
        k = next(i for i, w in enumerate(ws) if w is t)
        seen.append((k, [w.grad is not None for w in ws]))
        np.testing.assert_allclose(t.grad.numpy(), ref_ws[k].grad.numpy(), rtol=1e-6)

    handles = [w.register_post_accumulate_grad_hook(hook) for w in ws]
    _loss(x, ws).backward()
    assert [k for k, _ in seen] == [2, 1, 0]
    assert seen[0][1] == [False, False, True]  # layer 2 final while 0 and 1 are still to come
    assert seen[1][1] == [False, True, True]
    for w, r in zip(ws, ref_ws):
        np.testing.assert_array_equal(w.grad.numpy(), r.grad.numpy())
    for h in handles:
        h.remove()


def test_a_leaf_used_twice_fires_once_with_its_total_gradient():
    w = of.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    calls = []
    w.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.numpy().copy()))
    of.sum(w * w + 3 * w).backward()  # d/dw = 2w + 3
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], [5.0, 7.0])
    of.sum(w * 2).backward()  # accumulates: the hook sees the sum
    assert len(calls) == 2
    np.testing.assert_allclose(calls[1], [7.0, 9.0])


def test_remove_and_a_dead_bound_method_stop_the_hook():
    w = of.tensor(np.ones(2, np.float32), requires_grad=True)
    calls = []
    h = w.register_post_accumulate_grad_hook(lambda t: calls.append(1))

    class Listener:
        def on(self, t):
            calls.append(2)

    listener = Listener()
    w.register_post_accumulate_grad_hook(listener.on)
    of.sum(w).backward()
    assert calls == [1, 2]
    h.remove()
    del listener
    gc.collect()
    of.sum(w).backward()
    assert calls == [1, 2]
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0])


def test_only_leaves_that_require_grad_take_hooks():
    w = of.tensor(np.ones(2, np.float32), requires_grad=True)
    with pytest.raises(errors.InvalidArgumentError, match="leaf that requires grad"):
        (w * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(errors.InvalidArgumentError, match="leaf that requires grad"):
        of.tensor(np.ones(2, np.float32)).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(errors.InvalidArgumentError, match="callable"):
        w.register_post_accumulate_grad_hook(3)


def test_functional_grad_captures_without_running_hooks():
    w = of.tensor(np.ones(2, np.float32), requires_grad=True)
    calls = []
    w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    g = of.autodiff.grad(lambda v: of.sum(v * v))(w)
    np.testing.assert_allclose(g.numpy(), [2.0, 2.0])
    assert calls == [] and w.grad is None
