"""opforge.random: seeded random tensors on the Philox ops (cpp/ops/random_ops.cc).

    >>> import opforge as of
    >>> of.random.seed(0)
    >>> a = of.random.normal([2, 3])
    >>> of.random.seed(0)
    >>> bool((of.random.normal([2, 3]) == a).numpy().all())
    True

Seeds follow TensorFlow's rules (``tf.random.set_seed``):

- global seed set, op seed not: each call draws the next stream of the global
  sequence; ``seed(n)`` restarts that sequence.
- op seed set: the op has a sequence of its own keyed by (global seed, op
  seed); calling it again draws the next stream, and ``seed(n)`` restarts it,
  so a program that passes op seeds repeats run after run.
- neither set: a global seed is drawn from the OS at import.

Every value is a pure function of (seed, stream, index) (Philox4x32-10), so
results do not depend on the number of threads.

Graph mode: each op *node* gets its stream when it is added to the graph, so
two nodes differ and a rebuilt graph repeats. Random ops are stateful: a
node draws fresh numbers on every ``Session.run`` (a per-Session draw counter
moves its stream on), the first run draws what eager mode would, and a new
Session repeats the same sequence.
"""

import os
import threading

from opforge import dtypes as _dtypes
from opforge import errors as _errors
from opforge import ops as _ops

_lock = threading.Lock()
_DEFAULT_GLOBAL = 87654321  # TensorFlow's DEFAULT_GRAPH_SEED: op seed without a global seed
_global_seed: int | None = None
_entropy_seed = int.from_bytes(os.urandom(8), "little") >> 1
_counters: dict[tuple[int, int | None], int] = {}  # (global, op seed) -> streams drawn so far


def seed(n):
    """Sets the global seed and restarts every op's sequence (``tf.random.set_seed``)."""
    global _global_seed
    if isinstance(n, bool) or not isinstance(n, int):
        raise _errors.InvalidArgumentError(f"random.seed: the seed must be an int, got {type(n).__name__}")
    with _lock:
        _global_seed = n & ((1 << 63) - 1)
        _counters.clear()


def manual_seed(n):
    """PyTorch's name for :func:`seed`."""
    seed(n)


def get_seed(op_seed=None):
    """The (seed, seed2) attrs the next random op called with `op_seed` would get; advances the sequence."""
    if op_seed is not None and (isinstance(op_seed, bool) or not isinstance(op_seed, int)):
        raise _errors.InvalidArgumentError(f"random: seed must be an int or None, got {type(op_seed).__name__}")
    with _lock:
        if _global_seed is None:
            g = _entropy_seed if op_seed is None else _DEFAULT_GLOBAL
        else:
            g = _global_seed
        key = (g, op_seed)
        stream = _counters.get(key, 0)
        _counters[key] = stream + 1
    mixed = g if op_seed is None else (g * 0x9E3779B97F4A7C15 + (op_seed & ((1 << 64) - 1))) & ((1 << 63) - 1)
    return mixed, stream


def _shape(shape, fn):
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = [int(d) for d in shape]
    except (TypeError, ValueError):
        raise _errors.InvalidArgumentError(f"random.{fn}: shape must be a sequence of ints, got {shape!r}") from None
    for d in shape:
        if d < 0:
            raise _errors.InvalidArgumentError(f"random.{fn}: shape {shape} has a negative dim")
    return shape


def _float_dtype(dtype, fn):
    d = _dtypes.as_dtype(dtype)
    if d.name not in ("float32", "float64"):
        raise _errors.InvalidArgumentError(f"random.{fn}: dtype must be float32 or float64, got {d.name}")
    return d.name


def _affine(x, scale, shift):
    if scale != 1:
        x = _ops.mul(x, scale)
    if shift != 0:
        x = _ops.add(x, shift)
    return x


def uniform(shape, minval=0.0, maxval=1.0, dtype="float32", seed=None):
    """Uniform values in [minval, maxval) (``tf.random.uniform``; int dtypes draw integers)."""
    d = _dtypes.as_dtype(dtype)
    if d.name in ("int32", "int64"):
        return randint(int(minval), int(maxval), shape, dtype=d.name, seed=seed)
    shape, name = _shape(shape, "uniform"), _float_dtype(dtype, "uniform")
    if not maxval >= minval:
        raise _errors.InvalidArgumentError(f"random.uniform: maxval ({maxval}) must be >= minval ({minval})")
    s1, s2 = get_seed(seed)
    return _affine(_ops.random_uniform(shape, name, s1, s2), maxval - minval, minval)


def normal(shape, mean=0.0, stddev=1.0, dtype="float32", seed=None):
    """Normal values (``tf.random.normal``)."""
    shape, name = _shape(shape, "normal"), _float_dtype(dtype, "normal")
    if not stddev >= 0:
        raise _errors.InvalidArgumentError(f"random.normal: stddev must be >= 0, got {stddev}")
    s1, s2 = get_seed(seed)
    return _affine(_ops.random_standard_normal(shape, name, s1, s2), stddev, mean)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype="float32", seed=None):
    """Normal values within two standard deviations of the mean (``tf.random.truncated_normal``)."""
    shape, name = _shape(shape, "truncated_normal"), _float_dtype(dtype, "truncated_normal")
    if not stddev >= 0:
        raise _errors.InvalidArgumentError(f"random.truncated_normal: stddev must be >= 0, got {stddev}")
    s1, s2 = get_seed(seed)
    return _affine(_ops.truncated_normal(shape, name, s1, s2), stddev, mean)


def randint(low, high=None, size=(), dtype="int64", seed=None):
    """Integers in [low, high) (``torch.randint``: randint(high, size) or randint(low, high, size))."""
    if high is None:
        low, high = 0, low
    size = _shape(size, "randint")
    d = _dtypes.as_dtype(dtype)
    if d.name not in ("int32", "int64"):
        raise _errors.InvalidArgumentError(f"random.randint: dtype must be int32 or int64, got {d.name}")
    s1, s2 = get_seed(seed)
    return _ops.random_uniform_int(size, int(low), int(high), d.name, s1, s2)


def shuffle(x, seed=None):
    """x with its rows (dim 0) in a random order (``tf.random.shuffle``)."""
    s1, s2 = get_seed(seed)
    return _ops.random_shuffle(x, s1, s2)


def permutation(n, dtype="int64", seed=None):
    """A random permutation of range(n) (``torch.randperm``, ``np.random.permutation``)."""
    import numpy as np
    n = int(n)
    if n < 0:
        raise _errors.InvalidArgumentError(f"random.permutation: n must be >= 0, got {n}")
    if n == 0:
        return _ops.identity(np.zeros(0, dtype=_dtypes.as_dtype(dtype).name))
    return shuffle(np.arange(n, dtype=_dtypes.as_dtype(dtype).name), seed)


__all__ = ["seed", "manual_seed", "get_seed", "uniform", "normal", "truncated_normal", "randint", "shuffle",
           "permutation"]
