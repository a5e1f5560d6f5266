"""opforge.nn layers against numpy, weights, and model files (round trips and hostile files)."""

import json
import struct

import numpy as np
import pytest

import opforge as of
from opforge import errors

nn = of.nn
F = of.nn.functional
RNG = np.random.default_rng(1)
pytest.importorskip("safetensors")


def mlp(seed=0):
    return nn.Sequential(nn.Linear(8, 16, seed=seed), nn.GELU(), nn.LayerNorm(16), nn.Dropout(0.25, seed=3),
                         nn.Linear(16, 4, seed=seed + 1), nn.RMSNorm(4), nn.Softmax())


def test_layers_match_numpy():
    x = RNG.standard_normal((5, 8)).astype(np.float32)
    lin = nn.Linear(8, 3, seed=0)
    w, b = lin.get_weight("weight").numpy(), lin.get_weight("bias").numpy()
    np.testing.assert_allclose(lin(x).numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
    emb = nn.Embedding(10, 4, seed=0)
    ids = np.array([[1, 9], [0, 1]])
    np.testing.assert_array_equal(emb(ids).numpy(), emb.get_weight("weight").numpy()[ids])
    ln = nn.LayerNorm(8)
    ln.set_weight("weight", np.full(8, 2, np.float32))
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * 2
    np.testing.assert_allclose(ln(x).numpy(), want, rtol=1e-4, atol=1e-5)
    rms = nn.RMSNorm(8)
    np.testing.assert_allclose(rms(x).numpy(), x / np.sqrt((x**2).mean(1, keepdims=True) + 1e-6), rtol=1e-5)
    np.testing.assert_allclose(nn.ReLU()(x).numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(nn.Softmax()(x).numpy().sum(1), 1, rtol=1e-6)
    drop = nn.Dropout(0.5, seed=1)
    y = drop(np.ones((100, 100), np.float32)).numpy()
    assert set(np.unique(y)) == {0, 2} and drop.eval()(x) is x


def test_sequential_names_parameters_modes():
    m = mlp()
    names = list(m.weights())
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias", "5.weight"]
    assert len(m.parameters()) == 7 and m[3].training
    m.eval()
    assert not m[3].training
    out = m(RNG.standard_normal((2, 8)).astype(np.float32)).numpy()
    assert out.shape == (2, 4) and np.allclose(out.sum(1), 1, rtol=1e-5)


def test_set_weight_checks_name_shape_dtype():
    lin = nn.Linear(3, 2)
    with pytest.raises(errors.InvalidArgumentError, match="'weight'.*shape \\(3, 2\\), expected \\(2, 3\\)"):
        lin.set_weight("weight", np.zeros((3, 2), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="'bias'.*dtype float64"):
        lin.set_weight("bias", np.zeros(2))
    with pytest.raises(errors.InvalidArgumentError, match="unexpected weight 'gamma'"):
        lin.set_weight("gamma", np.zeros(2, np.float32))
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    lin.set_weight("weight", src)
    src[0, 0] = 100  # the layer kept its own copy
    assert lin.get_weight("weight").numpy()[0, 0] == 0


def test_losses_match_numpy():
    logits = RNG.standard_normal((6, 5)).astype(np.float32)
    labels = RNG.integers(0, 5, 6)
    lse = np.log(np.exp(logits.astype(np.float64)).sum(1))
    want = (lse - logits[np.arange(6), labels]).mean()
    assert float(F.cross_entropy(logits, labels)) == pytest.approx(want, rel=1e-5)
    assert F.cross_entropy(logits, labels, reduction="none").shape == (6,)
    a, b = RNG.standard_normal((2, 3, 4))
    assert float(F.mse_loss(a, b)) == pytest.approx(((a - b) ** 2).mean())
    assert float(F.mse_loss(a, b, reduction="sum")) == pytest.approx(((a - b) ** 2).sum())
    with pytest.raises(errors.InvalidArgumentError, match="reduction"):
        F.mse_loss(a, b, reduction="max")


def test_save_load_round_trips_exactly(tmp_path):
    m = mlp(seed=5)
    path = tmp_path / "m.safetensors"
    m.save(path)
    r = nn.load_model(path)
    assert type(r) is nn.Sequential and repr(r) == repr(m)
    for (n1, w1), (n2, w2) in zip(m.named_weights(), r.named_weights()):
        assert n1 == n2 and w1.dtype == w2.dtype
        np.testing.assert_array_equal(w1.numpy(), w2.numpy())
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    m.eval(), r.eval()
    np.testing.assert_array_equal(m(x).numpy(), r(x).numpy())
    fresh = mlp(seed=9).load_weights(path)
    np.testing.assert_array_equal(fresh(x).numpy() if not fresh.eval() else fresh(x).numpy(), m(x).numpy())


def test_loading_is_zero_copy_and_never_writes_the_file(tmp_path):
    lin = nn.Linear(256, 256, seed=0)
    path = tmp_path / "lin.safetensors"
    lin.save(path)
    before = path.read_bytes()
    arrays, meta = nn.read_weights(path)  # what load_model and load_weights use
    assert json.loads(meta["opforge_config"])["class"] == "Linear"
    base = arrays["weight"]
    while not isinstance(base, np.memmap):
        base = base.base
    loaded = nn.Linear(256, 256)
    loaded.set_weights(arrays, copy=False)
    w = loaded.get_weight("weight")
    assert np.shares_memory(w.numpy(), base)  # a view of the mapped file, not a copy
    opt = of.optim.SGD(loaded.parameters(), lr=1.0)
    opt.step(grads=[np.ones((256, 256), np.float32), np.ones(256, np.float32)])
    np.testing.assert_allclose(w.numpy(), lin.get_weight("weight").numpy() - 1, atol=1e-6)
    assert path.read_bytes() == before  # copy-on-write mapping


def write_raw(path, header, data=b""):
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


def corrupt_cases(good):
    n = struct.unpack("<Q", good[:8])[0]
    header = json.loads(good[8:8 + n])
    data = good[8 + n:]
    name = "0.weight"
    yield "truncated", good[:len(good) // 2], "outside|truncated"
    yield "tiny", good[:5], "truncated"
    yield "huge header length", struct.pack("<Q", 2**60) + good[8:], "header length"
    yield "not json", good[:8] + b"{" * n + data, "not valid JSON"
    for field, value, match in [("dtype", "F8_E4M3", "unsupported dtype"), ("shape", [-1, 3], "bad shape"),
                                ("shape", [10**6, 10**6], "needs"), ("data_offsets", [0, 10**9], "outside"),
                                ("data_offsets", "x", "outside")]:
        h = json.loads(json.dumps(header))
        h[name][field] = value
        b = json.dumps(h).encode()
        yield f"bad {field}", struct.pack("<Q", len(b)) + b + data, match
    h = json.loads(json.dumps(header))
    h["0.bias"]["data_offsets"] = h[name]["data_offsets"]
    b = json.dumps(h).encode()
    yield "overlap", struct.pack("<Q", len(b)) + b + data, "overlap|needs"


def test_bad_model_files_raise_naming_the_file_or_weight_and_load_nothing(tmp_path):
    m = nn.Sequential(nn.Linear(4, 3, seed=0), nn.ReLU(), nn.Linear(3, 2, seed=1))
    good_path = tmp_path / "good.safetensors"
    m.save(good_path)
    good = good_path.read_bytes()
    target = nn.Sequential(nn.Linear(4, 3, seed=7), nn.ReLU(), nn.Linear(3, 2, seed=8))
    snapshot = [w.numpy().copy() for w in target.parameters()]
    for label, raw, match in corrupt_cases(good):
        p = tmp_path / "bad.safetensors"
        p.write_bytes(raw)
        for load in (lambda: nn.load_model(p), lambda: target.load_weights(p)):
            with pytest.raises(errors.InvalidArgumentError, match=match) as info:
                load()
            assert "bad.safetensors" in str(info.value), label
    for w, s in zip(target.parameters(), snapshot):
        np.testing.assert_array_equal(w.numpy(), s)
    with pytest.raises(errors.NotFoundError, match="nope.safetensors"):
        nn.load_model(tmp_path / "nope.safetensors")


def test_mismatched_weights_are_named_and_nothing_is_loaded(tmp_path):
    small = nn.Sequential(nn.Linear(4, 3, seed=0), nn.ReLU(), nn.Linear(3, 2, seed=1))
    path = tmp_path / "small.safetensors"
    small.save(path)
    cases = [(nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 5)), "'2.(weight|bias)'.*shape"),
             (nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2, bias=False)), "unexpected weight.*'2.bias'"),
             (nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2), nn.RMSNorm(2)), "missing weight.*'3.weight'"),
             (nn.Sequential(nn.Linear(4, 3, dtype="float64"), nn.ReLU(), nn.Linear(3, 2)), "'0.(weight|bias)'.*dtype")]
    for target, match in cases:
        snapshot = [w.numpy().copy() for w in target.parameters()]
        with pytest.raises(errors.InvalidArgumentError, match=match):
            target.load_weights(path)
        for w, s in zip(target.parameters(), snapshot):
            np.testing.assert_array_equal(w.numpy(), s)
    write_raw(tmp_path / "noconf.safetensors", {})
    with pytest.raises(errors.InvalidArgumentError, match="noconf.safetensors.*opforge_config"):
        nn.load_model(tmp_path / "noconf.safetensors")
    write_raw(tmp_path / "evil.safetensors", {"__metadata__": {"opforge_config": json.dumps({"class": "os.system"})}})
    with pytest.raises(errors.InvalidArgumentError, match="unknown layer class 'os.system'"):
        nn.load_model(tmp_path / "evil.safetensors")


