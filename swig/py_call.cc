#include "py_call.h"
#include "py_graph.h"

#include <strings.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "bind.h"
#include "dtype_promotion_args.h"
#include "executor.h"
#include "mode_stack.h"
#include "opforge/inlined_vector.h"
#include "opforge/registry.h"
#include "py_async.h"
#include "py_autograd.h"
#include "py_convert.h"
#include "py_eager.h"
#include "py_errors.h"
#include "numpy_api.h"
#include "py_promote.h"
#include "py_tensor.h"
#include "py_state.h"

namespace opforge {
namespace py {
namespace {

PyObject* op_call_type = nullptr;  // opforge._hooks.OpCall (HooksInit)

// The package's directories (sources, and generated wrappers where they
// live apart): frames there are not the caller of an op.
std::vector<std::string>& PackageDirs() {
  static auto* dirs = new std::vector<std::string>();
  return *dirs;
}

bool InPackage(const char* file) {
  for (const std::string& d : PackageDirs()) {
    if (std::strncmp(file, d.c_str(), d.size()) == 0) return true;
  }
  return false;
}

// OPFORGE_EXECUTION=sync (read per call: tests and users set it at run time).
bool ForcedSync() {
  const char* env = std::getenv("OPFORGE_EXECUTION");
  if (env == nullptr) return false;
  while (std::isspace(static_cast<unsigned char>(*env))) ++env;
  const char* end = env + std::strlen(env);
  while (end > env && std::isspace(static_cast<unsigned char>(end[-1]))) --end;
  return end - env == 4 && strncasecmp(env, "sync", 4) == 0;
}

// "file:line" of a frame. Finding the line scans the code's line table, a
// good part of an async submit's cost: from 3.11 the text is cached per
// (code, instruction), holding the code objects (a loop submits from few places).
std::string FrameLocation(PyFrameObject* f, const char* file) {
#if PY_VERSION_HEX >= 0x030B0000
  using Key = std::pair<PyCodeObject*, int>;
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<void*>()(k.first) * 31 + static_cast<size_t>(k.second); }
  };
  static auto* cache = new std::unordered_map<Key, std::string, KeyHash>();  // under the GIL
  PyCodeObject* code = PyFrame_GetCode(f);  // new reference: kept by the cache
  const Key key(code, PyFrame_GetLasti(f));
  auto it = cache->find(key);
  if (it != cache->end()) {
    Py_DECREF(code);
    return it->second;
  }
  if (cache->size() >= 4096) {  // bounded: drop it all (and the code references)
    for (auto& entry : *cache) Py_DECREF(entry.first.first);
    cache->clear();
  }
  std::string where = std::string(file) + ":" + std::to_string(PyFrame_GetLineNumber(f));
  cache->emplace(key, where);
  return where;
#else
  return std::string(file) + ":" + std::to_string(PyFrame_GetLineNumber(f));
#endif
}

// A list arg that is not a list cannot be asked about recording (the
// conversion raises its error); the tape's own test is WantsRecording.
bool WantsRecordingChecked(const OpDef& op, PyObject* const* inputs) {
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    if (op.inputs[a].is_list() && !PyList_Check(inputs[a]) && !PyTuple_Check(inputs[a])) return false;
  }
  return WantsRecording(op, inputs);
}

PyObject* Dispatch(const OpBinding& b, PyObject* const* args, size_t level, PyObject* call);

