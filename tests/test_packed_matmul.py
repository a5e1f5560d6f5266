"""float32 weights packed once into the GEMM's B panels (PackMatMulWeight,
FusedMatMulPacked; cpp/kernels/gemm/packed_b_kernels.cc): the packed
product against the unpacked FusedMatMul and numpy over random shapes
(every path of the driver: one row, small M, packed A, threads), the blob's
bytes against a numpy packer, hostile and foreign blobs (an
InvalidArgumentError naming 'packed', never a crash), and the ONNX import's
choice against onnxruntime."""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of
from opforge import ops as P

from packed_matmul_oracles import pack_float, sgemm_isa

_ACTS = {"none": lambda y: y, "relu": lambda y: np.maximum(y, 0), "sigmoid": lambda y: 1 / (1 + np.exp(-y)),
         "silu": lambda y: y / (1 + np.exp(-y))}


def _ref(a, w, tb, bias, act):
    y = a.astype(np.float64) @ (w.T if tb else w).astype(np.float64)
    return _ACTS[act](y + (bias if bias.size else 0))


@settings(max_examples=50, deadline=None)
@given(lead=st.sampled_from([(), (1,), (3,), (2, 2)]), m=st.integers(1, 300), k=st.integers(1, 300),
       n=st.one_of(st.integers(1, 20), st.integers(1, 300)), tb=st.booleans(), act=st.sampled_from(sorted(_ACTS)), with_bias=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_packed_matches_unpacked_and_numpy(lead, m, k, n, tb, act, with_bias, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    a = rng.standard_normal(lead + (m, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else np.zeros(0, np.float32)
    got = P.fused_mat_mul_packed(a, P.pack_mat_mul_weight(w, transpose_b=tb), bias, n=n, activation=act).numpy()
    want = _ref(a, w, tb, bias, act)
    tol = 1e-5 * np.sqrt(k) * (1 + np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)
    unpacked = P.fused_mat_mul(a, w, bias if with_bias else np.zeros(n, np.float32), transpose_b=tb,
                               activation=act).numpy()
    np.testing.assert_allclose(got, unpacked, rtol=0, atol=tol)


@pytest.mark.parametrize("m,k,n", [(1, 768, 3072), (1, 3072, 768), (64, 784, 512), (200, 513, 97), (130, 1030, 40),
                                   (300, 700, 10), (64, 512, 10), (4, 256, 10)])
def test_threaded_shapes_match_numpy(m, k, n):
    # Decode-style rows (the panel GEMV split over threads), M = 64 (small M),
    # M > 128 with depths past one block (A packed once, blocks of 256), a
    # narrow weight stored as rows (the product transposed from 16 rows on).
    rng = np.random.default_rng(m + k)
    w = rng.standard_normal((n, k)).astype(np.float32)
    a = rng.standard_normal((m, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    got = P.fused_mat_mul_packed(a, P.pack_mat_mul_weight(w, transpose_b=True), bias, n=n,
                                 activation="relu").numpy()
    np.testing.assert_allclose(got, _ref(a, w, True, bias, "relu"), rtol=0, atol=2e-4 * np.sqrt(k))


@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("n", [70, 10])  # panels; a narrow weight's rows
def test_blob_bytes_match_the_numpy_packer(tb, n):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((n, 37) if tb else (37, n)).astype(np.float32)
    blob = P.pack_mat_mul_weight(w, transpose_b=tb).numpy()
    np.testing.assert_array_equal(blob, pack_float(w, transpose_b=tb))


def _blob():
    w = np.arange(8 * 15, dtype=np.float32).reshape(8, 15) / 100
    return w, P.pack_mat_mul_weight(w).numpy()


def _foreign(blob):
    """The same weight packed for another ISA's panel width (a valid header)."""
    w, _ = _blob()
    other = "avx2" if sgemm_isa() == "avx512" else "avx512"
    return pack_float(w, isa=other)


def _hostile():
    from test_packed_weights import HOSTILE
    cases = dict(HOSTILE)
    cases["layout"] = _foreign
    cases["half_blob"] = lambda b: P.pack_half_mat_mul_weight(np.ones((8, 15), np.float16)).numpy()
    return cases


@pytest.mark.parametrize("case", sorted(_hostile()))
def test_hostile_blobs_raise_naming_the_argument(case):
    _, blob = _blob()
    bad = _hostile()[case](blob)
    a = np.ones((3, 8), np.float32)
    with pytest.raises(of.errors.InvalidArgumentError, match="FusedMatMulPacked.*'packed'"):
        P.fused_mat_mul_packed(a, bad, np.zeros(0, np.float32), n=15)


def test_wrong_depth_columns_bias_and_activation_are_refused():
    w, blob = _blob()
    with pytest.raises(of.errors.InvalidArgumentError, match="'a'"):
        P.fused_mat_mul_packed(np.ones((3, 9), np.float32), blob, np.zeros(0, np.float32), n=15)
    with pytest.raises(of.errors.InvalidArgumentError, match="'n'"):
        P.fused_mat_mul_packed(np.ones((3, 8), np.float32), blob, np.zeros(0, np.float32), n=14)
    with pytest.raises(of.errors.InvalidArgumentError, match="'bias'"):
        P.fused_mat_mul_packed(np.ones((3, 8), np.float32), blob, np.zeros(3, np.float32), n=15)
    with pytest.raises(of.errors.InvalidArgumentError, match="'activation'"):
        P.fused_mat_mul_packed(np.ones((3, 8), np.float32), blob, np.zeros(0, np.float32), n=15, activation="tanh")


_OTHER_ISA = r"""
import numpy as np, opforge as of
from opforge import ops as P
rng = np.random.default_rng(0)
for m, k, n in [(1, 300, 70), (5, 33, 17), (64, 200, 40), (150, 260, 33), (40, 100, 7), (3, 100, 5)]:
    w = rng.standard_normal((n, k)).astype(np.float32)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    y = P.fused_mat_mul_packed(a, P.pack_mat_mul_weight(w, transpose_b=True), b, n=n, activation="relu").numpy()
    assert np.abs(y - np.maximum(a @ w.T + b, 0)).max() < 1e-3, (m, k, n)
    # The unpacked [N, K] GEMV (eight rows at a time up to 4 KiB rows, then four, then one).
    y = of.matmul(a[:1], w, transpose_b=True).numpy()
    assert np.abs(y - a[:1] @ w.T).max() < 1e-3, (k, n)
print("ok")
"""


@pytest.mark.parametrize("simd", ["avx2", "baseline"])
def test_other_isas_match_numpy(simd):
    # The panel width differs per ISA (16 for AVX2 and the portable kernels).
    env = dict(os.environ, OPFORGE_SIMD=simd)
    out = subprocess.run([sys.executable, "-c", _OTHER_ISA], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def _gemm_model(trans_b, act, batch, k=40, n=33, matmul=False):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "b")]
    if matmul:
        nodes = [helper.make_node("MatMul", ["x", "w"], ["h"])]
    else:
        nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=int(trans_b))]
    nodes.append(helper.make_node(act, ["h"], ["y"]) if act else helper.make_node("Identity", ["h"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 17)])
    onnx.checker.check_model(model)
    return model, rng.standard_normal((batch, k)).astype(np.float32)


@pytest.mark.parametrize("trans_b,act,batch,matmul", [(True, "Relu", 1, False), (False, None, 4, False),
                                                      (True, "Sigmoid", 64, False), (False, None, 7, True)])
def test_onnx_import_packs_constant_weights_and_matches_onnxruntime(trans_b, act, batch, matmul, monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import opforge.onnx
    model, x = _gemm_model(trans_b, act, batch, matmul=matmul)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for pack in ("1", "0"):
        monkeypatch.setenv("OPFORGE_ONNX_PACK_MATMUL", pack)
        imported = opforge.onnx.import_model(model)
        types = [op.type for op in imported.graph.get_operations()]
        assert ("FusedMatMulPacked" in types) == (pack == "1"), types
        if pack == "1" and act:
            assert act not in types, types  # the activation runs in the packed product's epilogue
        got = of.Session(imported.graph).run([imported.outputs["y"]], {imported.inputs["x"]: x})[0]
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(opforge.onnx.run(model, {"x": x})[0], want, rtol=1e-5, atol=1e-5)  # eagerly


def test_onnx_eager_runs_pack_each_weight_once():
    pytest.importorskip("onnx")
    import opforge.onnx
    from opforge.onnx import _pack_matmul
    model, x = _gemm_model(True, "Relu", 2)
    prog = opforge.onnx.load(model)
    prog.use_graph = False
    prog.run({"x": x})
    blobs = {id(v[2]) for v in _pack_matmul._packed.values()}
    prog.run({"x": x})
    assert {id(v[2]) for v in _pack_matmul._packed.values()} == blobs
