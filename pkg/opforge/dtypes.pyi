from typing import Any, Final

import numpy as np

class DType:
    name: str
    itemsize: int
    is_floating: bool
    is_integer: bool
    def __init__(self, name: str, enum: int, np_name: str, itemsize: int | None = ...,
                 is_floating: bool | None = ..., is_integer: bool | None = ...) -> None: ...
    @property
    def as_numpy_dtype(self) -> np.dtype[Any]: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, tuple[str]]: ...

float32: Final[DType]
float64: Final[DType]
int32: Final[DType]
int64: Final[DType]
bool_: Final[DType]
float16: Final[DType]
bfloat16: Final[DType]
int8: Final[DType]
uint8: Final[DType]
int16: Final[DType]
uint16: Final[DType]
uint32: Final[DType]
uint64: Final[DType]

def as_dtype(value: DType | np.dtype[Any] | type | str) -> DType: ...
def promote_types(a: DType | np.dtype[Any] | type | str, b: DType | np.dtype[Any] | type | str) -> DType: ...
def result_type(*dtypes: Any) -> DType: ...

__all__ = ["DType", "float32", "float64", "int32", "int64", "bool_", "float16", "bfloat16", "int8", "uint8",
           "int16", "uint16", "uint32", "uint64", "as_dtype", "promote_types", "result_type"]
