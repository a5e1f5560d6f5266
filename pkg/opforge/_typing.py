"""Type aliases used by the .pyi stubs (never imported by `import opforge`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Union

import numpy as np
import numpy.typing as npt

from opforge.dtypes import DType

if TYPE_CHECKING:
    from opforge.tensor import Tensor


class SupportsDLPack(Protocol):
    def __dlpack__(self, *, stream: Any = ...) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...


# What an op input accepts: Tensors, anything numpy reads (arrays, scalars,
# nested sequences, __array__ / buffer objects) and DLPack producers.
TensorLike = Union["Tensor", npt.ArrayLike, SupportsDLPack]
DTypeLike = Union[DType, "np.dtype[Any]", type, str]
