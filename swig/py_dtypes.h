// numpy dtypes <-> opforge dtypes, in one place for every binding file.
// bfloat16's numpy dtype is ml_dtypes' (an optional dependency): it is
// recognised by its type's name without importing anything, and imported
// only when a bfloat16 tensor is handed to numpy.
#pragma once

#include "numpy_api.h"
#include "opforge/dtype.h"

namespace opforge {
namespace py {

// The opforge dtype of a numpy dtype; false if opforge has none.
bool DTypeFromDescr(PyArray_Descr* d, DType* out);

// numpy's dtype for t (new reference), or NULL with a Python error set (an
// ImportError naming the extra when bfloat16 needs ml_dtypes and it is absent).
PyArray_Descr* NumpyDescr(DType t);

// The PEP 3118 format of t's elements (bfloat16: its raw bits, "H").
const char* BufferFormat(DType t);

// "float32, float64, ..., uint64" (bfloat16 noted as needing ml_dtypes).
const char* SupportedNumpyDTypes();

}  // namespace py
}  // namespace opforge
