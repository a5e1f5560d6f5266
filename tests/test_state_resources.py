"""Stateful ops and resources (issue 26 item 1): the DSL, per-Session state,
the engine's ordering of ops on one resource, control dependencies, and
that graph runs never write constants or feeds."""
import json
import subprocess
import sys

import numpy as np
import pytest

import opforge as of
from opforge import _pywrap_internal as pw
from opforge.ops import raw_ops


def _ops_by_name():
    return {op["name"]: op for op in json.loads(pw.registry_json())["ops"]}


def test_stateful_flag_and_resource_attrs_are_in_the_registry():
    ops = _ops_by_name()
    assert ops["AssignVariable"].get("stateful") is True
    assert ops["RandomUniform"].get("stateful") is True
    assert "stateful" not in ops["Add"]
    var = next(a for a in ops["ResourceApplyAdam"]["attrs"] if a["name"] == "m")
    assert var["resource"] is True and var["type"] == "string"


def test_a_resource_attr_needs_a_stateful_op():
    with pytest.raises(of.errors.InvalidArgumentError, match="must be declared SetIsStateful"):
        pw._validate_declaration("Broken", [("attr", "table: resource"), ("output", "y: float32")])


def test_ops_on_one_variable_run_in_the_order_they_were_built():
    g = of.Graph()
    with g.as_default():
        v = of.Variable(np.float32(1.0), name="v")
        before = v.read_value()
        add = v.assign_add(np.float32(10.0))
        after = v.read_value()
    with of.Session(g, inter_op_threads=4) as sess:
        sess.run(v.initializer)
        # Fetched in the opposite order: the graph's order still decides.
        a, s, b = sess.run([after, add, before])
        assert (b, s, a) == (1.0, 11.0, 11.0)
        assert sess.run(v) == 11.0  # v's own read was built first: no updates in this run


def test_control_dependencies_run_the_named_ops_first():
    g = of.Graph()
    with g.as_default():
        v = of.Variable(np.float32(0.0), name="v")
        bump = v.assign_add(np.float32(1.0))
        with of.control_dependencies([bump]):
            y = of.add(of.constant(np.float32(2.0)), 3.0)
        with of.control_dependencies([bump]):
            with of.control_dependencies(None):
                free = of.add(of.constant(np.float32(2.0)), 1.0)
    assert [op.name for op in y.op.control_inputs] == [bump.op.name]
    assert free.op.control_inputs == ()
    with of.Session(g) as sess:
        sess.run(v.initializer)
        assert sess.run(y) == 5.0
        assert sess.run(y) == 5.0
        assert sess.run(v.read_value()) == 2.0  # y ran bump twice
        sess.run(free)
        assert sess.run(v.read_value()) == 2.0


def test_each_session_has_its_own_state():
    g = of.Graph()
    with g.as_default():
        v = of.Variable(np.arange(3, dtype=np.float32), name="w")
        inc = v.assign_add(np.ones(3, np.float32))
        init = of.global_variables_initializer()
    s1, s2 = of.Session(g), of.Session(g)
    s1.run(init)
    s2.run(init)
    s1.run(inc)
    s1.run(inc)
    np.testing.assert_array_equal(s1.run(v), [2, 3, 4])
    np.testing.assert_array_equal(s2.run(v), [0, 1, 2])
    s1.close()
    with pytest.raises(of.errors.InvalidArgumentError, match="closed"):
        s1.run(v)


def test_reading_an_uninitialized_variable_names_it():
    g = of.Graph()
    with g.as_default():
        v = of.Variable(np.zeros(2, np.float32), name="weights")
    with of.Session(g) as sess:
        with pytest.raises(of.errors.FailedPreconditionError, match="variable 'weights' is not initialized"):
            sess.run(v)


def test_graph_random_ops_draw_fresh_numbers_each_run_reproducibly():
    of.random.seed(7)
    eager_first = of.random.normal([4]).numpy()
    g = of.Graph()
    of.random.seed(7)
    with g.as_default():
        r = of.random.normal([4])
    with of.Session(g) as sess:
        runs = [sess.run(r) for _ in range(3)]
    assert not np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[1], runs[2])
    np.testing.assert_array_equal(runs[0], eager_first)  # run 0 draws what eager mode draws
    with of.Session(g) as sess:  # a new Session repeats the sequence
        again = [sess.run(r) for _ in range(3)]
    for a, b in zip(runs, again):
        np.testing.assert_array_equal(a, b)


