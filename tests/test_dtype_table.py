"""The dtype table and the promotion table next to it (issue 25 item 1).

The expected promotion table is written out here by hand from the Array
API's tables (same-kind pairs) and JAX's lattice (bfloat16, int with float),
not derived by the rule the C++ uses.
"""
import subprocess
import sys

import numpy as np
import pytest

import opforge as of

NAMES = ["float32", "float64", "int32", "int64", "bool", "float16", "bfloat16", "int8", "uint8", "int16",
         "uint16", "uint32", "uint64"]

# Rows and columns in this order; "-" where no promotion is defined.
ORDER = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "float16", "bfloat16", "float32", "float64"]
_ = "-"
TABLE = {
    # Array API: bool only with bool; we (as JAX) let bool join anything as the other type.
    "bool":     ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "bfloat16", "float32", "float64"],
    # Array API integer table (signed x unsigned: the smallest signed type holding both; i* x u64 undefined).
    "int8":     ["int8", "int8", "int16", "int32", "int64", "int16", "int32", "int64", _,
                 "float16", "bfloat16", "float32", "float64"],
    "int16":    ["int16", "int16", "int16", "int32", "int64", "int16", "int32", "int64", _,
                 "float16", "bfloat16", "float32", "float64"],
    "int32":    ["int32", "int32", "int32", "int32", "int64", "int32", "int32", "int64", _,
                 "float16", "bfloat16", "float32", "float64"],
    "int64":    ["int64", "int64", "int64", "int64", "int64", "int64", "int64", "int64", _,
                 "float16", "bfloat16", "float32", "float64"],
    "uint8":    ["uint8", "int16", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "bfloat16", "float32", "float64"],
    "uint16":   ["uint16", "int32", "int32", "int32", "int64", "uint16", "uint16", "uint32", "uint64",
                 "float16", "bfloat16", "float32", "float64"],
    "uint32":   ["uint32", "int64", "int64", "int64", "int64", "uint32", "uint32", "uint32", "uint64",
                 "float16", "bfloat16", "float32", "float64"],
    "uint64":   ["uint64", _, _, _, _, "uint64", "uint64", "uint64", "uint64",
                 "float16", "bfloat16", "float32", "float64"],
    # Floats: the wider; float16 x bfloat16 -> float32 (JAX). Int x float -> the float (JAX).
    "float16":  ["float16"] * 9 + ["float16", "float32", "float32", "float64"],
    "bfloat16": ["bfloat16"] * 9 + ["float32", "bfloat16", "float32", "float64"],
    "float32":  ["float32"] * 9 + ["float32", "float32", "float32", "float64"],
    "float64":  ["float64"] * 9 + ["float64", "float64", "float64", "float64"],
}


def test_the_table_lists_every_dtype_with_python_names():
    assert [row[0] for row in of.dtypes._pywrap_internal.dtype_table()] == NAMES
    for name in NAMES:
        d = getattr(of, "bool_" if name == "bool" else name)
        assert d is of.as_dtype(name) and d.name == name
    assert of.float16.itemsize == of.bfloat16.itemsize == 2 and of.int8.itemsize == 1
    assert of.bfloat16.is_floating and not of.bfloat16.is_integer and of.uint64.is_integer


@pytest.mark.parametrize("a", ORDER)
def test_promotion_table_row(a):
    for b, want in zip(ORDER, TABLE[a]):
        if want == _:
            with pytest.raises(TypeError, match=f"no promotion for {a} with {b}"):
                of.promote_types(a, b)
        else:
            assert of.promote_types(a, b) is of.as_dtype(want), (a, b)
            assert of.promote_types(b, a) is of.as_dtype(want), (b, a)


def test_promotion_agrees_with_numpy_where_the_array_api_does():
    # Same-kind pairs without bfloat16: numpy and the Array API agree.
    for a in ORDER:
        for b in ORDER:
            if "bfloat16" in (a, b) or TABLE[a][ORDER.index(b)] == _:
                continue
            kinds = {np.dtype(a).kind, np.dtype(b).kind}
            if kinds <= {"i", "u"} or kinds == {"f"} or a == b:
                assert of.promote_types(a, b) == np.promote_types(a, b), (a, b)


def test_result_type_folds_and_reads_dtype_attributes():
    assert of.result_type(of.int8, of.uint8, of.float16) is of.float16
    assert of.result_type(np.ones(2, np.int8), "uint8") is of.int16
    assert of.result_type(of.float16, of.bfloat16) is of.float32
    with pytest.raises(TypeError):
        of.result_type()


