"""Type aliases used by the generated .pyi stubs."""

from typing import Sequence, Union

import numpy as np

from opforge.dtypes import DType

TensorLike = Union["opforge.Tensor", np.ndarray, np.generic, bool, int, float, Sequence]
DTypeLike = Union[DType, np.dtype, type, str]
