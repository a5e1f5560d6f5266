"""opforge.nn vision layers and functional forms against numpy (and PyTorch when installed)."""
import numpy as np
import pytest

import opforge as of
import vision_reference as ref

F = of.nn.functional
RNG = np.random.default_rng(5)


def test_conv2d_layer_padding_modes_and_bias():
    x = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
    for padding, pads in ((1, [1, 1, 1, 1]), ((0, 2), [0, 2, 0, 2]), ("valid", [0, 0, 0, 0]), ("same", [1, 1, 1, 1])):
        layer = of.nn.Conv2d(4, 6, 3, padding=padding, groups=2, seed=1)
        w, b = layer.weights()["weight"].numpy(), layer.weights()["bias"].numpy()
        want = ref.conv2d(x, w, pads=pads, groups=2) + b.reshape(1, -1, 1, 1)
        np.testing.assert_allclose(layer(x).numpy(), want, rtol=1e-5, atol=1e-5)
    # 'same' with stride 2 (ONNX SAME_UPPER): out = ceil(in / stride), the odd pixel padded at the end.
    y = F.conv2d(x, RNG.standard_normal((3, 4, 2, 2)).astype(np.float32), stride=2, padding="same")
    assert y.shape == (2, 3, 4, 3)


def test_conv1d_is_conv2d_over_height_one():
    x = RNG.standard_normal((2, 3, 11))
    layer = of.nn.Conv1d(3, 4, 3, stride=2, padding=1, dilation=2, dtype="float64", seed=2)
    w, b = layer.weights()["weight"].numpy(), layer.weights()["bias"].numpy()
    want = ref.conv2d(x[:, :, None], w[:, :, None], strides=[1, 2], pads=[0, 1, 0, 1], dilations=[1, 2])[:, :, 0]
    np.testing.assert_allclose(layer(x).numpy(), want + b[None, :, None], rtol=1e-12)


