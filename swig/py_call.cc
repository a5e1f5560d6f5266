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
#include "executor.h"
#include "mode_stack.h"
#include "opforge/inlined_vector.h"
#include "opforge/registry.h"
#include "py_async.h"
#include "py_autograd.h"
#include "py_convert.h"
#include "py_errors.h"
#include "numpy_api.h"
#include "py_tensor.h"
#include "py_state.h"

namespace opforge {
namespace py {
namespace {

// Appends default-initialized elements up to n. InlinedVector::resize()
// value-initializes, which zeroes each element first (a TensorShape,
// AttrValue or Tensor is 130-150 bytes): on a tiny call that showed up.
template <typename T, size_t N>
void GrowTo(InlinedVector<T, N>* v, size_t n) {
  while (v->size() < n) {
    T t;
    v->emplace_back(std::move(t));
  }
}

// Below this many input bytes a kernel is over before releasing the GIL pays.
constexpr size_t kReleaseGilBytes = 1 << 16;

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

// One output: a Tensor; several: a tuple of them.
PyObject* WrapOutputs(InlinedVector<Tensor, 2>& outputs) {
  if (outputs.size() == 1) return WrapTensor(std::move(outputs[0]));
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(outputs.size()));
  if (!tuple) return nullptr;
  for (size_t i = 0; i < outputs.size(); ++i) {
    PyObject* t = WrapTensor(std::move(outputs[i]));
    if (!t) {
      Py_DECREF(tuple);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), t);
  }
  return tuple;
}

// An OpCall a hook asked to record (call.record): its converted inputs,
// completed attrs and outputs, as attributes of the call.
bool SetRecorded(PyObject* call, const OpDef& op, const BoundCall& bc, PyObject* result) {
  static PyObject *s_flat = PyUnicode_InternFromString("flat_inputs"),
                  *s_attrs = PyUnicode_InternFromString("completed_attrs"),
                  *s_outputs = PyUnicode_InternFromString("outputs");
  PyObject* flat = PyTuple_New(static_cast<Py_ssize_t>(bc.values.size()));
  PyObject* dict = PyDict_New();
  bool ok = flat && dict;
  for (size_t i = 0; ok && i < bc.values.size(); ++i) {
    PyObject* t = WrapTensor(bc.values[i]);
    ok = t != nullptr;
    if (ok) PyTuple_SET_ITEM(flat, static_cast<Py_ssize_t>(i), t);
  }
  for (size_t i = 0; ok && i < op.attrs.size(); ++i) {
    PyObject* v = AttrToPython(op.attrs[i], bc.attrs[i]);
    ok = v && PyDict_SetItemString(dict, op.attrs[i].name.c_str(), v) == 0;
    Py_XDECREF(v);
  }
  PyObject* outputs = ok ? (PyTuple_Check(result) ? (Py_INCREF(result), result) : PyTuple_Pack(1, result)) : nullptr;
  ok = ok && outputs && PyObject_SetAttr(call, s_flat, flat) == 0 && PyObject_SetAttr(call, s_attrs, dict) == 0 &&
       PyObject_SetAttr(call, s_outputs, outputs) == 0;
  Py_XDECREF(flat);
  Py_XDECREF(dict);
  Py_XDECREF(outputs);
  return ok;
}

// The eager entry: run the kernel on the bound call, then tape it when an
// input requires a gradient.
PyObject* RunEager(const OpDef& op, BoundCall& bc, PyObject* const* py_inputs, PyObject* call) {
  const size_t n = bc.values.size();
  // Built element by element (copied or moved from default-initialized
  // locals): resize() would zero each 150-byte element first.
  InlinedVector<TensorShape, 2> shapes;
  InlinedVector<Tensor, 2> outputs;
  for (size_t o = 0; o < op.outputs.size(); ++o) {
    shapes.emplace_back(bc.output_shapes[o].dims);
    Tensor empty;
    outputs.emplace_back(std::move(empty));
  }
  size_t bytes = 0;
  for (const Tensor& t : bc.values) bytes += t.TotalBytes();
  Status status;
  if (bytes >= kReleaseGilBytes) {
    Py_BEGIN_ALLOW_THREADS
    status = RunKernel(op, bc.values.data(), static_cast<int>(n), bc.attrs.data(), shapes.data(), outputs.data());
    Py_END_ALLOW_THREADS
  } else {
    status = RunKernel(op, bc.values.data(), static_cast<int>(n), bc.attrs.data(), shapes.data(), outputs.data());
  }
  if (!status.ok()) return SetError(status);
  PyObject* result = WrapOutputs(outputs);
  if (!result) return nullptr;
  if (call != nullptr) {
    static PyObject* s_record = PyUnicode_InternFromString("record");
    PyObject* rec = PyObject_GetAttr(call, s_record);
    const int want = rec ? PyObject_IsTrue(rec) : -1;
    Py_XDECREF(rec);
    if (want < 0 || (want && !SetRecorded(call, op, bc, result))) {
      Py_DECREF(result);
      return nullptr;
    }
  }
  if (bc.autograd && WantsRecording(op, py_inputs) &&
      !RecordCall(op, py_inputs, bc.values.data(), n, bc.attrs.data(), result)) {
    Py_CLEAR(result);
  }
  return result;
}

PyObject* Dispatch(const OpBinding& b, PyObject* const* args, size_t level, PyObject* call);

// The inference memo (OpBinding::InferMemo): a hit fills what BindValues
// would have, from the last call with the same input dtypes and shapes.
bool MemoHit(const OpBinding& b, BoundCall* bc) {
  const OpBinding::InferMemo& m = b.memo();
  if (!m.valid) return false;
  const size_t n = bc->values.size();
  for (size_t i = 0; i < n; ++i) {
    if (bc->values[i].dtype() != m.dtypes[i] || !(bc->values[i].shape() == m.shapes[i])) return false;
  }
  bc->op = b.op();
  // Copy-constructed, not resized: resize() value-initializes, zeroing
  // each (large) element first, a good part of a tiny call.
  for (const AttrValue& a : m.attrs) bc->attrs.emplace_back(a);
  for (size_t o = 0; o < m.output_dtypes.size(); ++o) {
    bc->output_dtypes.emplace_back(m.output_dtypes[o]);
    bc->output_shapes.emplace_back(m.output_shapes[o]);
  }
  return true;
}

void MemoStore(const OpBinding& b, const BoundCall& bc) {
  OpBinding::InferMemo& m = b.memo();
  m.valid = false;
  for (size_t o = 0; o < bc.output_shapes.size(); ++o) {
    if (!bc.output_shapes[o].fully_defined()) return;
  }
  for (size_t i = 0; i < bc.values.size(); ++i) {
    m.dtypes[i] = bc.values[i].dtype();
    m.shapes[i] = bc.values[i].shape();
  }
  m.attrs.assign(bc.attrs.data(), bc.attrs.data() + bc.attrs.size());
  m.output_dtypes.assign(bc.output_dtypes.data(), bc.output_dtypes.data() + bc.output_dtypes.size());
  m.output_shapes.clear();
  for (size_t o = 0; o < bc.output_shapes.size(); ++o) m.output_shapes.push_back(bc.output_shapes[o].dims);
  m.valid = true;
}

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
    // Eager, no list args, every input a Tensor with its value or a numpy
    // array: BindValues, the binder less the flattening and weak values.
    BoundCall bc;
    size_t a = 0;
    for (; a < op.inputs.size(); ++a) {
      PyObject* obj = py_inputs[a];
      if (IsTensor(obj)) {
        const PyTensor* pt = reinterpret_cast<const PyTensor*>(obj);
        if (pt->pending) break;
        bc.values.emplace_back(pt->tensor);
        bc.autograd |= pt->ag != nullptr;
      } else if (PyArray_CheckExact(obj)) {
        Tensor t;  // default-initialized (not zeroed), then moved in
        if (!TensorFromArray(obj, name, op.inputs[a].name, &t)) return nullptr;
        bc.values.emplace_back(std::move(t));
      } else {
        break;
      }
    }
    if (a == op.inputs.size()) {
      if (b.memoizable() && MemoHit(b, &bc)) return RunEager(op, bc, py_inputs.data(), call);
      InlinedVector<AttrValue, 4> attrs;
      GrowTo(&attrs, op.attrs.size());
      for (const auto& [i, pos] : b.attr_pos()) {
        if (!ConvertAnyAttr(args[pos], name, op.attrs[i], &attrs[i])) return nullptr;
      }
      Status s = BindValues(op, attrs.data(), &bc);
      if (!s.ok()) return SetError(s);
      if (b.memoizable()) MemoStore(b, bc);
      return RunEager(op, bc, py_inputs.data(), call);
    }
  }
  // A call the tape records runs eagerly in every mode (it is taped from
  // the eager execution, once).
  // Stateful ops run now, in program order (their state has no data edges
  // the queue could order them by); what they read of pending values waits.
  const bool async = mode == Mode::kAsync && !ForcedSync() && !op.stateful &&
                     !WantsRecordingChecked(op, py_inputs.data());
  InlinedVector<AttrValue, 4> attrs;
  GrowTo(&attrs, op.attrs.size());
  for (const auto& [i, pos] : b.attr_pos()) {
    if (!ConvertAnyAttr(args[pos], name, op.attrs[i], &attrs[i])) return nullptr;
  }
  InlinedVector<BindInput, 4> inputs(op.inputs.size());
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    const ArgDef& arg = op.inputs[a];
    const bool ok = arg.is_list() ? ToBindListInput(py_inputs[a], name, arg, async, &inputs[a])
                                  : ToBindInput(py_inputs[a], name, arg.name, async, &inputs[a]);
    if (!ok) return nullptr;
  }
  BoundCall bc;
  Status s = Bind(op, inputs.data(), attrs.data(), &bc);
  if (!s.ok()) return SetError(s);
  if (async) return SubmitBound(bc, CallerLocation());
  return RunEager(op, bc, py_inputs.data(), call);
}

}  // namespace

OpBinding::OpBinding(const char* op_name) : name_(op_name), op_(OpRegistry::Global()->Find(op_name)) { Layout(); }

OpBinding::OpBinding(const OpDef* op) : name_(op->name), op_(op) { Layout(); }

void OpBinding::Layout() {
  if (!op_) return;
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
  // Memoized inference: no attr the caller gives, every attr a type attr
  // inferred from the inputs (nothing else can change the result).
  memoizable_ = plain_ && attr_pos_.empty() && op_->inputs.size() <= kMemoInputs;
  for (const AttrDef& a : op_->attrs) memoizable_ = memoizable_ && a.type == AttrType::kType && a.inferred;
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