def test_import_opforge_does_not_import_optional_deps():
    import subprocess
    import sys
    code = ("import sys, opforge, opforge.nn, opforge.optim; "
            "print([m for m in ('safetensors', 'sklearn', 'tqdm', 'matplotlib') if m in sys.modules])")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_parameter_copies_exactly_into_writable_memory_of_its_own(dtype):
    # Float weights are copied into opforge's allocator (huge pages for the
    # optimizer's passes), other dtypes by numpy: either way the same bits,
    # no alias of the source, writable in place.
    from opforge.nn.layer import parameter
    src = np.arange(-3, 3, dtype=dtype).reshape(2, 3)
    if src.dtype.kind == "f":
        src[0, 0] = -0.0
        src[1, 2] = np.nan
    p = parameter(src)
    got = np.asarray(p)
    assert got.dtype == src.dtype and got.shape == src.shape
    assert got.tobytes() == src.tobytes() and not np.shares_memory(got, src)
    assert p.requires_grad == (src.dtype.kind == "f")
    src[...] = 7
    assert got.tobytes() != src.tobytes()
    got[0, 1] = 5  # writable: optimizers update it in place
    assert p.numpy()[0, 1] == 5


def test_optimizer_slots_are_zeros_of_each_parameter():
    w = of.nn.Linear(3, 2).parameters()
    for opt, slots in ((of.optim.Adam(w), lambda o: o._m + o._v), (of.optim.SGD(w, lr=0.1, momentum=0.9),
                                                                     lambda o: o._accum)):
        for p, s in zip(w + w, slots(opt)):
            assert s.shape == p.shape and s.dtype == p.dtype and not np.any(s.numpy())
            assert not s.requires_grad
