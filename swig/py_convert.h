// Python -> opforge conversions: op inputs into the binder's BindInputs
// (Tensors, numpy arrays borrowed without copy, Python scalars and nested
// lists as weak values) and typed attrs.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <string>

#include "bind.h"
#include "opforge/attr.h"
#include "opforge/op.h"
#include "opforge/tensor.h"

namespace opforge {
namespace py {

// One argument value as the binder takes it: Tensors (a pending one waits
// for its value unless `keep_pending`), numpy arrays (borrowed, no copy),
// numpy scalars and array-protocol objects are kTensor; Python scalars and
// nested lists are kWeak, at their natural dtype (bool, int64, float64),
// for Bind to give them their partner's. `label` names the argument.
bool ToBindInput(PyObject* obj, const char* op, const std::string& label, bool keep_pending, BindInput* out);
// A list arg (`N * T`): obj must be a list or tuple; out is kList.
bool ToBindListInput(PyObject* obj, const char* op, const ArgDef& arg, bool keep_pending, BindInput* out);

// A C-contiguous, aligned, native-endian array of a supported dtype is
// borrowed (no copy; the array is kept alive); anything else is copied.
bool TensorFromArray(PyObject* array, const char* op, const std::string& arg, Tensor* out);

// An input the op reads transposed under a bool attr (ArgDef::transpose_attr),
// given as a numpy array whose last two axes, swapped, are C-contiguous (w.T,
// x.swapaxes(-1, -2)): borrowed as that C array with those axes swapped, no
// copy, and true; the caller flips the attr (FlipTransposeAttrs). False, with
// nothing set, for any other array: TensorFromArray then borrows or copies it.
bool BorrowTransposed(const ArgDef& arg, PyObject* obj, Tensor* out);
// Flips the transpose attr of each input whose bit is set in `borrowed`.
void FlipTransposeAttrs(const OpDef& op, uint32_t borrowed, AttrValue* attrs);

// True if t's memory is a writable numpy array it borrows: its values may
// change after the op call (the gradient recorder copies such inputs).
bool BorrowsWritableMemory(const Tensor& t);

// True if the buffer borrows a numpy array's memory (releasing it takes the GIL).
bool IsBorrowedFromNumpy(const TensorBuffer* buffer);

// The attr parameter types of the generated SWIG entry points; the typemaps
// in opforge_typemaps.i fill them with ConvertAttr. None means "not given".
struct IntAttr { AttrValue value; };
struct FloatAttr { AttrValue value; };
struct BoolAttr { AttrValue value; };
struct StringAttr { AttrValue value; };
struct TypeAttr { AttrValue value; };
struct ShapeAttr { AttrValue value; };
struct IntListAttr { AttrValue value; };
struct FloatListAttr { AttrValue value; };
struct TypeListAttr { AttrValue value; };

bool ConvertAttr(PyObject* o, const char* op, const char* name, IntAttr* out);
bool ConvertAttr(PyObject* o, const char* op, const char* name, FloatAttr* out);
bool ConvertAttr(PyObject* o, const char* op, const char* name, BoolAttr* out);
bool ConvertAttr(PyObject* o, const char* op, const char* name, StringAttr* out);
bool ConvertAttr(PyObject* o, const char* op, const char* name, TypeAttr* out);
bool ConvertAttr(PyObject* o, const char* op, const char* name, ShapeAttr* out);
bool ConvertAttr(PyObject* o, const char* op, const char* name, IntListAttr* out);
bool ConvertAttr(PyObject* o, const char* op, const char* name, FloatListAttr* out);
bool ConvertAttr(PyObject* o, const char* op, const char* name, TypeListAttr* out);

// A completed attr value as Python sees it (ints, floats, tuples, DTypes, None).
PyObject* AttrToPython(const AttrDef& def, const AttrValue& v);

// Any attr by its declaration's type (the generic paths: execute, graphs, async).
bool ConvertAnyAttr(PyObject* o, const char* op, const AttrDef& def, AttrValue* out);

// opforge.DType objects, numpy dtypes / scalar types and names like "float32".
bool ToDType(PyObject* o, DType* out);

}  // namespace py
}  // namespace opforge
