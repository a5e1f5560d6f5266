// The one call path from Python: every generated entry point (and the
// generic one of load_op_library ops) converts its arguments, binds them
// (cpp/framework/bind.h) and hands the bound call to this thread's mode
// stack (cpp/framework/mode_stack.h): eager (with the tape), async, or a
// hook the user wrote in Python (tracing; graph building until the graph
// entry builds its nodes in C++), which is the only crossing back.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "opforge/attr.h"
#include "opforge/op.h"
#include "opforge/tensor.h"

namespace opforge {
namespace py {

struct EagerMemo;

class OpBinding {
 public:
  // Resolved once per entry point; an unregistered op fails at call time.
  explicit OpBinding(const char* op_name);
  explicit OpBinding(const OpDef* op);
  // A generated entry point's: the Python function's name and parameter
  // names (keywords get a trailing '_'), for keyword calls and TypeErrors.
  OpBinding(const char* op_name, const char* py_name, std::initializer_list<const char*> py_params);

  // args: the op's parameters in OpDef::params order (inputs, and user
  // attrs with None for "not given"), as the generated wrappers pass them.
  // Returns a new Tensor (a tuple for several outputs), or whatever the
  // innermost mode returns, or nullptr with an opforge.errors exception.
  PyObject* Call(PyObject* const* args) const;

  const OpDef* op() const { return op_; }
  const std::string& name() const { return name_; }
  const std::vector<int>& input_pos() const { return input_pos_; }
  const std::vector<std::pair<int, int>>& attr_pos() const { return attr_pos_; }
  bool plain() const { return plain_; }  // no list args
  // Its inputs sharing a type attr are promoted to one dtype (py_promote.h).
  bool promotes() const { return promotes_; }

  // The eager fast path's memo of the last inference (py_eager.h), or null.
  bool memoizable() const { return memoizable_; }
  EagerMemo* memo() const { return memo_; }
  void set_memo(EagerMemo* m) const;  // drops the binding's reference to the old one

  // A generated entry point (METH_FASTCALL | METH_KEYWORDS): every
  // parameter given by position goes straight to Call; otherwise
  // CallWithKeywords applies Python's rules first.
  PyObject* CallFast(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) const;

 private:
  void Layout();
  // py_call_args.cc: keywords and defaults into params order, then Call.
  PyObject* CallWithKeywords(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) const;
  std::string name_;
  std::string py_name_;                 // for TypeErrors: the Python function's name
  std::vector<std::string> py_params_;  // per param: its Python name
  mutable std::vector<PyObject*> defaults_;  // per param: its default (new reference) or null; made on first need
  const OpDef* op_;
  std::vector<int> input_pos_;                 // per op input: its position in params
  std::vector<std::pair<int, int>> attr_pos_;  // (index in op.attrs, position in params)
  bool plain_ = false;
  bool promotes_ = false;
  bool memoizable_ = false;
  mutable EagerMemo* memo_ = nullptr;
};

// The binding of a registered op by name (cached; nullptr with NotFoundError set).
const OpBinding* FindBinding(const char* op_name);

// file:line of the innermost Python frame outside the opforge package.
std::string CallerLocation();

// py_bind_api.cc: infer(op_type, (dtype, shape) pairs, attrs) -> (dtypes, shapes, attrs).
PyObject* Infer(const char* op_type, PyObject* inputs, PyObject* attrs);

// Module functions (pywrap_internal.i).
// public_entry(entry, name, module, doc): the function gen_<group>_ops.py
// exports, `entry` under the op's Python name; doc starts with its text
// signature, "name(params)\n--\n\n" (py_entry_points.cc).
PyObject* PublicEntry(PyObject* entry, const char* name, const char* module, const char* doc);
// execute(op_name, args): the generic entry point (args in params order).
PyObject* ExecuteOp(const char* op_name, PyObject* args);
// Modes of this thread: "async", "eager" (a sync block inside async), "hook" (target: the function).
PyObject* ModePush(const char* mode, PyObject* target);
PyObject* ModePop(const char* mode, PyObject* target);
// op_call_type: opforge._hooks.OpCall; package_dirs: where CallerLocation skips frames.
PyObject* HooksInit(PyObject* op_call_type, PyObject* package_dirs);
// OpCall.run(): passes the call to the mode below its hook (eager=True: straight to eager).
PyObject* OpCallRun(PyObject* call, PyObject* eager);
// (input names, is-list flags, user attr names, params) of an op.
PyObject* OpSignature(const char* op_name);
PyObject* PyCallerLocation();
// bind(op_type, inputs, attrs) -> (inputs, output dtypes, output shapes, completed attrs):
// the binder without running anything. inputs: one per input arg (a list
// for list args) of values, or of objects with `dtype` and `shape` and no
// value (graph tensors, dask arrays: None or nan for unknown dims).
// Returned inputs: values converted to their bound dtype (Tensors), the
// shape-only ones as given; unknown output dims are None.
PyObject* BindCall(const char* op_type, PyObject* inputs, PyObject* attrs);

}  // namespace py
}  // namespace opforge
