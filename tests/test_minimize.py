"""Optimizer.minimize in graphs and eager mode (issue 26 item 4)."""
import numpy as np
import pytest

import opforge as of


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((32, 4)).astype(np.float32)
    y = (x @ rng.standard_normal((4, 1)) + 0.3).astype(np.float32)
    w0 = rng.standard_normal((4, 1)).astype(np.float32)
    return x, y, w0


def _graph_losses(make_opt, steps=25):
    x, y, w0 = _problem()
    g = of.Graph()
    with g.as_default():
        w = of.Variable(w0, name="w")
        b = of.Variable(np.zeros(1, np.float32), name="b")
        xp = of.placeholder(of.float32, [None, 4])
        yp = of.placeholder(of.float32, [None, 1])
        loss = of.mean(of.square(of.matmul(xp, w) + b - yp))
        train = make_opt(None).minimize(loss)
        init = of.global_variables_initializer()
    with of.Session(g) as sess:
        sess.run(init)
        out = []
        for _ in range(steps):
            value, done = sess.run([loss, train], {xp: x, yp: y})
            assert done is None
            out.append(float(value))
        return out, sess.run([w, b])


def _eager_losses(make_opt, steps=25):
    x, y, w0 = _problem()
    w = of.Variable(w0, name="w")
    b = of.Variable(np.zeros(1, np.float32), name="b")
    opt = make_opt([w, b])
    out = [float(opt.minimize(lambda: of.mean(of.square(of.matmul(x, w) + b - y)), var_list=[w, b]).numpy())
           for _ in range(steps)]
    return out, [w.numpy(), b.numpy()]


@pytest.mark.parametrize("make_opt", [
    lambda p: of.optim.SGD(p, lr=0.05),
    lambda p: of.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda p: of.optim.Adam(p, lr=0.05),
    lambda p: of.optim.Adam(p, lr=0.05, betas=(0.8, 0.99), weight_decay=0.01),
], ids=["sgd", "nesterov", "adam", "adam_wd"])
def test_graph_minimize_matches_eager_minimize(make_opt):
    g_loss, g_vars = _graph_losses(make_opt)
    e_loss, e_vars = _eager_losses(make_opt)
    assert g_loss[-1] < g_loss[0] * 0.5
    np.testing.assert_allclose(g_loss, e_loss, rtol=1e-5, atol=1e-6)
    for a, b in zip(g_vars, e_vars):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_adam_bias_correction_uses_the_step_variable():
    # One variable, gradient 1 every step: Adam's bias-corrected step is lr each time.
    g = of.Graph()
    with g.as_default():
        v = of.Variable(np.float32(0.0), name="v")
        train = of.optim.Adam(lr=0.1).minimize(v * 1.0)
        init = of.global_variables_initializer()
        step = [s for s in of.global_variables() if s.name == "Adam/step"][0]
    with of.Session(g) as sess:
        sess.run(init)
        for k in range(1, 6):
            sess.run(train)
            np.testing.assert_allclose(sess.run(v), -0.1 * k, rtol=1e-5)
            assert sess.run(step) == k


def test_minimize_without_trainable_variables_is_an_error():
    g = of.Graph()
    with g.as_default():
        loss = of.mean(of.constant(np.ones(3, np.float32)))
        with pytest.raises(of.errors.InvalidArgumentError, match="no trainable variables"):
            of.optim.SGD(lr=0.1).minimize(loss)


def test_updates_never_touch_constants_or_fed_values():
    const = np.array([1.0, 2.0], np.float32)
    fed = np.array([3.0, 4.0], np.float32)
    g = of.Graph()
    with g.as_default():
        c = of.constant(const)
        x = of.placeholder(of.float32, [2])
        w = of.Variable(np.zeros(2, np.float32), name="w")
        loss = of.sum(of.square(w - c) * x)
        train = of.optim.SGD(lr=0.1, momentum=0.5).minimize(loss)
        init = of.global_variables_initializer()
    with of.Session(g) as sess:
        sess.run(init)
        for _ in range(3):
            sess.run(train, {x: fed})
        np.testing.assert_array_equal(fed, [3.0, 4.0])
        np.testing.assert_array_equal(sess.run(c), [1.0, 2.0])
        got = sess.run(c)
        got[:] = 0  # the fetched value is the caller's own
        np.testing.assert_array_equal(sess.run(c), [1.0, 2.0])
        assert not np.array_equal(sess.run(w), [0.0, 0.0])