def test_graph_runs_never_write_constants_or_feeds():
    const = np.ones(3, np.float32)
    g = of.Graph()
    with g.as_default():
        c = of.constant(const)
        x = of.placeholder(of.float32, [3])
        into_const = raw_ops.apply_gradient_descent(c, np.ones(3, np.float32), lr=1.0)
        into_feed = raw_ops.apply_gradient_descent(x, np.ones(3, np.float32), lr=1.0)
        same = of.identity(c)
    fed = np.full(3, 5.0, np.float32)
    with of.Session(g) as sess:
        with pytest.raises(of.errors.InvalidArgumentError, match="read-only"):
            sess.run(into_const)
        with pytest.raises(of.errors.InvalidArgumentError, match="read-only"):
            sess.run(into_feed, feed_dict={x: fed})
        np.testing.assert_array_equal(fed, 5.0)
        # A fetched value never aliases the constant: writing it changes nothing.
        out = sess.run(same)
        assert out.flags.writeable
        out[:] = -1
        np.testing.assert_array_equal(sess.run(same), 1.0)
        np.testing.assert_array_equal(sess.run(c), 1.0)


def test_an_out_of_tree_library_keeps_state_in_resources(fixture_libs):
    # In a child process: the library's op would stay in this process's registry.
    code = f"""
import numpy as np, opforge as of
lib = of.load_op_library({str(fixture_libs["counter_ops"])!r})
step = np.int64(2)
assert int(lib.counter_next(counter="c_eager", step=step).numpy()) == 2
assert int(lib.counter_next(counter="c_eager", step=step).numpy()) == 4  # the process's state
g = of.Graph()
with g.as_default():
    first = lib.counter_next(counter="c", step=np.int64(1))
    second = lib.counter_next(counter="c", step=np.int64(10))
with of.Session(g) as s1, of.Session(g) as s2:
    assert s1.run([second, first]) == [11, 1]  # built order, whatever the fetch order
    assert s1.run(first) == 12
    assert s2.run(first) == 1  # another Session: another counter
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_bad_updates_name_the_variable_and_change_nothing():
    name = "bad_update_w"
    raw_ops.assign_variable(var=name, value=np.ones(3, np.float32))
    for m in ("bad_update_m", "bad_update_v"):
        raw_ops.assign_variable(var=m, value=np.zeros(3, np.float32))
    ok = dict(var=name, m="bad_update_m", v="bad_update_v", lr=0.1)
    with pytest.raises(of.errors.InvalidArgumentError, match="'step' must be >= 1"):
        raw_ops.resource_apply_adam(grad=np.ones(3, np.float32), step=np.int64(0), **ok)
    with pytest.raises(of.errors.InvalidArgumentError, match=f"variable '{name}' is float32 \\[3\\]"):
        raw_ops.resource_apply_adam(grad=np.ones(4, np.float32), step=np.int64(1), **ok)
    with pytest.raises(of.errors.InvalidArgumentError, match="name the same variable"):
        raw_ops.resource_apply_adam(grad=np.ones(3, np.float32), step=np.int64(1),
                                    **dict(ok, m=name))
    with pytest.raises(of.errors.FailedPreconditionError, match="'bad_update_nothing' is not initialized"):
        raw_ops.resource_apply_gradient_descent(var="bad_update_nothing", grad=np.ones(3, np.float32), lr=0.1)
    with pytest.raises(of.errors.InvalidArgumentError, match=f"variable '{name}' is float32"):
        raw_ops.read_variable(var=name, dtype=of.float64, shape=[3])
    np.testing.assert_array_equal(raw_ops.read_variable(var=name, dtype=of.float32, shape=[3]).numpy(), 1.0)
    assert bool(raw_ops.variable_is_initialized(var=name).numpy())
    assert not bool(raw_ops.variable_is_initialized(var="bad_update_never").numpy())
