"""model.to(dtype), of.autocast, and model files / pickle / DLPack of the new dtypes (issue 25 item 4)."""
import os
import pickle

import numpy as np
import pytest

import opforge as of
from opforge import nn

ml_dtypes = pytest.importorskip("ml_dtypes")


def mlp(seed=0, act=nn.ReLU):
    # Seeded weights: the default init draws the next stream of opforge.random,
    # which depends on what ran before in the process.
    return nn.Sequential(nn.Linear(8, 16, seed=seed), act(), nn.Linear(16, 4, seed=seed + 1))


@pytest.mark.parametrize("dtype", [of.float16, of.bfloat16])
def test_model_to_converts_every_weight_and_computes_close_to_float32(dtype):
    m32, mh = mlp(), mlp()
    mh.load_state_dict(m32.state_dict())
    assert mh.to(dtype) is mh
    assert all(w.dtype is dtype and w.requires_grad for w in mh.parameters())
    x = np.random.default_rng(1).standard_normal((5, 8)).astype(np.float32)
    y = mh(of.cast(x, dtype))
    assert y.dtype is dtype
    want = m32(x).numpy()
    np.testing.assert_allclose(of.cast(y, of.float32).numpy(), want, rtol=3e-2, atol=3e-2 * np.abs(want).max())
    assert mh.float() is mh and all(w.dtype is of.float32 for w in mh.parameters())
    assert mlp().half().parameters()[0].dtype is of.float16
    assert mlp().bfloat16().parameters()[0].dtype is of.bfloat16


def test_model_to_refuses_ints_and_devices():
    with pytest.raises(of.errors.InvalidArgumentError, match="int8 is not a floating dtype"):
        mlp().to(of.int8)
    with pytest.raises(of.errors.InvalidArgumentError, match="cuda"):
        mlp().to(device="cuda")
    m = mlp()
    assert m.to("cpu") is m and m.parameters()[0].dtype is of.float32


@pytest.mark.parametrize("dtype", [of.bfloat16, of.float16])
def test_autocast_trains_float32_master_weights(dtype):
    m = mlp()
    x = np.random.default_rng(2).standard_normal((32, 8)).astype(np.float32)
    target = np.random.default_rng(3).standard_normal((32, 4)).astype(np.float32)
    opt = of.optim.SGD(m.parameters(), lr=0.05)

    def loss_value():
        with of.autocast(dtype):
            out = m(x)
        assert out.dtype is dtype
        return of.mean(of.square(of.cast(out, of.float32) - target))

    first = float(loss_value().numpy())
    for _ in range(20):
        opt.zero_grad()
        loss = loss_value()
        loss.backward()
        assert all(p.dtype is of.float32 and p.grad.dtype is of.float32 for p in m.parameters())
        opt.step()
    assert all(p.dtype is of.float32 for p in m.parameters())
    assert float(loss_value().numpy()) < first
    # Outside the context the layer runs in float32 again.
    assert m(x).dtype is of.float32


def test_autocast_gradients_match_float32_within_bfloat16_rounding():
    # A smooth activation: through ReLU a pre-activation within bfloat16
    # rounding of 0 flips a whole gradient row between the two runs.
    m = mlp(act=nn.SiLU)
    x = np.random.default_rng(4).standard_normal((16, 8)).astype(np.float32)
    with of.autocast(of.bfloat16):
        loss = of.sum(of.cast(m(x), of.float32))
    loss.backward()
    g_bf16 = [p.grad.numpy().copy() for p in m.parameters()]
    for p in m.parameters():
        p.grad = None
    of.sum(m(x)).backward()
    for a, b in zip(g_bf16, (p.grad.numpy() for p in m.parameters())):
        np.testing.assert_allclose(a, b, rtol=5e-2, atol=5e-2 * np.abs(b).max())


def test_autocast_rejects_non_half_dtypes():
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        with of.autocast(of.float64):
            pass


@pytest.mark.parametrize("dtype", [of.float16, of.bfloat16])
def test_model_files_keep_the_dtype_at_half_the_bytes(tmp_path, dtype):
    pytest.importorskip("safetensors")
    m32 = mlp()
    m32.save(tmp_path / "f32.safetensors")
    mh = mlp()
    mh.load_state_dict(m32.state_dict())
    mh.to(dtype).save(tmp_path / "half.safetensors")
    back = nn.load_model(tmp_path / "half.safetensors")
    for (n, a), (_, b) in zip(mh.named_weights(), back.named_weights()):
        assert b.dtype is dtype, n
        np.testing.assert_array_equal(a.numpy().view(np.uint16), b.numpy().view(np.uint16))
    def data_bytes(path):  # the file less its 8-byte length and JSON header
        with open(path, "rb") as f:
            return os.path.getsize(path) - 8 - int.from_bytes(f.read(8), "little")

    weights = sum(w.numpy().nbytes for w in m32.parameters())
    assert data_bytes(tmp_path / "f32.safetensors") == weights
    assert data_bytes(tmp_path / "half.safetensors") == weights // 2


@pytest.mark.parametrize("name", ["float16", "bfloat16", "int8", "uint8", "int16", "uint16", "uint32", "uint64"])
def test_pickle_and_dlpack_carry_the_dtype(name):
    d = getattr(of, name)
    t = of.cast(np.arange(6, dtype=np.float32).reshape(2, 3), d)
    back = pickle.loads(pickle.dumps(t))
    assert back.dtype is d and back.numpy().tobytes() == t.numpy().tobytes()
    if name == "bfloat16":  # numpy's DLPack importer has no bfloat16; opforge's own carries it
        with pytest.raises((BufferError, RuntimeError, TypeError, ValueError)):
            np.from_dlpack(t)
        again = of.from_dlpack(t)
        assert again.dtype is d and again.numpy().tobytes() == t.numpy().tobytes()
        return
    view = np.from_dlpack(t)
    assert view.dtype == np.dtype(name) and np.shares_memory(view, t.numpy())
    again = of.from_dlpack(view)
    assert again.dtype is d
