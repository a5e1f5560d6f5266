// DLPack for the dtypes numpy's DLPack support cannot carry (bfloat16):
// opforge's own exporter and importer, CPU memory, no copies where the
// producer's layout is row-major. numpy's exporter and importer serve every
// other dtype (pkg/opforge/tensor.py).
#pragma once

#include "numpy_api.h"
#include "opforge/tensor.h"

namespace opforge {
namespace py {

// A "dltensor_versioned" capsule (DLPack 1.0; read_only sets the flag) when
// versioned, else a legacy "dltensor" one, sharing `tensor`'s memory.
PyObject* DLPackExport(PyObject* tensor, int versioned);
// A Tensor sharing the memory of a DLPack capsule (either kind), which it
// consumes; strided producers are copied. Raises BufferError for devices,
// dtypes and versions it cannot take.
PyObject* DLPackImport(PyObject* capsule);
// Same, into *out, for the binder's input conversion (false: error set).
bool TensorFromDLPackCapsule(PyObject* capsule, Tensor* out);

}  // namespace py
}  // namespace opforge
