"""ONNX element types opforge can hold, by TensorProto enum value.

Any other element type (string, complex, float8, int4, ...) makes the
importer raise UnimplementedError rather than compute in a different type.
bfloat16 has no numpy dtype of its own: it comes from the optional
`ml_dtypes` package, imported only when a model uses it.
"""

import numpy as np

# onnx.TensorProto.DataType values (stable across onnx releases).
FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64 = 1, 2, 3, 4, 5, 6, 7
BOOL, FLOAT16, DOUBLE, UINT32, UINT64, BFLOAT16 = 9, 10, 11, 12, 13, 16

NUMPY = {FLOAT: np.dtype(np.float32), INT32: np.dtype(np.int32), INT64: np.dtype(np.int64),
         BOOL: np.dtype(np.bool_), DOUBLE: np.dtype(np.float64), FLOAT16: np.dtype(np.float16),
         UINT8: np.dtype(np.uint8), INT8: np.dtype(np.int8), UINT16: np.dtype(np.uint16),
         INT16: np.dtype(np.int16), UINT32: np.dtype(np.uint32), UINT64: np.dtype(np.uint64)}
BY_NUMPY = {v: k for k, v in NUMPY.items()}

# Which repeated field of a TensorProto holds each type when raw_data is unused.
TYPED_FIELD = {FLOAT: "float_data", INT32: "int32_data", INT64: "int64_data", BOOL: "int32_data",
               DOUBLE: "double_data", FLOAT16: "int32_data", BFLOAT16: "int32_data", UINT8: "int32_data",
               INT8: "int32_data", UINT16: "int32_data", INT16: "int32_data", UINT32: "uint64_data",
               UINT64: "uint64_data"}
# 16-bit floats sit in int32_data as their bit patterns, not their values.
_BITS = {FLOAT16, BFLOAT16}


def _bfloat16():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def onnx_type_name(elem_type):
    """'FLOAT16' for 10 etc.; the name ONNX users know."""
    from onnx import TensorProto
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"<unknown element type {elem_type}>"


def to_numpy(elem_type, what):
    """numpy dtype for an ONNX element type, or UnimplementedError naming `what`."""
    from opforge.errors import UnimplementedError
    if elem_type == BFLOAT16:
        dt = _bfloat16()
        if dt is None:
            raise UnimplementedError(f"{what}: element type BFLOAT16 needs the ml_dtypes package "
                                     "(pip install ml_dtypes)")
        BY_NUMPY.setdefault(dt, BFLOAT16)
        return dt
    try:
        return NUMPY[elem_type]
    except (KeyError, TypeError):
        raise UnimplementedError(
            f"{what}: element type {onnx_type_name(elem_type)} is not supported by opforge (it has "
            "float32, float64, float16, bfloat16, int8/16/32/64, uint8/16/32/64 and bool)") from None


def from_typed_field(elem_type, field, dtype):
    """A TensorProto's typed-field values (not raw_data) as a 1-D array of `dtype`."""
    if elem_type in _BITS:
        return np.array(field, dtype=np.int64).astype(np.uint16).view(dtype)
    return np.array(field, dtype=np.int64 if elem_type == BOOL else None).astype(dtype)
