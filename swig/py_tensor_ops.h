// opforge.Tensor's operators as C slots (nb_add, tp_richcompare, ...). Each
// calls its op's binding, the one call path, with the operands in the order
// written: Python calls the right operand's slot with the same order when
// the left one declines (2 - t), so no reflected function is needed. A
// Python-level __add__ would cost a method lookup and a Python frame more
// per operator.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <vector>

namespace opforge {
namespace py {

// Appends the operator slots to a type spec's slot list (before its terminator).
void AppendOperatorSlots(std::vector<PyType_Slot>* slots);

// True for the dunder names those slots define (__add__, __radd__, __eq__,
// ...): the Python methods class's own versions are not copied over them.
bool IsOperatorSlotName(const char* name);

}  // namespace py
}  // namespace opforge
