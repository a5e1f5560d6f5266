#include "py_tensor_ops.h"

#include <cstring>

#include "py_call.h"
#include "py_convert.h"

namespace opforge {
namespace py {
namespace {

enum OpIndex {
  kAdd, kSub, kMul, kDiv, kPow, kMatMul, kNeg, kAbs, kLogicalNot, kLogicalAnd, kLogicalOr,
  kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual, kNumOps,
};
const char* const kOpNames[kNumOps] = {
    "Add", "Sub", "Mul", "Div", "Pow", "MatMul", "Neg", "Abs", "LogicalNot", "LogicalAnd", "LogicalOr",
    "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual",
};
constexpr size_t kMaxParams = 4;
struct Entry {
  const OpBinding* binding = nullptr;
  PyObject* defaults[kMaxParams] = {};  // attr parameters: their declared defaults
};
Entry entries[kNumOps];  // filled on first use (under the GIL), kept for good

const Entry* Find(int i) {
  Entry& e = entries[i];
  if (e.binding != nullptr) return &e;
  const OpBinding* b = FindBinding(kOpNames[i]);
  if (b == nullptr) return nullptr;
  if (b->op()->params.size() > kMaxParams || b->input_pos().size() > 2) {
    PyErr_Format(PyExc_SystemError, "opforge.Tensor: the %s op takes more parameters than an operator gives",
                 kOpNames[i]);
    return nullptr;
  }
  for (const auto& [attr, pos] : b->attr_pos()) {  // MatMul's transposes, as the wrapper's defaults
    const AttrDef& def = b->op()->attrs[attr];
    PyObject* v = def.has_default ? AttrToPython(def, def.default_value) : nullptr;
    if (v == nullptr) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_SystemError, "opforge.Tensor: %s has a required attr", kOpNames[i]);
      return nullptr;
    }
    e.defaults[pos] = v;
  }
  e.binding = b;
  return &e;
}

// Calls op `i` with the operands as its inputs (b: none for a unary op).
PyObject* CallOp(int i, PyObject* a, PyObject* b) {
  const Entry* e = Find(i);
  if (e == nullptr) return nullptr;
  PyObject* args[kMaxParams];
  for (size_t k = 0; k < kMaxParams; ++k) args[k] = e->defaults[k];
  const std::vector<int>& in = e->binding->input_pos();
  args[in[0]] = a;
  if (in.size() > 1) args[in[1]] = b;
  return e->binding->Call(args);
}

template <int kOp>
PyObject* Binary(PyObject* a, PyObject* b) {
  return CallOp(kOp, a, b);
}

template <int kOp>
PyObject* Unary(PyObject* a) {
  return CallOp(kOp, a, nullptr);
}

PyObject* Power(PyObject* a, PyObject* b, PyObject* mod) {
  if (mod != Py_None) {
    PyErr_SetString(PyExc_TypeError, "opforge.Tensor: pow() with a modulus is not supported");
    return nullptr;
  }
  return CallOp(kPow, a, b);
}

PyObject* RichCompare(PyObject* a, PyObject* b, int op) {
  switch (op) {
    case Py_EQ: return CallOp(kEqual, a, b);
    case Py_NE: return CallOp(kNotEqual, a, b);
    case Py_LT: return CallOp(kLess, a, b);
    case Py_LE: return CallOp(kLessEqual, a, b);
    case Py_GT: return CallOp(kGreater, a, b);
    case Py_GE: return CallOp(kGreaterEqual, a, b);
  }
  Py_RETURN_NOTIMPLEMENTED;
}

void* Fn(binaryfunc f) { return reinterpret_cast<void*>(f); }
void* Fn(unaryfunc f) { return reinterpret_cast<void*>(f); }

}  // namespace

void AppendOperatorSlots(std::vector<PyType_Slot>* slots) {
  slots->insert(slots->end(), {
      {Py_nb_add, Fn(Binary<kAdd>)},
      {Py_nb_subtract, Fn(Binary<kSub>)},
      {Py_nb_multiply, Fn(Binary<kMul>)},
      {Py_nb_true_divide, Fn(Binary<kDiv>)},
      {Py_nb_power, reinterpret_cast<void*>(static_cast<ternaryfunc>(Power))},
      {Py_nb_matrix_multiply, Fn(Binary<kMatMul>)},
      {Py_nb_negative, Fn(Unary<kNeg>)},
      {Py_nb_absolute, Fn(Unary<kAbs>)},
      {Py_nb_invert, Fn(Unary<kLogicalNot>)},
      {Py_nb_and, Fn(Binary<kLogicalAnd>)},
      {Py_nb_or, Fn(Binary<kLogicalOr>)},
      {Py_tp_richcompare, reinterpret_cast<void*>(static_cast<richcmpfunc>(RichCompare))},
  });
}

bool IsOperatorSlotName(const char* name) {
  static const char* const kNames[] = {
      "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
      "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__", "__abs__", "__invert__", "__and__",
      "__rand__", "__or__", "__ror__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
  };
  for (const char* n : kNames) {
    if (std::strcmp(n, name) == 0) return true;
  }
  return false;
}

}  // namespace py
}  // namespace opforge
