"""Constant weights packed once (cpp/ops/packed_weight_ops.cc): the int8
and float16 packed matmuls against numpy, blobs that are hostile (each an
InvalidArgumentError naming argument 'packed', never a crash), and the
ONNX imports that use them against onnxruntime. The random-draw property
tests of these ops are in test_bad_input / test_half_kernels
(tests/packed_oracles.py builds the blobs independently, in numpy)."""
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import opforge as of
from opforge import ops as P

from packed_oracles import pack_half, pack_int8


def _dql(x):
    from quant_oracles import dynamic_quantize_linear
    return dynamic_quantize_linear(x)


@pytest.mark.parametrize("m,k,n", [(64, 784, 512), (5, 3, 7), (13, 1030, 70), (1, 2051, 40)])
def test_int8_packed_matmul_matches_numpy(m, k, n):
    rng = np.random.default_rng(k)
    for bt, at in [(np.int8, np.uint8), (np.uint8, np.int8)]:
        b = rng.integers(np.iinfo(bt).min, np.iinfo(bt).max + 1, (k, n)).astype(bt)
        zb = rng.integers(np.iinfo(bt).min, np.iinfo(bt).max + 1, n).astype(bt)
        blob = P.pack_mat_mul_integer_weight(b, zb)
        np.testing.assert_array_equal(blob.numpy(), pack_int8(b, zb))  # the numpy packer's bytes
        a = rng.integers(np.iinfo(at).min, np.iinfo(at).max + 1, (2, m, k)).astype(at)
        za = np.asarray(rng.integers(np.iinfo(at).min, np.iinfo(at).max + 1), at)
        got = P.mat_mul_integer_packed(a, za, blob, n=n).numpy()
        want = ((a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - zb.astype(np.int64))).astype(np.int32)
        np.testing.assert_array_equal(got, want)


# Symmetric int8 weights (the correction folded into the epilogue), a uint8
# weight with zero points (corrected in the GEMM), depths that are not whole
# groups of 4 (A packed) or span two or three blocks (1030, 2052: the epilogue
# after the last), rows past one tile.
@pytest.mark.parametrize("act,m,k,wt", [("none", 64, 300, np.int8), ("relu", 64, 300, np.int8),
                                        ("relu", 13, 301, np.int8), ("none", 29, 1030, np.uint8),
                                        ("relu", 29, 2052, np.int8)])
def test_dynamic_quantize_mat_mul_matches_numpy(act, m, k, wt):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((m, k)).astype(np.float32)
    lo, hi = (-127, 128) if wt == np.int8 else (0, 256)
    w = rng.integers(lo, hi, (k, 45)).astype(wt)
    wz = np.zeros((), wt) if wt == np.int8 else rng.integers(100, 156, 45).astype(wt)
    sb = (rng.random(45) * 0.01 + 1e-3).astype(np.float32)
    bias = rng.standard_normal(45).astype(np.float32)
    y = P.dynamic_quantize_mat_mul(x, P.pack_mat_mul_integer_weight(w, wz), sb, bias, n=45,
                                   activation=act).numpy()
    xq, xs, xz = _dql(x)
    acc = (xq.astype(np.int64) - int(xz)) @ (w.astype(np.int64) - wz.astype(np.int64))
    ref = acc.astype(np.float32) * (xs * sb) + bias
    ref = np.maximum(ref, 0) if act == "relu" else ref
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)


def test_half_packed_matmul_and_float16_matmul_match_numpy():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((37, 129)).astype(np.float16)
    b = rng.standard_normal((70, 129)).astype(np.float16)
    bias = rng.standard_normal(70).astype(np.float16)
    blob = P.pack_half_mat_mul_weight(b, transpose_b=True)
    np.testing.assert_array_equal(blob.numpy(), pack_half(b, transpose_b=True))
    y = P.half_mat_mul_packed(a, blob, bias, n=70, activation="relu").numpy()
    ref = np.maximum(a.astype(np.float32) @ b.astype(np.float32).T + bias.astype(np.float32), 0)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float32), ref, rtol=2e-3, atol=2e-3)
    mm = of.matmul(a, b.T.copy()).numpy()  # MatMul's own float16 kernel (panels per call)
    np.testing.assert_allclose(mm.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32).T,
                               rtol=2e-3, atol=2e-3)
    batched = of.matmul(a.reshape(1, 37, 129), np.stack([b.T] * 2)).numpy()  # batched b: the widening path
    assert batched.shape == (2, 37, 70)


def _int_blob():
    w = np.arange(-60, 60, dtype=np.int8).reshape(8, 15)
    return w, P.pack_mat_mul_integer_weight(w, np.int8(0)).numpy()


def _rewrite_header(blob, **fields):
    """blob with header fields replaced and the checksum made valid again (a forged blob)."""
    from packed_oracles import _fnv1a
    names = ["magic", "version", "format", "header_bytes", "layout", "mr", "nr", "kgroup", "wide", "k", "n",
             "payload", "flags"]
    fmt = "<4I16s4i2qQI"
    vals = dict(zip(names, struct.unpack(fmt, blob[:76].tobytes())))
    vals.update(fields)
    head = struct.pack(fmt, *[vals[k] for k in names])
    out = blob.copy()
    out[:80] = np.frombuffer(head + struct.pack("<I", _fnv1a(head)), np.uint8)
    return out


