"""test_bad_input oracle for Unique (robustness_oracles.py merges it into ORACLES): rows grouped in
Python, NaN equal to NaN and last, -0.0 equal to 0.0."""
import builtins
import functools
import math

import numpy as np
from hypothesis import strategies as st

from opforge.testing.check.inputs import array, quiet


def _unique_gen(draw, dtype):
    rank = 2 if draw(st.integers(0, 9)) else draw(st.sampled_from([1, 3]))
    shape = tuple(draw(st.integers(0, 5)) for _ in range(rank))
    return (array(draw, dtype, shape, small=True),), {"sorted": draw(st.booleans())}


def _cmp(a, b):
    na = isinstance(a, float) and math.isnan(a)
    nb = isinstance(b, float) and math.isnan(b)
    if na or nb:
        return 0 if na == nb else (1 if na else -1)
    return -1 if a < b else (1 if b < a else 0)


@quiet
def unique(x, sorted):  # noqa: A002 -- the attr's name
    if x.ndim != 2:
        raise ValueError("rank")
    n, m = x.shape
    rows = [[v.item() for v in x[i]] for i in range(n)]

    def row_cmp(a, b):
        for u, v in zip(rows[a], rows[b]):
            c = _cmp(u, v)
            if c:
                return c
        return 0
    order = builtins.sorted(range(n), key=functools.cmp_to_key(row_cmp))  # stable
    groups = []  # [first index, size]
    group_of = [0] * n
    for k, r in enumerate(order):
        if k == 0 or row_cmp(order[k - 1], r):
            groups.append([r, 0])
        groups[-1][1] += 1
        group_of[r] = len(groups) - 1
    rank = list(range(len(groups)))
    if not sorted:
        by_first = builtins.sorted(range(len(groups)), key=lambda g: groups[g][0])
        for p, g in enumerate(by_first):
            rank[g] = p
    y = np.zeros_like(x)
    idx = np.full(n, -1, np.int64)
    cnt = np.zeros(n, np.int64)
    for g, (first, size) in enumerate(groups):
        y[rank[g]] = x[first]
        idx[rank[g]] = first
        cnt[rank[g]] = size
    inv = np.array([rank[group_of[i]] for i in range(n)], np.int64)
    return y, idx, inv, cnt, np.array(len(groups), np.int64)


UNIQUE_ORACLES = {"Unique": (_unique_gen, unique)}