// A hook entry: the user's function gets an OpCall; its run() goes on
// below this entry (OpCallRun). A call passed down from a hook above keeps
// its object, so every hook of the chain sees the same call.
PyObject* CallHook(const OpBinding& b, PyObject* const* args, size_t level, PyObject* hook, PyObject* call) {
  static PyObject* s_level = PyUnicode_InternFromString("_level");
  const OpDef& op = *b.op();
  if (op_call_type == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "opforge: hooks_init was not called");
    return nullptr;
  }
  PyObject* level_obj = PyLong_FromSize_t(level);
  if (!level_obj) return nullptr;
  PyObject* result = nullptr;
  if (call == nullptr) {
    const Py_ssize_t n = static_cast<Py_ssize_t>(op.params.size());
    PyObject* tuple = PyTuple_New(n);
    if (!tuple) {
      Py_DECREF(level_obj);
      return nullptr;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
      Py_INCREF(args[i]);
      PyTuple_SET_ITEM(tuple, i, args[i]);
    }
    InlinedVector<PyObject*, 4> py_inputs(op.inputs.size());
    for (size_t a = 0; a < op.inputs.size(); ++a) py_inputs[a] = UnwrapVariable(args[b.input_pos()[a]]);
    PyObject* record = WantsRecordingChecked(op, py_inputs.data()) ? Py_True : Py_False;
    PyObject* fresh = PyObject_CallFunction(op_call_type, "sNOO", op.name.c_str(), tuple, level_obj, record);
    if (fresh) {
      result = PyObject_CallOneArg(hook, fresh);
      Py_DECREF(fresh);
    }
  } else {
    PyObject* saved = PyObject_GetAttr(call, s_level);
    if (saved && PyObject_SetAttr(call, s_level, level_obj) == 0) {
      result = PyObject_CallOneArg(hook, call);
      if (PyObject_SetAttr(call, s_level, saved) != 0) Py_CLEAR(result);
    }
    Py_XDECREF(saved);
  }
  Py_DECREF(level_obj);
  return result;
}

// Runs a call at the mode entry `level` (1-based from the bottom of this
// thread's stack; 0: eager). `call` is the OpCall of a hook above, or null.
PyObject* Dispatch(const OpBinding& b, PyObject* const* args, size_t level, PyObject* call) {
  const OpDef& op = *b.op();
  if (b.promotes()) {  // mixed dtypes: Cast calls at this level, then the call on their results
    std::vector<PyObject*> promoted, owned;
    const int r = PromoteArgs(b, args, level, &promoted, &owned);
    if (r < 0) return nullptr;
    if (r > 0) {
      PyObject* out = Dispatch(b, promoted.data(), level, call);
      for (PyObject* o : owned) Py_DECREF(o);
      return out;
    }
  }
  Mode mode = Mode::kEager;
  void* target = nullptr;
  if (level > 0) {
    const ModeEntry& e = ModeStack::ThisThread().at(level - 1);
    mode = e.mode;
    target = e.target;
  }
  if (mode == Mode::kHook) return CallHook(b, args, level - 1, static_cast<PyObject*>(target), call);
  if (mode == Mode::kGraph) {  // a node of the graph (py_graph.cc): no kernel runs
    InlinedVector<PyObject*, 4> graph_inputs(op.inputs.size());
    for (size_t a = 0; a < op.inputs.size(); ++a) graph_inputs[a] = args[b.input_pos()[a]];
    InlinedVector<AttrValue, 4> graph_attrs(op.attrs.size());
    for (const auto& [i, pos] : b.attr_pos()) {
      if (!ConvertAnyAttr(args[pos], op.name.c_str(), op.attrs[i], &graph_attrs[i])) return nullptr;
    }
    return GraphEntry(static_cast<PyObject*>(target), op, graph_inputs.data(), graph_attrs.data());
  }
  const char* name = op.name.c_str();
  InlinedVector<PyObject*, 4> py_inputs(op.inputs.size());
  for (size_t a = 0; a < op.inputs.size(); ++a) py_inputs[a] = UnwrapVariable(args[b.input_pos()[a]]);
  if (mode == Mode::kEager && b.plain()) {
    bool handled;
    PyObject* result = EagerPlain(b, args, py_inputs.data(), call, &handled);
    if (handled) return result;
  }
  // A call the tape records runs eagerly in every mode (it is taped from
  // the eager execution, once).
  // Stateful ops run now, in program order (their state has no data edges
  // the queue could order them by); what they read of pending values waits.
  const bool async = mode == Mode::kAsync && !ForcedSync() && !op.stateful &&
                     !WantsRecordingChecked(op, py_inputs.data());
  InlinedVector<AttrValue, 4> attrs;
  attrs.resize(op.attrs.size());
  for (const auto& [i, pos] : b.attr_pos()) {
    if (!ConvertAnyAttr(args[pos], name, op.attrs[i], &attrs[i])) return nullptr;
  }
  InlinedVector<BindInput, 4> inputs(op.inputs.size());
  uint32_t transposed = 0;  // inputs borrowed as their transposes (BorrowTransposed)
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    const ArgDef& arg = op.inputs[a];
    if (a < 32 && BorrowTransposed(arg, py_inputs[a], &inputs[a].tensor)) {
      inputs[a].kind = BindInput::kTensor;
      transposed |= 1u << a;
      continue;
    }
    const bool ok = arg.is_list() ? ToBindListInput(py_inputs[a], name, arg, async, &inputs[a])
                                  : ToBindInput(py_inputs[a], name, arg.name, async, &inputs[a]);
    if (!ok) return nullptr;
  }
  FlipTransposeAttrs(op, transposed, attrs.data());
  BoundCall first, copied;
  BoundCall* bound = &first;
  Status s = Bind(op, inputs.data(), attrs.data(), &first);
  if (!s.ok() && transposed != 0) {
    // The op may not take the flipped attr at this rank (FusedMatMul's
    // transpose_a is 2-D only): the views go in as copies, attrs as given.
    // Every attr and input again (Bind moved them into the failed call).
    for (size_t i = 0; i < attrs.size(); ++i) attrs[i] = AttrValue();
    for (const auto& [i, pos] : b.attr_pos()) {
      if (!ConvertAnyAttr(args[pos], name, op.attrs[i], &attrs[i])) return nullptr;
    }
    for (size_t a = 0; a < op.inputs.size(); ++a) {
      const ArgDef& arg = op.inputs[a];
      inputs[a] = BindInput();
      const bool ok = arg.is_list() ? ToBindListInput(py_inputs[a], name, arg, async, &inputs[a])
                                    : ToBindInput(py_inputs[a], name, arg.name, async, &inputs[a]);
      if (!ok) return nullptr;
    }
    s = Bind(op, inputs.data(), attrs.data(), &copied);
    bound = &copied;
  }
  if (!s.ok()) return SetError(s);
  if (async) return SubmitBound(*bound, CallerLocation());
  return RunBound(op, *bound, py_inputs.data(), call);
}

}  // namespace

