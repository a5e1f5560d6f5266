"""Transposed numpy views (w.T) given to an op that reads the input
transposed under a bool attr (TransposeAttr in the registry) are borrowed in
place with the attr flipped, where they used to be copied into C order."""

import tracemalloc

import numpy as np
import pytest

import opforge as of
from opforge import _pywrap_internal as pw
from opforge.ops import gen_packed_matmul_ops

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-5, 5, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def view_t(x):
    """x's transpose in its last two axes, as a view of a C array of the swapped shape."""
    return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)


def traced_numpy_bytes(fn):
    """The peak of numpy's own allocations (tracemalloc sees them) during fn()."""
    tracemalloc.start()
    try:
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, peak


def tol(dtype):
    return {"rtol": 2e-2, "atol": 2e-2} if dtype == np.float16 else {"rtol": 1e-4, "atol": 1e-4}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.float16])
@pytest.mark.parametrize("a_view", [False, True])
@pytest.mark.parametrize("b_view", [False, True])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_of_views_matches_numpy(dtype, a_view, b_view, ta, tb):
    a = rand(*((13, 9) if ta else (9, 13)), dtype=dtype)
    b = rand(*((7, 13) if tb else (13, 7)), dtype=dtype)
    a_in = view_t(a) if a_view else a
    b_in = view_t(b) if b_view else b
    got = np.asarray(of.matmul(a_in, b_in, transpose_a=ta, transpose_b=tb))
    want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), want, **tol(dtype))
    assert got.dtype == dtype and got.shape == (9, 7)


@pytest.mark.parametrize("shape_a,shape_b", [((4, 5, 6), (4, 6, 3)), ((2, 1, 5, 6), (3, 6, 2)), ((1, 6), (6, 1)),
                                             ((5, 6), (2, 6, 4))])
def test_batched_views_match_numpy(shape_a, shape_b):
    a, b = rand(*shape_a), rand(*shape_b)
    for a_in, b_in in ((view_t(a), b), (a, view_t(b)), (view_t(a), view_t(b))):
        np.testing.assert_allclose(np.asarray(of.matmul(a_in, b_in)), a @ b, rtol=1e-4, atol=1e-4)


def test_a_transposed_view_is_not_copied():
    x, w = rand(8, 512), rand(512, 512)
    assert not w.T.flags.c_contiguous
    # of.matmul's output is opforge memory; a copy of the view would be numpy's (1 MiB).
    out, peak = traced_numpy_bytes(lambda: of.matmul(x, w.T))
    assert peak < w.nbytes // 4, peak
    np.testing.assert_allclose(np.asarray(out), x @ w.T, rtol=1e-4, atol=1e-4)
    # A view that is no transpose of a C array (every other column) is still copied, correctly.
    out, peak = traced_numpy_bytes(lambda: of.matmul(x, w[:, ::2]))
    assert peak >= w.nbytes // 2
    np.testing.assert_allclose(np.asarray(out), x @ w[:, ::2], rtol=1e-4, atol=1e-4)


def test_views_that_are_not_plain_transposes_are_correct():
    x = rand(6, 8)
    w = rand(10, 8)
    cases = [w.T[:, 1:], rand(16, 5)[::2], view_t(rand(8, 16))[:, ::2], np.broadcast_to(rand(8, 1), (8, 5)), w.T[:, ::-1], np.asfortranarray(rand(8, 4))]
    for m in cases:
        np.testing.assert_allclose(np.asarray(of.matmul(x, m)), x @ m, rtol=1e-4, atol=1e-4)
    # Byte-swapped and read-only views.
    big = view_t(rand(8, 5)).astype(">f4")
    np.testing.assert_allclose(np.asarray(of.matmul(x, big)), x @ big.astype(np.float32), rtol=1e-4, atol=1e-4)
    ro = view_t(rand(8, 5))
    ro.flags.writeable = False
    np.testing.assert_allclose(np.asarray(of.matmul(x, ro)), x @ ro, rtol=1e-4, atol=1e-4)


def test_the_call_memo_keys_on_the_flip():
    # Same stored shape and passed attrs: a view (flipped inside) then a C array (not flipped), and back;
    # each repeated, so the eager call memo serves the second of each pair from the first's attrs.
    x, w = rand(3, 6), rand(6, 6)
    c = np.ascontiguousarray(w.T)
    for _ in range(3):
        for _ in range(2):
            np.testing.assert_allclose(np.asarray(of.matmul(x, w.T)), x @ w.T, rtol=1e-5, atol=1e-5)
        for _ in range(2):
            np.testing.assert_allclose(np.asarray(of.matmul(x, w)), x @ w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(of.matmul(x, c)), x @ c, rtol=1e-5, atol=1e-5)
        # The view with its attr set: flipped back to the plain product of w.
        for _ in range(2):
            np.testing.assert_allclose(np.asarray(of.matmul(x, w.T, transpose_b=True)), x @ w, rtol=1e-5, atol=1e-5)
    # Not square: the flipped call's output shape comes from the memo too.
    v = rand(5, 6)
    for _ in range(3):
        got = np.asarray(of.matmul(x, v.T))
        assert got.shape == (3, 5)
        np.testing.assert_allclose(got, x @ v.T, rtol=1e-5, atol=1e-5)


