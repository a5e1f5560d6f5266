#include "py_errors.h"

namespace opforge {
namespace py {
namespace {
constexpr int kNumCodes = 8;
PyObject* error_classes[kNumCodes] = {};
}  // namespace

bool InitErrorClasses(PyObject* classes) {
  if (!PyTuple_Check(classes) || PyTuple_GET_SIZE(classes) != kNumCodes) {
    PyErr_Format(PyExc_TypeError, "expected a tuple of %d error classes", kNumCodes);
    return false;
  }
  for (int i = 0; i < kNumCodes; ++i) {
    PyObject* c = PyTuple_GET_ITEM(classes, i);
    Py_INCREF(c);
    Py_XSETREF(error_classes[i], c);
  }
  return true;
}

PyObject* SetError(const Status& s) {
  const int code = static_cast<int>(s.code());
  PyObject* cls = (code > 0 && code < kNumCodes) ? error_classes[code] : error_classes[0];
  PyErr_SetString(cls ? cls : PyExc_RuntimeError, s.message().c_str());
  return nullptr;
}

PyObject* SetInvalidArgument(const char* op, const std::string& message) {
  return SetError(Status(Code::kInvalidArgument, std::string(op) + ": " + message));
}

}  // namespace py
}  // namespace opforge