PyObject* DispatchAt(const OpBinding& b, PyObject* const* args, size_t level, PyObject* call) {
  return Dispatch(b, args, level, call);
}

OpBinding::OpBinding(const char* op_name) : name_(op_name), op_(OpRegistry::Global()->Find(op_name)) { Layout(); }

OpBinding::OpBinding(const OpDef* op) : name_(op->name), op_(op) { Layout(); }

OpBinding::OpBinding(const char* op_name, const char* py_name, std::initializer_list<const char*> py_params)
    : name_(op_name), py_name_(py_name), py_params_(py_params.begin(), py_params.end()),
      op_(OpRegistry::Global()->Find(op_name)) {
  Layout();
}

void OpBinding::Layout() {
  if (py_name_.empty()) py_name_ = name_;
  if (!op_) return;
  if (py_params_.size() != op_->params.size()) py_params_ = op_->params;  // not generated from this registry
  plain_ = true;
  for (const ArgDef& a : op_->inputs) plain_ = plain_ && !a.is_list();
  for (const ArgDef& a : op_->inputs) {
    for (size_t k = 0; k < op_->params.size(); ++k) {
      if (op_->params[k] == a.name) input_pos_.push_back(static_cast<int>(k));
    }
  }
  for (size_t k = 0; k < op_->params.size(); ++k) {
    const int i = op_->FindAttr(op_->params[k]);
    if (i >= 0 && op_->FindInput(op_->params[k]) < 0) attr_pos_.emplace_back(i, static_cast<int>(k));
  }
  memoizable_ = Memoizable(*op_, plain_, attr_pos_.size());
  promotes_ = PromotesInputs(*op_);
}

void OpBinding::set_memo(EagerMemo* m) const {
  if (memo_ != nullptr) memo_->Unref();
  memo_ = m;
}

