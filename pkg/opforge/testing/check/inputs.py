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

NP = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64, "bool": np.bool_}

# Float specials ride along with ordinary values; reductions and products get
# small magnitudes so float32 accumulation order cannot overflow differently.
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0]


def elements(dtype, small=False, finite=False):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        width = 32 if dtype == np.float32 else 64
        bound = 8.0 if small else (2.0**100 if width == 32 else 2.0**1000)
        values = st.floats(-bound, bound, width=width)
        return values if finite else st.one_of(values, st.sampled_from(SPECIALS))
    if dtype.kind == "i":
        info = np.iinfo(dtype)
        if small:
            return st.integers(-3, 3)
        return st.one_of(st.integers(-4, 4), st.integers(int(info.min), int(info.max)))
    return st.booleans()


def shapes(min_rank=0, max_rank=4, max_side=4):
    return hnp.array_shapes(min_dims=min_rank, max_dims=max_rank, min_side=0, max_side=max_side)


def array(draw, dtype, shape, small=False, finite=False):
    return draw(hnp.arrays(np.dtype(dtype), shape, elements=elements(dtype, small, finite)))


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
