"""Input generators shared by the robustness tests and ``opforge check``.

Hypothesis strategies for values of every dtype (float specials ride along
unless ``finite``), shapes that include 0-d and empty ones, and
broadcastable shape sets. tests/robustness_oracles.py builds its per-op
draws from these; the op-library checker draws its cases from them with
:func:`examples` (deterministic, no database).
"""
from __future__ import annotations

import warnings

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

class _NumpyDTypes(dict):
    """opforge dtype name -> numpy dtype; bfloat16 (ml_dtypes) is looked up on first use."""

    def __iter__(self):  # every dtype, bfloat16 included, without importing ml_dtypes
        return iter(NP_NAMES)

    def __len__(self):
        return len(NP_NAMES)

    def __missing__(self, name):
        from opforge import dtypes
        value = dtypes.as_dtype(name).as_numpy_dtype
        self[name] = value
        return value


NP = _NumpyDTypes(float32=np.float32, float64=np.float64, int32=np.int32, int64=np.int64, bool=np.bool_,
                  float16=np.float16, int8=np.int8, uint8=np.uint8, int16=np.int16, uint16=np.uint16,
                  uint32=np.uint32, uint64=np.uint64)
NP_NAMES = ["float32", "float64", "int32", "int64", "bool", "float16", "bfloat16", "int8", "uint8", "int16",
            "uint16", "uint32", "uint64"]


def numpy_dtype(dtype):
    """np.dtype(dtype), also for opforge names numpy lacks (bfloat16)."""
    if isinstance(dtype, str):
        return np.dtype(NP[dtype])
    return np.dtype(dtype)


def _is_bfloat16(dtype):
    return dtype.kind == "V" and dtype.itemsize == 2 and dtype.type.__name__ == "bfloat16"

# Float specials ride along with ordinary values; reductions and products get
# small magnitudes so float32 accumulation order cannot overflow differently.
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0]


def elements(dtype, small=False, finite=False):
    dtype = numpy_dtype(dtype)
    if dtype.kind == "f":
        width = 8 * dtype.itemsize
        bound = 8.0 if small else {16: 6.0e4, 32: 2.0**100, 64: 2.0**1000}[width]
        values = st.floats(-bound, bound, width=width)
        return values if finite else st.one_of(values, st.sampled_from(SPECIALS))
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if small:
            return st.integers(-3 if dtype.kind == "i" else 0, 3)
        return st.one_of(st.integers(max(-4, int(info.min)), 4), st.integers(int(info.min), int(info.max)))
    return st.booleans()


def shapes(min_rank=0, max_rank=4, max_side=4):
    return hnp.array_shapes(min_dims=min_rank, max_dims=max_rank, min_side=0, max_side=max_side)


def array(draw, dtype, shape, small=False, finite=False):
    dtype = numpy_dtype(dtype)
    if _is_bfloat16(dtype):  # hypothesis does not know ml_dtypes' type: draw float32 values bfloat16 holds
        return array(draw, np.float32, shape, small, finite).astype(dtype)
    return draw(hnp.arrays(dtype, shape, elements=elements(dtype, small, finite)))


def broadcastable_shapes(draw, n):
    """Mostly broadcast-compatible shapes, sometimes arbitrary ones."""
    if draw(st.integers(0, 4)) == 0:
        return [draw(shapes()) for _ in range(n)]
    return list(draw(hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=4, min_side=0,
                                                         max_side=4)).input_shapes)


def axis_list(draw, rank):
    """None, one int, or a list that may repeat or leave the valid range."""
    return draw(st.one_of(st.none(), st.integers(-rank - 1, rank),
                          st.lists(st.integers(-rank - 1, rank), max_size=rank + 1)))


def quiet(fn):
    def run(*args, **kwargs):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    return run


def examples(strategy, n):
    """Up to ``n`` values drawn from ``strategy``, the same ones every run."""
    out = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value):
        out.append(value)

    collect()
    return out[:n]
