"""The binder's dtype promotion (issue 25 item 1): elementwise ops and matmul
bring mixed-dtype inputs to the dtype the written table (test_dtype_table.TABLE,
the Array API's with bfloat16 as JAX) gives, in every mode; Python scalars
are weak (they take their partner's dtype)."""
import numpy as np
import pytest

import opforge as of
from opforge import errors
from opforge.ops import gen_nn_ops
from test_dtype_table import ORDER, TABLE, _

# Small values every dtype holds exactly, with a negative where signed.
VALUES = {"bool": [True, False, True]}


def _values(name):
    if name in VALUES:
        return np.array(VALUES[name])
    if name.startswith("uint"):
        return np.array([0, 3, 200 if name != "uint8" else 250], np.float64)
    return np.array([-2, 3, 100], np.float64)


def _make(name):
    v = _values(name)
    return of.cast(v.astype(np.float32) if name != "bool" else v, dtype=of.as_dtype(name))


@pytest.mark.parametrize("a", ORDER)
def test_where_promotes_by_the_table(a):
    cond = np.array([True, False, True])
    for b, want in zip(ORDER, TABLE[a]):
        x, y = _make(a), _make(b)
        if want == _:
            with pytest.raises(errors.InvalidArgumentError, match=f"Select.*dtype {b}.*dtype {a}.*no common dtype"):
                of.where(cond, x, y)
            continue
        r = of.where(cond, x, y)
        assert r.dtype is of.as_dtype(want), (a, b)
        # the values: numpy's select of the two value rows (exact in every dtype here)
        expect = np.where(cond, _values(a), _values(b)).astype(np.float64)
        np.testing.assert_array_equal(of.cast(r, dtype=of.float64).numpy(), expect, err_msg=f"{a} {b}")


def test_comparison_compares_in_the_promoted_dtype():
    # int8 -1 against uint8 255: both are int16 first, so they differ (a
    # cast to either operand's dtype would call them equal).
    x, y = np.array([-1, 5], np.int8), np.array([255, 5], np.uint8)
    np.testing.assert_array_equal(of.equal(x, y).numpy(), [False, True])
    np.testing.assert_array_equal(of.less(x, y).numpy(), [True, False])
    np.testing.assert_array_equal(of.less(np.array([1, 2], np.int32), np.array([1.5, 1.5], np.float32)).numpy(),
                                  [True, False])


def test_arithmetic_and_matmul_promote():
    r = of.add(np.array([1, 2], np.int32), np.array([0.5, 0.25], np.float32))
    assert r.dtype is of.float32
    np.testing.assert_array_equal(r.numpy(), [1.5, 2.25])
    h = of.mul(np.array([1.5, 2.0], np.float16), of.cast(np.array([2.0, 0.5], np.float32), dtype=of.bfloat16))
    assert h.dtype is of.float32
    np.testing.assert_array_equal(h.numpy(), [3.0, 1.0])
    m = of.matmul(np.eye(2, dtype=np.float32), np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert m.dtype is of.float64
    np.testing.assert_array_equal(m.numpy(), [[1, 2], [3, 4]])


def test_promotion_outside_the_ops_dtypes_is_a_clear_error():
    # int8 + uint8 is int16 by the table; Add has no int16 kernel
    with pytest.raises(errors.InvalidArgumentError, match=r"Add: .*'x' int8, 'y' uint8 promote to int16.*T must be"):
        of.add(np.ones(2, np.int8), np.ones(2, np.uint8))
    with pytest.raises(errors.InvalidArgumentError, match="Add.*uint64.*int64.*no common dtype"):
        of.add(np.ones(2, np.int64), np.ones(2, np.uint64))


def test_ops_outside_elementwise_keep_the_strict_rule():
    with pytest.raises(errors.InvalidArgumentError, match="RmsNorm.*no implicit promotion"):
        gen_nn_ops.rms_norm(np.ones((2, 3), np.float32), np.ones(3, np.float64))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "float16", "bfloat16", "float32"])
def test_python_scalars_are_weak(dtype):
    t = _make(dtype)
    assert of.where(np.array([True, False, True]), t, 1).dtype is of.as_dtype(dtype)
    assert of.equal(t, 3).dtype is of.bool_
    np.testing.assert_array_equal(of.equal(t, 3).numpy(), _values(dtype) == 3)
    if of.as_dtype(dtype).is_floating:
        assert of.add(t, 1.5).dtype is of.as_dtype(dtype)  # a float scalar keeps float16, not float64
        assert of.add(2, t).dtype is of.as_dtype(dtype)
    else:
        # Array API: a float scalar with an integer array is not defined; opforge refuses it
        with pytest.raises(errors.InvalidArgumentError, match="Python float value"):
            of.equal(t, 1.5)
        with pytest.raises(errors.InvalidArgumentError, match="out of range"):
            of.equal(t, 1 << 40 if dtype != "int32" else 1 << 33)


def test_graph_tape_and_async_promote_through_a_cast():
    g = of.Graph()
    with g.as_default():
        a = of.placeholder(of.float32, [2])
        b = of.placeholder(of.int32, [2])
        c = a + b
    assert c.dtype is of.float32 and "Cast" in [op.type for op in g.get_operations()]
    np.testing.assert_array_equal(of.Session(g).run(c, {a: np.ones(2, np.float32), b: np.array([1, 2], np.int32)}),
                                  [2, 3])
    x = of.tensor(np.array([1.0, 2.0, 3.0], np.float16))
    x.requires_grad = True
    w = of.tensor(np.array([2.0, 3.0, 4.0], np.float32))
    w.requires_grad = True
    of.sum(x * w).backward()
    assert x.grad.dtype is of.float16 and w.grad.dtype is of.float32
    np.testing.assert_array_equal(x.grad.numpy(), [2, 3, 4])
    np.testing.assert_array_equal(w.grad.numpy(), [1, 2, 3])
    with of.execution_mode("async"):
        z = of.add(np.ones(2, np.float32), np.array([1, 2], np.int32))
    assert z.dtype is of.float32
    np.testing.assert_array_equal(z.numpy(), [2, 3])


def test_the_docs_page_shows_the_same_table():
    import pathlib
    short = {"bool": "b", "float16": "f16", "bfloat16": "bf16", "-": "-"}
    ab = lambda n: short.get(n) or n[0] + n.lstrip("uintfloa")  # int8 -> i8, uint16 -> u16, float32 -> f32
    page = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "dtype_promotion.md").read_text()
    lines = page.split("```text\n")[1].split("```")[0].splitlines()
    assert lines[0].split() == [ab(n) for n in ORDER]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert rows == {ab(a): [ab(d) for d in TABLE[a]] for a in ORDER}


def test_shape_only_inference_promotes_as_a_call_would():
    pw = of._pywrap_internal
    dtypes = pw.infer("Add", ((of.float32, (2, 3)), (of.int32, (2, 3))), {})[0]
    assert list(dtypes) == [of.float32]
    assert list(pw.infer("Select", ((of.bool_, (2,)), (of.float16, (2,)), (of.bfloat16, (2,))), {})[0]) == [of.float32]
    with pytest.raises(errors.InvalidArgumentError, match="Add.*no common dtype"):
        pw.infer("Add", ((of.int64, (2,)), (of.uint64, (2,))), {})
    with pytest.raises(errors.InvalidArgumentError, match="RmsNorm.*no implicit promotion"):
        pw.infer("RmsNorm", ((of.float32, (2, 3)), (of.float64, (3,))), {"epsilon": 1e-5})
