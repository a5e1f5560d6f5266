"""ONNX TfIdfVectorizer over integer token ids (string pools are refused:
opforge has no string dtype), composed of opforge ops with index arrays
computed at import (a static row length C).

An n-gram of the pool is counted at each start s and skip distance d
(1..max_skip_count+1; unigrams only at d = 1, as the reference walks its
trie) where x[s + k*d] equals its k-th token for every k < n: one gather of
the strided windows, an equality against the pool's n-grams, a sum over the
starts, and a MatMul onto the output slots (ngram_indexes).
"""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx import _take
from opforge.onnx._node import FLOATS, INT, INTS, STRING, converter, dtype_of, shape_of

STRINGS = 8


def _check(n):
    if any(a.name == "pool_strings" for a in n.node.attribute):
        raise n.fail("pool_strings: opforge has no string dtype (token ids in pool_int64s only)",
                     UnimplementedError)
    if n.attr("mode") not in ("TF", "IDF", "TFIDF"):
        raise n.fail(f"mode must be TF, IDF or TFIDF, got {n.attr('mode')!r}")
    lo, hi = n.attr("min_gram_length", 0), n.attr("max_gram_length", 0)
    if not 1 <= lo <= hi or n.attr("max_skip_count", 0) < 0:
        raise n.fail(f"min_gram_length {lo}, max_gram_length {hi} and max_skip_count must satisfy "
                     "1 <= min <= max and skip >= 0")


@converter("TfIdfVectorizer", (9,), {"max_gram_length": INT, "max_skip_count": INT, "min_gram_length": INT,
                                      "mode": STRING, "ngram_counts": INTS, "ngram_indexes": INTS,
                                      "pool_int64s": INTS, "pool_strings": STRINGS, "weights": FLOATS},
           check=_check)
def _tfidf(n):
    x = n.input(0)
    shape = shape_of(x)
    if len(shape) not in (1, 2) or None in shape:
        raise n.fail(f"X must be [C] or [B, C] with static dims, got {list(shape)}", UnimplementedError)
    if dtype_of(x).kind not in "iu":
        raise n.fail(f"X of {dtype_of(x)} is not supported (integer token ids only)", UnimplementedError)
    rows, c = (1, shape[0]) if len(shape) == 1 else shape
    x2 = P.reshape(P.cast(x, dtype=np.dtype(np.int64)), shape=[rows, c])
    pool = np.array(n.attr("pool_int64s", []), np.int64)
    starts = list(n.attr("ngram_counts", [])) + [len(pool)]
    slots = np.array(n.attr("ngram_indexes", []), np.int64)
    width = int(slots.max()) + 1 if slots.size else 0
    lo, hi, skips = n.attr("min_gram_length"), n.attr("max_gram_length"), n.attr("max_skip_count", 0)
    per_entry = []  # [rows, entries] count tensors, in pool order
    for size in range(1, len(starts)):  # the pool's size-grams: pool[starts[size-1]:starts[size]]
        grams = pool[starts[size - 1]:starts[size]].reshape(-1, size)
        if not len(grams):
            continue
        found = None
        for d in range(1, (skips + 1 if size > 1 else 1) + 1) if lo <= size <= hi else ():
            span = c - (size - 1) * d
            if span <= 0:
                break
            idx = (np.arange(span)[:, None] + d * np.arange(size)[None, :]).reshape(-1).astype(np.int64)
            win = P.reshape(_take.take(x2, idx, 1), shape=[rows, span, size, 1])
            hit = P.cast(P.equal(win, grams.T.reshape(1, 1, size, -1)), dtype=np.dtype(np.int32))
            match = P.cast(P.equal(P.sum(hit, axis=[2]), np.int32(size)), dtype=np.dtype(np.float32))
            part = P.sum(match, axis=[1])  # [rows, len(grams)]
            found = part if found is None else P.add(found, part)
        per_entry.append(found if found is not None else np.zeros((rows, len(grams)), np.float32))
    entries = sum(shape_of(v)[1] for v in per_entry)
    counts = P.concat(per_entry, axis=1) if len(per_entry) > 1 else per_entry[0] if per_entry else \
        np.zeros((rows, 0), np.float32)
    # The weights belong to the pool's n-grams (the i-th weight to the i-th n-gram).
    weights = np.array(n.attr("weights", []), np.float32)
    mode = n.attr("mode")
    if mode == "IDF":
        present = P.cast(P.greater(counts, np.float32(0)), dtype=np.dtype(np.float32))
        counts = P.mul(present, weights) if weights.size else present
    elif mode == "TFIDF" and weights.size:
        counts = P.mul(counts, weights)
    onto = np.zeros((entries, width), np.float32)
    onto[np.arange(entries), slots[:entries]] = 1
    counts = P.mat_mul(counts, onto) if entries else np.zeros((rows, width), np.float32)
    return P.reshape(counts, shape=[width]) if len(shape) == 1 else counts