def _other_layout(blob):
    """blob claiming the layout of another 8-bit GEMM than the one in use."""
    import opforge.quantization as q
    from packed_oracles import LAYOUTS
    name = next(n for n in ("avx2", "generic") if n != q.gemm_isa())
    mr, nr, kg, wide = LAYOUTS[name]
    return _rewrite_header(blob, layout=name.encode(), mr=mr, nr=nr, kgroup=kg, wide=wide)


HOSTILE = {
    "empty": lambda b: b[:0].copy(),
    "truncated_header": lambda b: b[:100].copy(),
    "truncated_payload": lambda b: b[:-1].copy(),
    "one_byte_longer": lambda b: np.concatenate([b, [0]]).astype(np.uint8),
    "magic": lambda b: np.concatenate([[0], b[1:]]).astype(np.uint8),
    "checksum": lambda b: np.concatenate([b[:40], [b[40] ^ 1], b[41:]]).astype(np.uint8),
    "version": lambda b: _rewrite_header(b, version=2),
    "format": lambda b: _rewrite_header(b, format=2),
    "huge_k": lambda b: _rewrite_header(b, k=1 << 40),
    "negative_n": lambda b: _rewrite_header(b, n=-5),
    "payload_overflow": lambda b: _rewrite_header(b, payload=(1 << 64) - 1),
    "layout": lambda b: _other_layout(b),
    "2-D": lambda b: b.reshape(1, -1),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_int8_blobs_raise_naming_the_argument(case):
    w, blob = _int_blob()
    bad = HOSTILE[case](blob)
    a = np.ones((3, 8), np.uint8)
    with pytest.raises(of.errors.InvalidArgumentError, match="MatMulIntegerPacked.*'packed'"):
        P.mat_mul_integer_packed(a, np.uint8(1), bad, n=15)
    with pytest.raises(of.errors.InvalidArgumentError, match="DynamicQuantizeMatMul.*'packed'"):
        P.dynamic_quantize_mat_mul(a.astype(np.float32), bad, np.float32(1), np.zeros(0, np.float32), n=15)


@pytest.mark.parametrize("case", sorted(set(HOSTILE) - {"layout"}))
def test_hostile_half_blobs_raise_naming_the_argument(case):
    blob = P.pack_half_mat_mul_weight(np.ones((8, 15), np.float16)).numpy()
    bad = HOSTILE[case](blob) if case != "format" else _rewrite_header(blob, format=1)
    with pytest.raises(of.errors.InvalidArgumentError, match="HalfMatMulPacked.*'packed'"):
        P.half_mat_mul_packed(np.ones((3, 8), np.float16), bad, np.zeros(0, np.float16), n=15)


def test_wrong_depth_or_width_or_format_is_refused():
    w, blob = _int_blob()
    with pytest.raises(of.errors.InvalidArgumentError, match="inner dimension of argument 'a' is 9"):
        P.mat_mul_integer_packed(np.ones((3, 9), np.uint8), np.uint8(0), blob, n=15)
    with pytest.raises(of.errors.InvalidArgumentError, match="attr 'n' is 16"):
        P.mat_mul_integer_packed(np.ones((3, 8), np.uint8), np.uint8(0), blob, n=16)
    with pytest.raises(of.errors.InvalidArgumentError, match="float16 weights"):
        P.mat_mul_integer_packed(np.ones((3, 8), np.uint8), np.uint8(0),
                                 P.pack_half_mat_mul_weight(np.ones((8, 15), np.float16)), n=15)
    with pytest.raises(of.errors.InvalidArgumentError, match="'b' must have a known shape|between 1 and"):
        P.pack_mat_mul_integer_weight(np.ones((0, 3), np.int8), np.int8(0))


def test_unaligned_blob_and_edited_payload_do_not_crash():
    w, blob = _int_blob()
    a = np.arange(24, dtype=np.uint8).reshape(3, 8)
    want = P.mat_mul_integer_packed(a, np.uint8(3), blob, n=15).numpy()
    buf = np.zeros(blob.size + 1, np.uint8)
    shifted = buf[1:]  # an unaligned view: the op copies it to aligned memory
    shifted[:] = blob
    np.testing.assert_array_equal(P.mat_mul_integer_packed(a, np.uint8(3), shifted, n=15).numpy(), want)
    edited = blob.copy()
    edited[200:260] ^= 0x5A  # weights edited: another answer, but no crash and no out-of-bounds read
    assert P.mat_mul_integer_packed(a, np.uint8(3), edited, n=15).numpy().shape == (3, 15)


def test_a_blob_packed_for_another_isa_is_refused(tmp_path):
    import opforge.quantization as q
    if q.gemm_isa() == "generic":
        pytest.skip("needs an x86 CPU with AVX2")
    w, blob = _int_blob()
    path = tmp_path / "blob.npy"
    np.save(path, blob)
    code = ("import numpy as np, opforge as of\n"
            f"b = np.load({str(path)!r})\n"
            "try:\n"
            "    of.ops.mat_mul_integer_packed(np.ones((2, 8), np.uint8), np.uint8(0), b, n=15)\n"
            "except of.errors.InvalidArgumentError as e:\n"
            "    print(e)\n")
    env = dict(os.environ, OPFORGE_SIMD="baseline")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "was packed for the '" + q.gemm_isa() + "' 8-bit GEMM, but this process runs 'generic'" in out.stdout, \
        out.stdout + out.stderr


# -- ONNX imports against onnxruntime ----------------------------------------


def _ort():
    pytest.importorskip("onnx")
    return pytest.importorskip("onnxruntime")


def _graph_ops(imported):
    return [op.type for op in imported.graph.get_operations()]


def test_quantize_dynamic_mlp_imports_as_packed_fused_ops(tmp_path):
    ort = _ort()
    import onnx
    import opforge.onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from bench.onnx_mlp import build_model
    rng = np.random.default_rng(5)
    model, _ = build_model(rng, sizes=(64, 48, 48, 10), batch=16)
    model.graph.node.pop()  # the logits: one quantization step is visible there
    model.graph.output[0].name = model.graph.node[-1].output[0]
    onnx.save(model, tmp_path / "f.onnx")
    quantize_dynamic(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), weight_type=QuantType.QInt8)
    q = onnx.load(tmp_path / "q.onnx")
    x = rng.standard_normal((16, 64)).astype(np.float32)
    want = ort.InferenceSession(q.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    imported = opforge.onnx.import_model(q)
    ops = _graph_ops(imported)
    assert ops.count("DynamicQuantizeMatMul") == 3 and "MatMulInteger" not in ops, ops
    assert "PackMatMulIntegerWeight" not in ops  # packed once at import, a constant in the graph
    out = imported.outputs[q.graph.output[0].name]
    got = of.Session(imported.graph).run([out], {imported.inputs["x"]: x})[0]
    np.testing.assert_allclose(np.asarray(got), want, atol=np.abs(want).max() / 127)
    eager = opforge.onnx.run(q, {"x": x})[0]  # the eager path fuses the same way
    np.testing.assert_allclose(eager, want, atol=np.abs(want).max() / 127)


def test_float16_gemm_imports_as_half_packed_matmul():
    ort = _ort()
    import opforge.onnx

    from bench.onnx_mlp import build_model
    from bench.precision import half_model
    rng = np.random.default_rng(6)
    model, _ = build_model(rng, sizes=(40, 33, 10), batch=5)
    hm = half_model(model)
    x = rng.standard_normal((5, 40)).astype(np.float16)
    want = ort.InferenceSession(hm.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    imported = opforge.onnx.import_model(hm)
    assert _graph_ops(imported).count("HalfMatMulPacked") == 2
    got = of.Session(imported.graph).run([imported.outputs["y"]], {imported.inputs["x"]: x})[0]
    np.testing.assert_allclose(np.asarray(got).astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-3)


def test_quantized_linear_packs_once_and_pickles_without_the_blob():
    import pickle

    import opforge.nn as nn
    rng = np.random.default_rng(7)
    lin = nn.Linear(30, 20)
    q = of.quantization.quantize_dynamic(lin)
    x = rng.standard_normal((4, 30)).astype(np.float32)
    y = q(x).numpy()
    blob = q.__dict__["_packed"][1]
    q(x)
    assert q.__dict__["_packed"][1] is blob  # packed once
    w, s = q._weights["weight_int8"].numpy(), q._weights["weight_scale"].numpy()
    xq, xs, xz = _dql(x)
    ref = ((xq.astype(np.int64) - int(xz)) @ w.astype(np.int64)).astype(np.float32) * (xs * s) \
        + q._weights["bias"].numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    q2 = pickle.loads(pickle.dumps(q))
    assert "_packed" not in q2.__dict__
    np.testing.assert_array_equal(q2(x).numpy(), y)


def test_float16_conv_with_constant_weight_matches_onnxruntime():
    ort = _ort()
    from onnx import TensorProto, helper, numpy_helper

    import opforge.onnx
    rng = np.random.default_rng(8)
    w = (rng.standard_normal((6, 3, 3, 3)) * 0.3).astype(np.float16)
    b = rng.standard_normal(6).astype(np.float16)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "conv16", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 3, 9, 9])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 6, 9, 9])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_operatorsetid("", 17)])
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float16)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    imported = opforge.onnx.import_model(model)
    # Widened once at import: a float32 convolution with the Relu fused (its filter packed, unless
    # OPFORGE_ONNX_PACK_CONV=0), not a float16 Conv2D widening the weight on every call.
    assert {"FusedConv2D", "Conv2DPacked"} & set(_graph_ops(imported))
    got = np.asarray(of.Session(imported.graph).run([imported.outputs["y"]], {imported.inputs["x"]: x})[0])
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2)
