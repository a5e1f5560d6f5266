"""of.quantization.quantize_dynamic: Linear layers to int8 weights with dynamic
activation quantization; the result against the float model (within the
quantization error) and against numpy doing the same integer arithmetic;
saving and loading a quantized model; quantize_weight."""
import numpy as np
import pytest

import opforge as of

Q = of.quantization


def mlp(seed=0):
    return of.nn.Sequential(of.nn.Linear(40, 64, seed=seed), of.nn.ReLU(), of.nn.Linear(64, 10, seed=seed + 1))


def numpy_qlinear(x, layer):
    """The arithmetic QuantizedLinear promises, in numpy (ONNX DynamicQuantizeLinear, then int64)."""
    lo, hi = min(0.0, float(x.min())), max(0.0, float(x.max()))
    s = np.float32((hi - lo) / 255)
    z = np.clip(np.rint(-lo / s), 0, 255)
    xq = np.clip(np.rint(x / s) + z, 0, 255)
    w = layer._weights["weight_int8"].numpy().astype(np.int64)
    acc = (xq.astype(np.int64) - int(z)) @ w
    y = acc.astype(np.float32) * (s * layer._weights["weight_scale"].numpy())
    return y + layer._weights["bias"].numpy()


def test_quantize_dynamic_replaces_linear_and_stays_close():
    model = mlp()
    qmodel = Q.quantize_dynamic(model)
    assert [type(l).__name__ for l in qmodel.children()] == ["QuantizedLinear", "ReLU", "QuantizedLinear"]
    assert type(model[0]).__name__ == "Linear"  # inplace=False left the original alone
    x = np.random.default_rng(1).standard_normal((8, 40)).astype(np.float32)
    with of.no_grad():
        want, got = model(x).numpy(), qmodel(x).numpy()
    assert got.dtype == np.float32 and got.shape == (8, 10)
    assert np.abs(got - want).max() <= 0.05 * np.abs(want).max()
    # Layer by layer, exactly the integer arithmetic described (up to float rounding).
    h = qmodel[0](x).numpy()
    np.testing.assert_allclose(h, numpy_qlinear(x, qmodel[0]), rtol=1e-5, atol=1e-5)


def test_quantized_weights_and_batched_input():
    lin = of.nn.Linear(30, 7, seed=3)
    q = Q.quantize_dynamic(lin)
    wq, ws = q._weights["weight_int8"].numpy(), q._weights["weight_scale"].numpy()
    assert wq.dtype == np.int8 and wq.shape == (30, 7) and ws.shape == (7,)
    w = lin._weights["weight"].numpy()
    assert np.abs(wq.T * ws[:, None] - w).max() <= ws.max() / 2 * (1 + 1e-6)
    x = np.random.default_rng(2).standard_normal((2, 3, 30)).astype(np.float32)
    y = q(x).numpy()
    assert y.shape == (2, 3, 7)
    np.testing.assert_allclose(y.reshape(6, 7), numpy_qlinear(x.reshape(6, 30), q), rtol=1e-5, atol=1e-5)


def test_quantized_model_saves_and_loads(tmp_path):
    pytest.importorskip("safetensors")
    qmodel = Q.quantize_dynamic(mlp(4))
    path = tmp_path / "q.safetensors"
    qmodel.save(path)
    loaded = of.nn.load_model(path)
    assert type(loaded[0]).__name__ == "QuantizedLinear"
    assert loaded[0]._weights["weight_int8"].numpy().dtype == np.int8
    x = np.random.default_rng(5).standard_normal((4, 40)).astype(np.float32)
    np.testing.assert_array_equal(loaded(x).numpy(), qmodel(x).numpy())
    f32 = tmp_path / "f.safetensors"
    mlp(4).save(f32)
    assert path.stat().st_size < 0.4 * f32.stat().st_size  # int8 weights: about a quarter


def test_quantize_weight_and_bad_input():
    w = np.array([[0.0, 0.0], [1.0, -0.5], [np.float32(1e-3), 2.0]], np.float32)
    q, s = Q.quantize_weight(w, axis=0)
    np.testing.assert_array_equal(s, np.array([1.0, 1 / 127, 2 / 127], np.float32))
    np.testing.assert_array_equal(q[1], [127, -64])  # -63.5 rounds to even
    with pytest.raises(of.errors.InvalidArgumentError, match="quantize_weight: argument 'w'"):
        Q.quantize_weight(np.array([1.0, np.nan], np.float32))
    with pytest.raises(of.errors.InvalidArgumentError, match="quantize_dynamic: argument 'model'"):
        Q.quantize_dynamic(object())
