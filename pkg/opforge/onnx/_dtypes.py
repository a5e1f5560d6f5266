"""ONNX element types opforge can hold, by TensorProto enum value.

Only these five: any other element type (float16, uint8, string, ...) makes
the importer raise UnimplementedError rather than compute in a different type.
"""

import numpy as np

# onnx.TensorProto.DataType values (stable across onnx releases).
FLOAT, INT32, INT64, BOOL, DOUBLE = 1, 6, 7, 9, 11

NUMPY = {FLOAT: np.dtype(np.float32), INT32: np.dtype(np.int32), INT64: np.dtype(np.int64),
         BOOL: np.dtype(np.bool_), DOUBLE: np.dtype(np.float64)}
BY_NUMPY = {v: k for k, v in NUMPY.items()}

# Which repeated field of a TensorProto holds each type when raw_data is unused.
TYPED_FIELD = {FLOAT: "float_data", INT32: "int32_data", INT64: "int64_data",
               BOOL: "int32_data", DOUBLE: "double_data"}


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
    try:
        return NUMPY[elem_type]
    except (KeyError, TypeError):
        raise UnimplementedError(
            f"{what}: element type {onnx_type_name(elem_type)} is not supported by opforge "
            "(it has float32, float64, int32, int64 and bool)") from None
