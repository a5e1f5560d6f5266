"""opforge.initializers: Keras's weight initializers on opforge.random.

    >>> import opforge as of
    >>> init = of.initializers.glorot_uniform(seed=1)
    >>> init([64, 32]).shape
    (64, 32)

Each is a class (``GlorotUniform``) with Keras's lowercase alias
(``glorot_uniform``); an instance called with a shape (and dtype) returns a
Tensor. Fans follow Keras: a shape [..., fan_in, fan_out] times the
receptive field (the leading dims), so a PyTorch-layout [out, in] weight
should be drawn as [in, out] and transposed, or pass the fans explicitly.
A seeded initializer repeats its sequence after ``of.random.seed(n)``.
"""

import math

from opforge import errors as _errors
from opforge import ops as _ops
from opforge import random as _random

# The stddev of a unit normal truncated to [-2, 2]: truncated draws are divided by it.
_TRUNC_STD = 0.87962566103423978


def _fans(shape):
    shape = list(shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    rf = 1
    for d in shape[:-2]:
        rf *= d
    return shape[-2] * rf, shape[-1] * rf


class Initializer:
    def __call__(self, shape, dtype="float32"):
        raise NotImplementedError

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Zeros(Initializer):
    def __call__(self, shape, dtype="float32"):
        return _ops.fill(list(shape), _scalar(0, dtype))


class Ones(Initializer):
    def __call__(self, shape, dtype="float32"):
        return _ops.fill(list(shape), _scalar(1, dtype))


class Constant(Initializer):
    def __init__(self, value=0.0):
        self.value = value

    def __call__(self, shape, dtype="float32"):
        return _ops.fill(list(shape), _scalar(self.value, dtype))


class RandomUniform(Initializer):
    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        self.minval, self.maxval, self.seed = minval, maxval, seed

    def __call__(self, shape, dtype="float32"):
        return _random.uniform(shape, self.minval, self.maxval, dtype, self.seed)


class RandomNormal(Initializer):
    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def __call__(self, shape, dtype="float32"):
        return _random.normal(shape, self.mean, self.stddev, dtype, self.seed)


class TruncatedNormal(Initializer):
    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def __call__(self, shape, dtype="float32"):
        return _random.truncated_normal(shape, self.mean, self.stddev, dtype, self.seed)


class VarianceScaling(Initializer):
    """Keras's VarianceScaling: variance scale / n, n the fan_in, fan_out or their mean."""

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None):
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise _errors.InvalidArgumentError(f"VarianceScaling: mode must be fan_in, fan_out or fan_avg, got {mode!r}")
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise _errors.InvalidArgumentError(
                f"VarianceScaling: distribution must be truncated_normal, untruncated_normal or uniform, got {distribution!r}")
        if not scale > 0:
            raise _errors.InvalidArgumentError(f"VarianceScaling: scale must be > 0, got {scale}")
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed

    def __call__(self, shape, dtype="float32"):
        fan_in, fan_out = _fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[self.mode]
        variance = self.scale / max(1.0, n)
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * variance)
            return _random.uniform(shape, -limit, limit, dtype, self.seed)
        if self.distribution == "untruncated_normal":
            return _random.normal(shape, 0.0, math.sqrt(variance), dtype, self.seed)
        return _random.truncated_normal(shape, 0.0, math.sqrt(variance) / _TRUNC_STD, dtype, self.seed)


class GlorotUniform(VarianceScaling):
    def __init__(self, seed=None):
        super().__init__(1.0, "fan_avg", "uniform", seed)


class GlorotNormal(VarianceScaling):
    def __init__(self, seed=None):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed)


class HeUniform(VarianceScaling):
    def __init__(self, seed=None):
        super().__init__(2.0, "fan_in", "uniform", seed)


class HeNormal(VarianceScaling):
    def __init__(self, seed=None):
        super().__init__(2.0, "fan_in", "truncated_normal", seed)


class LecunNormal(VarianceScaling):
    def __init__(self, seed=None):
        super().__init__(1.0, "fan_in", "truncated_normal", seed)


class LecunUniform(VarianceScaling):
    def __init__(self, seed=None):
        super().__init__(1.0, "fan_in", "uniform", seed)


def _scalar(value, dtype):
    import numpy as np
    from opforge import dtypes
    return np.asarray(value, dtype=dtypes.as_dtype(dtype).name)


def get(identifier):
    """An initializer from its name ('he_normal'), an instance, or a callable."""
    if isinstance(identifier, str):
        cls = globals().get(identifier)
        if not (isinstance(cls, type) and issubclass(cls, Initializer)):
            raise _errors.InvalidArgumentError(f"initializers.get: unknown initializer {identifier!r}")
        return cls()
    if callable(identifier):
        return identifier
    raise _errors.InvalidArgumentError(f"initializers.get: cannot interpret {identifier!r} as an initializer")


zeros, ones, constant = Zeros, Ones, Constant
random_uniform, random_normal, truncated_normal = RandomUniform, RandomNormal, TruncatedNormal
variance_scaling = VarianceScaling
glorot_uniform, glorot_normal, he_uniform, he_normal = GlorotUniform, GlorotNormal, HeUniform, HeNormal
lecun_normal, lecun_uniform = LecunNormal, LecunUniform