def test_pool_layers():
    x = RNG.standard_normal((2, 3, 7, 7)).astype(np.float32)
    np.testing.assert_array_equal(of.nn.MaxPool2d(3, 2, 1)(x).numpy(), ref.max_pool2d(x, [3, 3], [2, 2], [1] * 4))
    np.testing.assert_allclose(of.nn.AvgPool2d(2, ceil_mode=True)(x).numpy(),
                               ref.avg_pool2d(x, [2, 2], [2, 2], ceil_mode=True, count_include_pad=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(of.nn.AdaptiveAvgPool2d((2, 3))(x).numpy(), ref.adaptive_avg_pool2d(x, [2, 3]),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(F.global_avg_pool2d(x).numpy(), x.mean((2, 3), keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(F.global_max_pool2d(x).numpy(), x.max((2, 3), keepdims=True))


def test_batchnorm_train_eval_and_running_stats(tmp_path):
    pytest.importorskip("safetensors")
    x = RNG.standard_normal((6, 3, 4, 5)) * 3 + 1
    bn = of.nn.BatchNorm2d(3, momentum=0.2, dtype="float64")
    y = bn(x).numpy()
    mean, var = x.mean((0, 2, 3), keepdims=True), x.var((0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-10, atol=1e-12)
    rm, rv = bn.weights()["running_mean"].numpy(), bn.weights()["running_var"].numpy()
    np.testing.assert_allclose(rm, 0.2 * mean.ravel(), rtol=1e-12)
    np.testing.assert_allclose(rv, 0.8 + 0.2 * x.var((0, 2, 3), ddof=1), rtol=1e-12)
    bn.eval()
    np.testing.assert_allclose(bn(x).numpy(), (x - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5),
                               rtol=1e-10)
    assert [n for n, _ in bn.named_weights()] == ["weight", "bias", "running_mean", "running_var"]
    assert len(bn.parameters()) == 2  # the running statistics are not trained
    path = tmp_path / "bn.safetensors"
    bn.save(path)
    back = of.nn.load_model(path)
    np.testing.assert_array_equal(back.weights()["running_var"].numpy(), rv)
    back.eval()
    np.testing.assert_allclose(back(x).numpy(), bn(x).numpy(), rtol=1e-12)


def test_batchnorm_training_gradient_matches_finite_differences():
    x = RNG.standard_normal((4, 2, 3, 3))
    w, b = RNG.standard_normal(2), RNG.standard_normal(2)
    dy = RNG.standard_normal(x.shape)

    def loss(xv):
        return float(np.sum(F.batch_norm(xv, None, None, w, b, training=True).numpy() * dy))

    xt = of.tensor(x, requires_grad=True)
    of.sum(of.mul(F.batch_norm(xt, None, None, w, b, training=True), dy)).backward()
    eps, num = 1e-6, np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        num[i] = (loss(x + d) - loss(x - d)) / (2 * eps)
    np.testing.assert_allclose(xt.grad.numpy(), num, rtol=1e-5, atol=1e-7)


def test_activations_match_numpy():
    x = RNG.standard_normal((3, 4)) * 4
    hs = np.clip(x / 6 + 0.5, 0, 1)
    np.testing.assert_allclose(of.nn.Hardswish()(x).numpy(), x * hs, rtol=1e-12)
    np.testing.assert_allclose(of.nn.Hardsigmoid()(x).numpy(), hs, rtol=1e-12)
    np.testing.assert_allclose(of.nn.SiLU()(x).numpy(), x / (1 + np.exp(-x)), rtol=1e-12)
    np.testing.assert_allclose(of.nn.ReLU6()(x).numpy(), np.clip(x, 0, 6))
    np.testing.assert_allclose(of.nn.LeakyReLU(0.1)(x).numpy(), np.where(x >= 0, x, 0.1 * x))
    np.testing.assert_array_equal(of.nn.Flatten()(np.zeros((2, 3, 4, 5))).shape, (2, 60))


def test_functional_bad_input_names_function():
    with pytest.raises(of.errors.InvalidArgumentError, match="conv2d"):
        F.conv2d(np.zeros((1, 2, 4, 4), np.float32), np.zeros((2, 2, 3), np.float32))
    with pytest.raises(of.errors.InvalidArgumentError, match="padding"):
        F.conv2d(np.zeros((1, 2, 4, 4), np.float32), np.zeros((2, 2, 3, 3), np.float32), padding="full")
    with pytest.raises(of.errors.InvalidArgumentError, match="groups"):
        of.nn.Conv2d(3, 4, 3, groups=2)


def test_matches_pytorch_when_installed():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 6, 9, 8)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 2)).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)
    dy = RNG.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(dy))
    attrs = dict(strides=[2, 1], pads=[1, 2, 1, 2], dilations=[1, 2], groups=2)
    np.testing.assert_allclose(of.conv2d(x, w, **attrs).numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(of.raw_ops.conv2d_backprop_input(x, w, dy, **attrs).numpy(), tx.grad.numpy(),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(of.raw_ops.conv2d_backprop_filter(x, w, dy, **attrs).numpy(), tw.grad.numpy(),
                               rtol=1e-4, atol=1e-3)
    tp = torch.nn.functional.max_pool2d(torch.tensor(x), 3, 2, 1, ceil_mode=True)
    np.testing.assert_array_equal(F.max_pool2d(x, 3, 2, 1, ceil_mode=True).numpy(), tp.numpy())
    ta = torch.nn.functional.avg_pool2d(torch.tensor(x), 3, 2, 1, ceil_mode=True, count_include_pad=True)
    np.testing.assert_allclose(F.avg_pool2d(x, 3, 2, 1, ceil_mode=True).numpy(), ta.numpy(), rtol=1e-5)


def test_upsample_nearest_and_its_gradient():
    x = RNG.standard_normal((2, 3, 4, 5))
    want = x.repeat(2, axis=2).repeat(3, axis=3)
    np.testing.assert_array_equal(of.nn.Upsample(scale_factor=(2, 3))(x).numpy(), want)
    np.testing.assert_array_equal(F.interpolate(x, size=(8, 10)).numpy(), x.repeat(2, 2).repeat(2, 3))
    xt = of.tensor(x, requires_grad=True)
    dy = RNG.standard_normal((2, 3, 8, 15))
    of.sum(of.mul(F.upsample_nearest(xt, (2, 3)), dy)).backward()
    np.testing.assert_allclose(xt.grad.numpy(), dy.reshape(2, 3, 4, 2, 5, 3).sum((3, 5)), rtol=1e-12)
