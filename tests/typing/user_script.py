"""A user script that must type-check under mypy --strict (tests/test_typing.py).

Each op must be typed precisely: a Tensor out (or a tuple/list for
several), so Tensor methods chain without Any leaking in.
"""

import pickle

import numpy as np
import numpy.typing as npt

import opforge as of


def normalize(x: npt.NDArray[np.float32]) -> of.Tensor:
    t: of.Tensor = of.tensor(x)
    centered = of.sub(t, of.mean(t, axis=[0], keepdims=True))
    return centered / of.sqrt(of.mean(of.square(centered), axis=0, keepdims=True) + 1e-6)


def summary(t: of.Tensor) -> str:
    total: of.Tensor = t.sum()
    shape: tuple[int, ...] = t.shape
    dtype: of.DType = t.dtype
    return f"{total:.3f} {shape} {dtype.name} {t.nbytes} {t.itemsize}"


def round_trip(t: of.Tensor) -> of.Tensor:
    copied: of.Tensor = pickle.loads(pickle.dumps(t, protocol=5))
    view = np.from_dlpack(of.from_dlpack(copied))
    return of.tensor(view, dtype=of.float32)


def rows(t: of.Tensor) -> list[float]:
    return [float(row.sum()) for row in t]


x = np.arange(6, dtype=np.float32).reshape(2, 3)
y = normalize(x)
y[0, 0] = 1.0
print(summary(y), rows(round_trip(y)), np.dtype(of.float32), of.matmul(y, y, transpose_b=True).shape)