def test_import_opforge_does_not_import_ml_dtypes():
    code = ("import sys, opforge as of; assert 'ml_dtypes' not in sys.modules; "
            "assert of.bfloat16.itemsize == 2 and of.as_dtype('bfloat16') is of.bfloat16; "
            "x = of.cast(of.ones((2,)), of.bfloat16); assert x.dtype is of.bfloat16; "
            "assert 'ml_dtypes' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


NUMPY_NATIVE = ["float16", "int8", "uint8", "int16", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("name", NUMPY_NATIVE + ["bfloat16"])
def test_numpy_interop_shares_memory_both_ways(name):
    if name == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        np_dtype = np.dtype(ml_dtypes.bfloat16)
    else:
        np_dtype = np.dtype(name)
    a = np.arange(6).astype(np_dtype).reshape(2, 3)
    t = of.identity(a)
    assert t.dtype is getattr(of, name) and t.dtype == np_dtype and of.as_dtype(np_dtype) is t.dtype
    v = t.numpy()
    assert v.dtype == np_dtype and np.shares_memory(v, a)  # borrowed in, viewed out: no copy
    np.testing.assert_array_equal(v.astype(np.float64), a.astype(np.float64))
    assert np.dtype(getattr(of, name)) == np_dtype
    z = of.zeros((2,), dtype=getattr(of, name))
    assert z.dtype is getattr(of, name) and z.numpy().tolist() == [0, 0]


def test_bfloat16_numpy_without_ml_dtypes_names_the_extra():
    code = ("import sys; sys.modules['ml_dtypes'] = None\n"
            "import opforge as of\n"
            "x = of.cast(of.ones((2,)), of.bfloat16)\n"
            "assert of.cast(x, of.float32).numpy().tolist() == [1.0, 1.0]\n"
            "try:\n    x.numpy()\nexcept ImportError as e:\n    assert 'opforge[ml_dtypes]' in str(e), e\n"
            "else:\n    raise SystemExit('no ImportError')\n"
            "try:\n    of.bfloat16.as_numpy_dtype\nexcept ImportError as e:\n"
            "    assert 'opforge[ml_dtypes]' in str(e), e\n"
            "else:\n    raise SystemExit('no ImportError')\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_dtypes_pickle_as_themselves():
    import pickle
    for name in NAMES:
        d = of.as_dtype(name)
        assert pickle.loads(pickle.dumps(d)) is d


# ---- Cast between every pair (issue 25 items 2 and 5) ------------------------------------------

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 1.5, -2.5, 2.5, 100.7, -100.7, 127.0, 128.0, -129.0, 255.0, 256.0,
                    300.0, -300.0, 32767.0, 32768.0, -32769.0, 65504.0, 70000.0, 3.0e9, -3.0e9, 1.0e20, -1.0e20,
                    np.inf, -np.inf, np.nan])
INTS = np.array([0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 65535, 65536, 2**31 - 1,
                 -2**31, 2**40 + 3, -2**40, 2**63 - 1, -2**63])


def np_dtype(name):
    if name == "bfloat16":
        return np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    return np.dtype(name)


def reference_cast(x, name):
    """numpy/ml_dtypes' astype, with Cast's documented rule where numpy's is platform-defined:
    a float to an 8/16-bit or unsigned int saturates (NaN -> 0)."""
    target = np_dtype(name)
    floating = x.dtype.kind in "fV"
    if not floating or target.kind not in "iu" or name in ("int32", "int64"):
        return x.astype(target)
    xf = x.astype(np.float64)
    info = np.iinfo(target)
    out = np.zeros(x.shape, target)
    lo, hi = xf <= info.min, xf >= float(info.max // 2 + 1) * 2
    mid = ~(np.isnan(xf) | lo | hi)
    out[mid] = np.trunc(xf[mid]).astype(target)
    out[lo], out[hi] = info.min, info.max
    return out


def source_values(name):
    d = np_dtype(name)
    if name == "bool":
        return np.array([True, False, True])
    if d.kind in "iu":
        info = np.iinfo(d)
        return INTS[(INTS >= info.min) & (INTS <= info.max)].astype(d)
    with np.errstate(over="ignore"):
        return SPECIAL.astype(d)


@pytest.mark.parametrize("src", NAMES)
def test_cast_every_pair_matches_numpy_and_ml_dtypes(src):
    x = source_values(src)
    for dst in NAMES:
        with np.errstate(all="ignore"):
            want = reference_cast(x, dst)
        got = of.cast(x, getattr(of, "bool_" if dst == "bool" else dst)).numpy()
        assert got.dtype == want.dtype, (src, dst)
        if want.dtype.kind in "fV":
            np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64), err_msg=f"{src}->{dst}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{src}->{dst}")


def test_cast_to_narrow_ints_saturates_and_nan_becomes_zero():
    x = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 3.9, -3.9], np.float32)
    assert of.cast(x, of.int8).numpy().tolist() == [0, 127, -128, 127, -128, 3, -3]
    assert of.cast(x, of.uint8).numpy().tolist() == [0, 255, 0, 255, 0, 3, 0]
    assert of.cast(x, of.int16).numpy().tolist() == [0, 32767, -32768, 32767, -32768, 3, -3]
    # int32/int64 keep numpy's x86 answer: the minimum for NaN and out-of-range.
    assert of.cast(x[:3], of.int32).numpy().tolist() == [-2**31] * 3
    # Integer narrowing wraps like numpy.
    assert of.cast(np.array([300, -1], np.int32), of.uint8).numpy().tolist() == [44, 255]


def test_bfloat16_rounds_to_nearest_even():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    # float32 bit patterns exactly between two bfloat16 values, and one bit either side.
    bits = np.array([0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0x7f7fffff, 0x00008000, 0x80018000],
                    np.uint32)
    x = bits.view(np.float32)
    got = of.cast(x, of.bfloat16).numpy().view(np.uint16)
    want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert got.tolist() == want.tolist() == [0x3f80, 0x3f82, 0x3f81, 0x3f80, 0x7f80, 0x0000, 0x8002]
    # From float64 too: rounded once (round-to-odd inside), not twice through float32.
    d = np.array([1.0 + 2**-8 + 2**-40, 1.0 + 2**-8], np.float64)  # just above a tie, and a tie
    assert of.cast(d, of.bfloat16).numpy().view(np.uint16).tolist() == [0x3f81, 0x3f80]
    assert of.cast(np.array([2049.0, 2051.0, 65519.0, 65520.0]), of.float16).numpy().tolist() == [
        2048.0, 2052.0, 65504.0, np.inf]
