"""The reduced-precision dtypes through DLPack, pickle, checkpoints and the
stubs (issue 25 item 1). numpy's DLPack carries float16 and the integers;
bfloat16, which it cannot, goes through opforge's own exporter/importer
(swig/py_dlpack.cc), checked against torch and by memory address."""
import gc
import pickle
import subprocess
import sys

import numpy as np
import pytest

import opforge as of

NUMPY_KINDS = ["float16", "int8", "uint8", "int16", "uint16", "uint32", "uint64"]
VALUES = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]], np.float32)


def _make(name):
    return of.cast(VALUES if "int" not in name else VALUES.round(), dtype=of.as_dtype(name))


def _as64(t):
    return of.cast(t, dtype=of.float64).numpy()


@pytest.mark.parametrize("name", NUMPY_KINDS)
def test_numpy_dlpack_both_ways(name):
    t = _make(name)
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(name)
    np.testing.assert_array_equal(a.astype(np.float64), _as64(t))
    back = of.from_dlpack(a)
    assert back.dtype is of.as_dtype(name)
    assert back.numpy().__array_interface__["data"][0] == a.__array_interface__["data"][0]


def test_bfloat16_dlpack_capsules_round_trip_without_copies():
    t = _make("bfloat16")
    for versioned in (0, 1):
        cap = of._pywrap_internal.dlpack_export(t, versioned)
        u = of._pywrap_internal.dlpack_import(cap)
        assert u.dtype is of.bfloat16 and u.shape == (2, 3)
        np.testing.assert_array_equal(_as64(u), VALUES)
        with pytest.raises(BufferError, match="unconsumed"):
            of._pywrap_internal.dlpack_import(cap)  # a capsule is consumed once
    u = of.from_dlpack(t)
    del t
    gc.collect()
    np.testing.assert_array_equal(_as64(u), VALUES)  # the capsule kept the memory alive
    unused = _make("bfloat16").__dlpack__(max_version=(1, 0))
    del unused  # an unconsumed capsule frees what it holds (ASan checks)
    gc.collect()


def test_bfloat16_dlpack_with_torch():
    torch = pytest.importorskip("torch")
    t = _make("bfloat16")
    tt = torch.from_dlpack(t)
    assert tt.dtype == torch.bfloat16
    np.testing.assert_array_equal(tt.float().numpy(), VALUES)
    tt[0, 0] = 7.0  # the same memory
    assert _as64(t)[0, 0] == 7.0
    src = torch.tensor([[1.5, 2.5, 3.5], [-4.0, 0.0, 1e30]], dtype=torch.bfloat16)
    back = of.from_dlpack(src)
    assert back.dtype is of.bfloat16
    np.testing.assert_array_equal(_as64(back), src.double().numpy())
    src[0, 0] = 9.0
    assert _as64(back)[0, 0] == 9.0  # borrowed, not copied
    strided = of.from_dlpack(src.t())  # a transposed producer is copied row-major
    np.testing.assert_array_equal(_as64(strided), src.t().double().numpy())
    # torch's bfloat16 as an op input; promotion with float16 gives float32
    r = of.add(src, torch.ones(2, 3, dtype=torch.float16))
    assert r.dtype is of.float32
    np.testing.assert_array_equal(r.numpy(), src.float().numpy() + 1)
    for name in NUMPY_KINDS:
        x = of.from_dlpack(torch.ones(3, dtype=getattr(torch, name)))
        assert x.dtype is of.as_dtype(name)
        assert torch.from_dlpack(_make(name)).dtype == getattr(torch, name)


def test_bfloat16_with_ml_dtypes_arrays():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([1.0, -2.5, 3.0], ml_dtypes.bfloat16)
    t = of.tensor(a)
    assert t.dtype is of.bfloat16 and t.numpy().dtype == a.dtype
    np.testing.assert_array_equal(of.from_dlpack(t).numpy().astype(np.float32), [1.0, -2.5, 3.0])


def test_dlpack_importer_refuses_what_it_cannot_take():
    with pytest.raises(BufferError, match="unconsumed DLPack capsule"):
        of._pywrap_internal.dlpack_import(object())
    with pytest.raises(BufferError, match="CPU"):
        _make("bfloat16").__dlpack__(dl_device=(2, 0))


@pytest.mark.parametrize("name", NUMPY_KINDS + ["bfloat16"])
def test_pickle_keeps_dtype_and_values(name):
    t = _make(name)
    u = pickle.loads(pickle.dumps(t, protocol=5))
    assert u.dtype is t.dtype
    np.testing.assert_array_equal(_as64(u), _as64(t))


def test_pickled_bfloat16_loads_without_ml_dtypes():
    blob = pickle.dumps(_make("bfloat16"))
    code = ("import sys, pickle; sys.modules['ml_dtypes'] = None; import opforge as of; "
            f"t = pickle.loads({blob!r}); assert t.dtype is of.bfloat16; "
            "print(of.cast(t, dtype=of.float32).numpy().tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(VALUES.tolist())


@pytest.mark.parametrize("name", NUMPY_KINDS + ["bfloat16"])
def test_checkpoint_files_store_the_new_dtypes(name, tmp_path):
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    from opforge.train import _safetensors
    arr = _make(name).numpy()
    path = str(tmp_path / "c.safetensors")
    _safetensors.save_file({"w": arr}, path)
    got, _ = _safetensors.load_file(path)
    assert got["w"].dtype == arr.dtype
    np.testing.assert_array_equal(got["w"].astype(np.float64), arr.astype(np.float64))


def test_stubs_name_every_dtype():
    import pathlib
    stub = (pathlib.Path(of.__file__).parent / "dtypes.pyi").read_text()
    for row in of._pywrap_internal.dtype_table():
        name = row[0] if row[0] != "bool" else "bool_"
        assert f"\n{name}: Final[DType]" in stub, name
    assert "def dlpack_export" in (pathlib.Path(of.__file__).parent / "_pywrap_internal.pyi").read_text()