PyObject* OpBinding::CallFast(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) const {
  if (op_ && (kwnames != nullptr || static_cast<size_t>(nargs) != op_->params.size())) {
    return CallWithKeywords(args, nargs, kwnames);
  }
  return Call(args);
}

PyObject* OpBinding::Call(PyObject* const* args) const {
  if (!op_) return SetError(errors::NotFound(name_, ": op is not registered in this build of opforge"));
  return Dispatch(*this, args, ModeStack::ThisThread().size(), nullptr);
}

const OpBinding* FindBinding(const char* op_name) {
  // Created and looked up under the GIL; never removed (ops are never
  // unregistered), so a pointer stays valid.
  static auto* cache = new std::map<std::string, std::unique_ptr<OpBinding>>();
  auto it = cache->find(op_name);
  if (it != cache->end()) return it->second.get();
  const OpDef* op = OpRegistry::Global()->Find(op_name);
  if (op == nullptr) {
    SetError(errors::NotFound(op_name, ": op is not registered (load its library with opforge.load_op_library)"));
    return nullptr;
  }
  return cache->emplace(op_name, std::make_unique<OpBinding>(op)).first->second.get();
}

std::string CallerLocation() {
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  Py_XINCREF(f);
  std::string where = "<unknown>";
  while (f != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(f);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    Py_DECREF(code);
    if (file == nullptr) {
      PyErr_Clear();
    } else if (!InPackage(file)) {
      where = FrameLocation(f, file);
      Py_DECREF(f);
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  return where;
}

PyObject* ExecuteOp(const char* op_name, PyObject* args) {
  const OpBinding* b = FindBinding(op_name);
  if (!b) return nullptr;
  if (!PyTuple_Check(args) || static_cast<size_t>(PyTuple_GET_SIZE(args)) != b->op()->params.size()) {
    return SetInvalidArgument(op_name, "execute() takes a tuple of the op's " +
                                           std::to_string(b->op()->params.size()) + " parameters");
  }
  return b->Call(&PyTuple_GET_ITEM(args, 0));
}

PyObject* ModePush(const char* mode, PyObject* target) {
  Mode m;
  if (std::strcmp(mode, "async") == 0) m = Mode::kAsync;
  else if (std::strcmp(mode, "eager") == 0) m = Mode::kEager;
  else if (std::strcmp(mode, "hook") == 0 && PyCallable_Check(target)) m = Mode::kHook;
  else if (std::strcmp(mode, "graph") == 0 && target != Py_None) m = Mode::kGraph;
  else return SetError(errors::InvalidArgument("mode_push: unknown mode '", mode, "' (or a hook that is not callable)"));
  const bool holds = m == Mode::kHook || m == Mode::kGraph;
  void* t = holds ? target : nullptr;
  Status s = ModeStack::ThisThread().Push(m, t);
  if (!s.ok()) return SetError(s);
  if (holds) Py_INCREF(target);  // the entry holds the function (the graph)
  Py_RETURN_NONE;
}

PyObject* ModePop(const char* mode, PyObject* target) {
  Mode m = std::strcmp(mode, "async") == 0   ? Mode::kAsync
           : std::strcmp(mode, "eager") == 0 ? Mode::kEager
           : std::strcmp(mode, "graph") == 0 ? Mode::kGraph
                                             : Mode::kHook;
  const bool holds = m == Mode::kHook || m == Mode::kGraph;
  void* t = holds ? target : nullptr;
  Status s = ModeStack::ThisThread().Pop(m, t);
  if (!s.ok()) {
    PyErr_SetString(PyExc_ValueError, s.message().c_str());
    return nullptr;
  }
  if (holds) Py_DECREF(target);
  Py_RETURN_NONE;
}

PyObject* HooksInit(PyObject* type, PyObject* package_dirs) {
  PyObject* seq = PySequence_Fast(package_dirs, "hooks_init: package_dirs must be a sequence of str");
  if (!seq) return nullptr;
  std::vector<std::string> dirs;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    const char* d = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
    if (!d) {
      Py_DECREF(seq);
      return nullptr;
    }
    dirs.emplace_back(d);
  }
  Py_DECREF(seq);
  PackageDirs() = std::move(dirs);
  Py_INCREF(type);
  Py_XSETREF(op_call_type, type);
  Py_RETURN_NONE;
}

PyObject* OpCallRun(PyObject* call, PyObject* eager) {
  static PyObject *s_op_type = PyUnicode_InternFromString("op_type"), *s_args = PyUnicode_InternFromString("args"),
                  *s_level = PyUnicode_InternFromString("_level");
  PyObject* type_obj = PyObject_GetAttr(call, s_op_type);
  if (!type_obj) return nullptr;
  const char* op_type = PyUnicode_Check(type_obj) ? PyUnicode_AsUTF8(type_obj) : nullptr;
  const OpBinding* b = op_type ? FindBinding(op_type) : nullptr;
  Py_DECREF(type_obj);
  if (!b) {
    if (!PyErr_Occurred()) SetError(errors::InvalidArgument("OpCall.op_type must be a string"));
    return nullptr;
  }
  size_t level = 0;
  if (!PyObject_IsTrue(eager)) {
    PyObject* l = PyObject_GetAttr(call, s_level);
    if (!l) return nullptr;
    level = PyLong_AsSize_t(l);
    Py_DECREF(l);
    if (level == static_cast<size_t>(-1) && PyErr_Occurred()) return nullptr;
    if (level > ModeStack::ThisThread().size()) {
      return SetError(errors::InvalidArgument(b->name(), ": OpCall.run() outside the hook that received the call"));
    }
  }
  PyObject* args = PyObject_GetAttr(call, s_args);
  if (!args) return nullptr;
  if (!PyTuple_Check(args) || static_cast<size_t>(PyTuple_GET_SIZE(args)) != b->op()->params.size()) {
    Py_DECREF(args);
    return SetInvalidArgument(b->name().c_str(), "OpCall.args must be a tuple of the op's parameters");
  }
  PyObject* result = Dispatch(*b, &PyTuple_GET_ITEM(args, 0), level, call);
  Py_DECREF(args);
  return result;
}

PyObject* OpSignature(const char* op_name) {
  const OpBinding* b = FindBinding(op_name);
  if (!b) return nullptr;
  const OpDef& op = *b->op();
  PyObject* names = PyTuple_New(static_cast<Py_ssize_t>(op.inputs.size()));
  PyObject* lists = PyTuple_New(static_cast<Py_ssize_t>(op.inputs.size()));
  PyObject* attrs = PyTuple_New(static_cast<Py_ssize_t>(b->attr_pos().size()));
  PyObject* params = PyList_New(static_cast<Py_ssize_t>(op.params.size()));
  if (!names || !lists || !attrs || !params) {
    Py_XDECREF(names);
    Py_XDECREF(lists);
    Py_XDECREF(attrs);
    Py_XDECREF(params);
    return nullptr;
  }
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    PyTuple_SET_ITEM(names, static_cast<Py_ssize_t>(i), PyUnicode_FromString(op.inputs[i].name.c_str()));
    PyTuple_SET_ITEM(lists, static_cast<Py_ssize_t>(i), PyBool_FromLong(op.inputs[i].is_list()));
  }
  for (size_t i = 0; i < b->attr_pos().size(); ++i) {
    PyTuple_SET_ITEM(attrs, static_cast<Py_ssize_t>(i), PyUnicode_FromString(op.attrs[b->attr_pos()[i].first].name.c_str()));
  }
  for (size_t i = 0; i < op.params.size(); ++i) {
    PyList_SET_ITEM(params, static_cast<Py_ssize_t>(i), PyUnicode_FromString(op.params[i].c_str()));
  }
  return Py_BuildValue("(NNNN)", names, lists, attrs, params);
}

PyObject* PyCallerLocation() {
  const std::string where = CallerLocation();
  return PyUnicode_FromStringAndSize(where.data(), static_cast<Py_ssize_t>(where.size()));
}

}  // namespace py
}  // namespace opforge