def test_general_binder_and_async_paths():
    x, w = rand(4, 6), rand(5, 6)
    # A Python list in one argument takes the general binder, not the plain fast path.
    got = of.matmul(x.tolist(), w.T)
    np.testing.assert_allclose(np.asarray(got), x @ w.T, rtol=1e-5, atol=1e-5)
    with of.execution_mode("async"):
        pending = of.matmul(x, w.T)
    np.testing.assert_allclose(np.asarray(pending), x @ w.T, rtol=1e-5, atol=1e-5)
    # Operators and the Tensor route.
    np.testing.assert_allclose(np.asarray(of.tensor(x) @ w.T), x @ w.T, rtol=1e-5, atol=1e-5)


def test_fused_matmul_of_views():
    a, b, bias = rand(9, 12), rand(12, 7), rand(7)
    want = np.maximum(a @ b + bias, 0)
    at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
    # Views with the attrs off, and views of the transposes with the attrs on.
    for a_in, b_in, flag in ((at.T, bt.T, False), (a.T, b.T, True)):
        got = of.ops.gen_linalg_ops.fused_mat_mul(a_in, b_in, bias, transpose_a=flag, transpose_b=flag,
                                                  activation="relu")
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


def test_a_view_the_op_cannot_take_transposed_is_copied():
    # FusedMatMul reads `a` transposed only in 2-D: a batched view of the
    # transposes (and a Fortran-ordered [1, m, k]) is bound as a copy instead
    # of failing (found by the long profile's fuzzer, session 21).
    fused = of.ops.gen_linalg_ops.fused_mat_mul
    x, w, bias = rand(3, 4, 5).swapaxes(-1, -2), rand(4, 6), rand(6)
    np.testing.assert_allclose(np.asarray(fused(x, w, bias, activation="relu")), np.maximum(x @ w + bias, 0),
                               rtol=1e-4, atol=1e-4)
    lin = of.nn.Linear(4, 6)
    np.testing.assert_array_equal(np.asarray(lin(x)), np.asarray(lin(np.ascontiguousarray(x))))
    a, b = np.asfortranarray(rand(1, 2, 2)), rand(2, 3)
    np.testing.assert_allclose(np.asarray(fused(a, b, np.zeros(3, np.float32))), a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(of.errors.InvalidArgumentError, match=r"argument 'a' of shape \[3, 5, 4\]"):
        fused(x, rand(5, 6), bias)  # the error names the shape as passed


def test_gradients_through_a_view_operand():
    w = rand(4, 6)
    x = of.tensor(rand(5, 6), requires_grad=True)
    of.matmul(x, w.T).sum().backward()  # the tape records MatMul(x, w, transpose_b=True)
    np.testing.assert_allclose(np.asarray(x.grad), np.ones((5, 4), np.float32) @ w, rtol=1e-5, atol=1e-5)
    xt = of.tensor(rand(4, 5), requires_grad=True)
    (of.matmul(w.T, xt) * 2.0).sum().backward()  # a view on the left: MatMul(w, xt, transpose_a=True)
    np.testing.assert_allclose(np.asarray(xt.grad), 2.0 * w @ np.ones((6, 5), np.float32), rtol=1e-5, atol=1e-5)


def test_packed_weight_of_a_view_is_the_packed_weight():
    w = rand(40, 24)  # a Linear weight [n, k]
    packed = np.asarray(gen_packed_matmul_ops.pack_mat_mul_weight(w, transpose_b=True))
    assert np.array_equal(np.asarray(gen_packed_matmul_ops.pack_mat_mul_weight(w.T)), packed)
    assert np.array_equal(
        np.asarray(gen_packed_matmul_ops.pack_mat_mul_weight(np.ascontiguousarray(w.T))), packed)


def test_registry_declares_and_checks_the_pairing():
    ops = {op["name"]: op for op in __import__("json").loads(pw.registry_json())["ops"]}
    pairs = {n: {a["name"]: a["transpose_attr"] for a in op["inputs"] if "transpose_attr" in a}
             for n, op in ops.items()}
    assert pairs["MatMul"] == {"a": "transpose_a", "b": "transpose_b"}
    assert pairs["FusedMatMul"] == {"a": "transpose_a", "b": "transpose_b"}
    assert pairs["PackMatMulWeight"] == {"b": "transpose_b"}
    assert pairs["MatMulGrad"] == {}  # its outputs follow its inputs' layout: no flip
    decl = [("input", "a: float32"), ("output", "y: float32"), ("attr", "flag: bool = false"),
            ("attr", "n: int = 0")]
    pw._validate_declaration("Fine", decl + [("transpose_attr", "a flag")])
    for bad, message in ((("transpose_attr", "a n"), "'n' is not a bool attr"),
                         (("transpose_attr", "z flag"), "TransposeAttr('z', ...): not a single-tensor input")):
        with pytest.raises(of.errors.InvalidArgumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
            pw._validate_declaration("Broken", decl + [bad])
    with pytest.raises(of.errors.InvalidArgumentError, match="declared twice"):
        pw._validate_declaration("Twice", decl + [("transpose_attr", "a flag")] * 2)
