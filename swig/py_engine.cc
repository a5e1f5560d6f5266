#include "py_engine.h"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <string>
#include <utility>
#include <vector>

#include "../cpp/framework/engine.h"
#include "../cpp/framework/graph.h"
#include "py_convert.h"
#include "py_errors.h"
#include "py_graph_views.h"
#include "py_tensor.h"

namespace opforge {
namespace py {
namespace {

constexpr const char* kCapsule = "opforge.Graph";  // py_graph_views.cc reads it too

const OpDef* FindOp(const char* op_type) {
  const OpDef* op = OpRegistry::Global()->Find(op_type);
  if (!op) SetError(errors::NotFound(op_type, ": op is not registered (load its library with opforge.load_op_library)"));
  return op;
}

// attrs: a dict of user attrs by name (None: not given).
bool ConvertAttrs(const OpDef& op, PyObject* dict, std::vector<AttrValue>* out) {
  out->assign(op.attrs.size(), AttrValue());
  if (dict == Py_None) return true;
  if (!PyDict_Check(dict)) return SetInvalidArgument(op.name.c_str(), "attrs must be a dict") != nullptr;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dict, &pos, &key, &value)) {
    const char* name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
    const int i = name ? op.FindAttr(name) : -1;
    if (i < 0 || op.attrs[i].inferred) {
      // Inferred attrs (T, N) may be passed only when consistent: checked by inference.
      if (i >= 0 && value != Py_None) {
        if (!ConvertAnyAttr(value, op.name.c_str(), op.attrs[i], &(*out)[i])) return false;
        continue;
      }
      if (i >= 0) continue;
      return SetInvalidArgument(op.name.c_str(), std::string("unknown attr '") + (name ? name : "?") + "'") != nullptr;
    }
    if (!ConvertAnyAttr(value, op.name.c_str(), op.attrs[i], &(*out)[i])) return false;
  }
  return true;
}

// A Tensor argument (maybe pending); false with an error set otherwise.
bool TensorArg(PyObject* obj, const char* op, const std::string& arg) {
  if (IsTensor(obj)) return true;
  SetInvalidArgument(op, "argument '" + arg + "' must be an opforge.Tensor here, not " + Py_TYPE(obj)->tp_name);
  return false;
}

// Calls fn(item, label, arg) for every flattened input, setting list lengths.
template <typename Fn>
bool ForEachInput(const OpDef& op, PyObject* inputs, std::vector<AttrValue>* attrs, Fn fn) {
  const char* name = op.name.c_str();
  if (!PyTuple_Check(inputs) || static_cast<size_t>(PyTuple_GET_SIZE(inputs)) != op.inputs.size()) {
    return SetInvalidArgument(name, "expected a tuple of " + std::to_string(op.inputs.size()) + " inputs") != nullptr;
  }
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    const ArgDef& arg = op.inputs[a];
    PyObject* obj = PyTuple_GET_ITEM(inputs, a);
    if (!arg.is_list()) {
      if (!fn(obj, arg.name, arg)) return false;
      continue;
    }
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
      return SetInvalidArgument(name, "argument '" + arg.name + "' must be a list or tuple of tensors, not " +
                                          Py_TYPE(obj)->tp_name) != nullptr;
    }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    (*attrs)[arg.number_attr_index] = AttrValue::Int(n);
    for (Py_ssize_t k = 0; k < n; ++k) {
      if (!fn(PySequence_Fast_GET_ITEM(obj, k), arg.name + "[" + std::to_string(k) + "]", arg)) return false;
    }
  }
  return true;
}

// The value of one output of an AsyncOp, as a Tensor object's pending state.
class AsyncOutput final : public PendingValue {
 public:
  AsyncOutput(std::shared_ptr<AsyncOp> op, int index) : op_(std::move(op)), index_(index) {}
  Status Wait(Tensor* out) override { return op_->Wait(index_, out); }
  const std::shared_ptr<AsyncOp>& op() const { return op_; }
  int index() const { return index_; }

 private:
  std::shared_ptr<AsyncOp> op_;
  int index_;
};

}  // namespace

PyObject* GraphNew() {
  return PyCapsule_New(new Graph(), kCapsule, [](PyObject* c) {
    delete static_cast<Graph*>(PyCapsule_GetPointer(c, kCapsule));
  });
}

PyObject* GraphPlaceholder(PyObject* graph, const char* name, PyObject* dtype, PyObject* shape, const char* where) {
  Graph* g = GraphOf(graph);
  if (!g) return nullptr;
  DType d;
  if (!ToDType(dtype, &d)) {
    return SetInvalidArgument("placeholder", std::string("argument 'dtype' is not an opforge dtype: ") +
                                                 Py_TYPE(dtype)->tp_name);
  }
  PyObject* seq = PySequence_Fast(shape, "placeholder: argument 'shape' must be a sequence of ints");
  if (!seq) return nullptr;
  std::vector<int64_t> dims;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
    if (item == Py_None) {  // unknown until the graph runs
      dims.push_back(kUnknownDim);
      continue;
    }
    const long long v = PyLong_AsLongLong(item);
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      PyErr_Clear();
      return SetInvalidArgument("placeholder", "argument 'shape' must be a sequence of ints");
    }
    dims.push_back(v);
  }
  Py_DECREF(seq);
  const TensorShape s(dims.data(), static_cast<int>(std::min<size_t>(dims.size(), kMaxRank)));
  if (dims.size() > static_cast<size_t>(kMaxRank) || !IsPartialShapeValid(s)) {
    TensorShape checked;
    Status st = TensorShape::Make(dims.data(), static_cast<int>(dims.size()), &checked);
    if (st.ok()) st = errors::InvalidArgument("dims must be >= 0 or None (unknown)");
    return SetError(st.WithPrefix(std::string("placeholder '") + name + "': argument 'shape': "));
  }
  return PyLong_FromLong(g->AddPlaceholder(name, d, s, where));
}

PyObject* GraphConstant(PyObject* graph, const char* name, PyObject* value, const char* where) {
  Graph* g = GraphOf(graph);
  if (!g || !TensorArg(value, "constant", "value") || !ResolvePending(value)) return nullptr;
  return PyLong_FromLong(g->AddConstant(name, TensorOf(value), where));
}

PyObject* GraphAddOp(PyObject* graph, const char* op_type, const char* name, const char* where, PyObject* inputs,
                     PyObject* attrs_dict) {
  Graph* g = GraphOf(graph);
  const OpDef* op = g ? FindOp(op_type) : nullptr;
  if (!op) return nullptr;
  std::vector<AttrValue> attrs;
  if (!ConvertAttrs(*op, attrs_dict, &attrs)) return nullptr;
  std::vector<NodeOutput> refs;
  bool ok = ForEachInput(*op, inputs, &attrs, [&](PyObject* item, const std::string& label, const ArgDef&) {
    NodeOutput r;
    if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "ii", &r.node, &r.index)) {
      PyErr_Clear();
      SetInvalidArgument(op->name.c_str(), "argument '" + label + "' must be a (node, output) pair");
      return false;
    }
    refs.push_back(r);
    return true;
  });
  if (!ok) return nullptr;
  int id = -1;
  Status s = g->AddOp(name, op, std::move(refs), std::move(attrs), where, &id);
  if (!s.ok()) return SetError(s);
  return Py_BuildValue("(in)", id, static_cast<Py_ssize_t>(op->outputs.size()));
}

PyObject* GraphRun(PyObject* graph, PyObject* feeds, PyObject* fetches, int inter_op_threads) {
  Graph* g = GraphOf(graph);
  if (!g) return nullptr;
  std::vector<std::pair<int, Tensor>> feed_values;
  std::vector<NodeOutput> fetch_refs;
  PyObject* fseq = PySequence_Fast(feeds, "Session.run: feeds must be a list of (node, Tensor)");
  if (!fseq) return nullptr;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fseq); ++i) {
    int node;
    PyObject* value;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fseq, i), "iO", &node, &value) ||
        !TensorArg(value, "Session.run", "feed_dict") || !ResolvePending(value)) {
      Py_DECREF(fseq);
      return nullptr;
    }
    feed_values.emplace_back(node, TensorOf(value));
  }
  Py_DECREF(fseq);
  PyObject* seq = PySequence_Fast(fetches, "Session.run: fetches must be a list of (node, output)");
  if (!seq) return nullptr;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    NodeOutput r;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "ii", &r.node, &r.index)) {
      Py_DECREF(seq);
      return nullptr;
    }
    fetch_refs.push_back(r);
  }
  Py_DECREF(seq);
  std::vector<Tensor> results;
  RunStats stats;
  Status s;
  Py_BEGIN_ALLOW_THREADS
  s = g->Run(feed_values, fetch_refs, inter_op_threads, &results, &stats);
  Py_END_ALLOW_THREADS
  if (!s.ok()) return SetError(s);
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(results.size()));
  for (size_t i = 0; out && i < results.size(); ++i) {
    PyObject* t = WrapTensor(std::move(results[i]));
    if (!t) {
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(out, i, t);
  }
  return Py_BuildValue("(N{s:L,s:L,s:L})", out, "nodes_run", static_cast<long long>(stats.nodes_run),
                       "max_concurrent", static_cast<long long>(stats.max_concurrent), "peak_bytes",
                       static_cast<long long>(stats.peak_bytes));
}

namespace {

// Queues `op` (inputs: one item per input arg; attrs converted) and returns
// its pending Tensor(s); call-site errors raise here.
PyObject* Submit(const OpDef* op, PyObject* inputs, std::vector<AttrValue> attrs, std::string where) {
  std::vector<Tensor> values;
  std::vector<std::shared_ptr<AsyncOp>> producers;
  std::vector<int> producer_outputs;
  struct Deferred {  // a Python scalar or list, typed after its partners
    InputSlot slot;
    size_t index;
    int type_attr;
    DType fixed;
    std::string label;
  };
  std::vector<Deferred> deferred;
  std::vector<int> type_attr_of;  // per flattened input
  bool ok = ForEachInput(*op, inputs, &attrs, [&](PyObject* item, const std::string& label, const ArgDef& arg) {
    type_attr_of.push_back(arg.type_attr_index);
    std::shared_ptr<PendingValue> pending = IsTensor(item) ? PendingOf(item) : nullptr;
    auto* out = dynamic_cast<AsyncOutput*>(pending.get());
    if (pending && !out && !ResolvePending(item)) return false;  // some other kind of future
    Tensor t;
    if (IsTensor(item)) {
      t = TensorOf(item);  // a pending tensor's shell: dtype and shape
    } else {
      Deferred d;
      d.slot.tensor = &t;
      if (!ConvertInput(item, op->name.c_str(), label, &d.slot)) return false;
      if (d.slot.pending) {
        d.slot.tensor = nullptr;
        d.index = values.size();
        d.type_attr = arg.type_attr_index;
        d.fixed = arg.fixed_type;
        d.label = label;
        deferred.push_back(std::move(d));
      }
    }
    if (!out && IsBorrowedFromNumpy(t.buffer())) {
      // Copied at submit: later writes to the array cannot change the result,
      // and pool threads never need the GIL to release a numpy array.
      Tensor copy;
      Status s = Tensor::Allocate(t.dtype(), t.shape(), &copy);
      if (!s.ok()) return SetError(s.WithPrefix(op->name + ": argument '" + label + "': ")) != nullptr;
      if (t.TotalBytes()) std::memcpy(copy.raw_data(), t.raw_data(), t.TotalBytes());
      t = std::move(copy);
    }
    values.push_back(std::move(t));
    producers.push_back(out ? out->op() : nullptr);
    producer_outputs.push_back(out ? out->index() : 0);
    return true;
  });
  if (!ok) return nullptr;
  // Python scalars and lists take the dtype of a partner sharing their type
  // attr, else the arg's fixed dtype, else the attr's, else their own.
  for (Deferred& d : deferred) {
    DType target = d.fixed;
    std::string partner = "the op";
    for (size_t j = 0; target == DType::kInvalid && j < values.size(); ++j) {
      if (values[j].valid() && type_attr_of[j] == d.type_attr && d.type_attr >= 0) {
        target = values[j].dtype();
        partner = "another input";
      }
    }
    if (target == DType::kInvalid && d.type_attr >= 0 && attrs[d.type_attr].is_set()) {
      target = attrs[d.type_attr].type;
      partner = "attr '" + op->attrs[d.type_attr].name + "'";
    }
    d.slot.tensor = &values[d.index];
    if (!ConvertPending(op->name.c_str(), d.label, target, partner, &d.slot)) return nullptr;
  }
  // Dtype, shape and attr errors raise here, at the call site.
  std::vector<DType> dtypes(op->outputs.size());
  std::vector<TensorShape> shapes(op->outputs.size());
  Status s = InferFromTensors(*op, values.data(), static_cast<int>(values.size()), attrs.data(), dtypes.data(),
                          shapes.data());
  if (!s.ok()) return SetError(s);
  auto async_op = std::make_shared<AsyncOp>(op, std::move(attrs), std::move(values), std::move(producers),
                                            std::move(producer_outputs), std::move(where));
  AsyncQueue::Global()->Submit(async_op);
  const Py_ssize_t n = static_cast<Py_ssize_t>(dtypes.size());
  PyObject* tuple = n == 1 ? nullptr : PyTuple_New(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* t = WrapPendingTensor(Tensor(dtypes[i], shapes[i], nullptr),
                                    std::make_shared<AsyncOutput>(async_op, static_cast<int>(i)));
    if (n == 1) return t;
    if (!t) {
      Py_XDECREF(tuple);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, i, t);
  }
  return tuple;
}

// Where an async op's wrapper parameters (OpCall.args) sit: inputs by arg,
// then the attrs the wrapper takes (OpDef::params order). Built once per op.
struct CallLayout {
  std::vector<int> input_pos;
  std::vector<std::pair<int, int>> attrs;  // (index in op.attrs, position in args)
};

const CallLayout* LayoutOf(const OpDef* op) {
  static auto* cache = new std::unordered_map<const OpDef*, CallLayout>();  // under the GIL
  auto it = cache->find(op);
  if (it != cache->end()) return &it->second;
  CallLayout l;
  for (const ArgDef& a : op->inputs) {
    auto p = std::find(op->params.begin(), op->params.end(), a.name);
    if (p == op->params.end()) return nullptr;
    l.input_pos.push_back(static_cast<int>(p - op->params.begin()));
  }
  for (size_t k = 0; k < op->params.size(); ++k) {
    if (std::find(l.input_pos.begin(), l.input_pos.end(), static_cast<int>(k)) != l.input_pos.end()) continue;
    const int i = op->FindAttr(op->params[k]);
    if (i < 0) return nullptr;
    l.attrs.emplace_back(i, static_cast<int>(k));
  }
  return &cache->emplace(op, std::move(l)).first->second;
}

std::string& PackageDir() {
  static std::string dir;
  return dir;
}

// "file:line" of a frame. Finding the line scans the code's line table, a
// good part of a submit's cost: from 3.11 the text is cached per (code,
// instruction), holding the code objects (a loop submits from few places).
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

// file:line of the innermost Python frame outside the opforge package.
std::string CallerLocation() {
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  Py_XINCREF(f);
  const std::string& pkg = PackageDir();
  std::string where = "<unknown>";
  while (f != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(f);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    Py_DECREF(code);
    if (file == nullptr) {
      PyErr_Clear();
    } else if (pkg.empty() || std::strncmp(file, pkg.c_str(), pkg.size()) != 0) {
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

// OPFORGE_EXECUTION=sync (read per call: tests and users set it at run time).
bool ForcedSync() {
  const char* env = std::getenv("OPFORGE_EXECUTION");
  if (env == nullptr) return false;
  while (std::isspace(static_cast<unsigned char>(*env))) ++env;
  const char* end = env + std::strlen(env);
  while (end > env && std::isspace(static_cast<unsigned char>(end[-1]))) --end;
  return end - env == 4 && strncasecmp(env, "sync", 4) == 0;
}

}  // namespace

PyObject* AsyncSubmit(const char* op_type, PyObject* inputs, PyObject* attrs_dict, const char* where) {
  const OpDef* op = FindOp(op_type);
  if (!op) return nullptr;
  std::vector<AttrValue> attrs;
  if (!ConvertAttrs(*op, attrs_dict, &attrs)) return nullptr;
  return Submit(op, inputs, std::move(attrs), where);
}

PyObject* AsyncHookInit(const char* package_dir) {
  PackageDir() = package_dir;
  Py_RETURN_NONE;
}

PyObject* AsyncHook(PyObject* call) {
  static PyObject *s_record = PyUnicode_InternFromString("record"), *s_run = PyUnicode_InternFromString("run"),
                  *s_op_type = PyUnicode_InternFromString("op_type"), *s_args = PyUnicode_InternFromString("args");
  // A call the gradient recorder wants recorded runs synchronously (its
  // inputs, attrs and outputs are recorded from the eager execution).
  PyObject* record = PyObject_GetAttr(call, s_record);
  if (!record) return nullptr;
  const int rec = PyObject_IsTrue(record);
  Py_DECREF(record);
  if (rec < 0) return nullptr;
  if (rec || ForcedSync()) return PyObject_CallMethodObjArgs(call, s_run, nullptr);
  PyObject* type_obj = PyObject_GetAttr(call, s_op_type);
  if (!type_obj) return nullptr;
  const char* op_type = PyUnicode_Check(type_obj) ? PyUnicode_AsUTF8(type_obj) : nullptr;
  const OpDef* op = op_type ? FindOp(op_type) : nullptr;
  Py_DECREF(type_obj);  // op_type's name lives in the OpDef
  if (!op) {
    if (!PyErr_Occurred()) SetError(errors::InvalidArgument("async: OpCall.op_type must be a string"));
    return nullptr;
  }
  const CallLayout* layout = LayoutOf(op);
  PyObject* args = PyObject_GetAttr(call, s_args);
  if (!args) return nullptr;
  const Py_ssize_t n_args = PyTuple_Check(args) ? PyTuple_GET_SIZE(args) : -1;
  if (!layout || n_args != static_cast<Py_ssize_t>(op->params.size())) {
    Py_DECREF(args);
    return SetInvalidArgument(op->name.c_str(), "async: the call's arguments do not match the op's parameters");
  }
  // Attrs the wrapper passes: None means the declared default.
  std::vector<AttrValue> attrs(op->attrs.size());
  for (const auto& [i, pos] : layout->attrs) {
    if (!ConvertAnyAttr(PyTuple_GET_ITEM(args, pos), op->name.c_str(), op->attrs[i], &attrs[i])) {
      Py_DECREF(args);
      return nullptr;
    }
  }
  PyObject* inputs = PyTuple_New(static_cast<Py_ssize_t>(layout->input_pos.size()));
  for (size_t k = 0; inputs && k < layout->input_pos.size(); ++k) {
    PyObject* v = PyTuple_GET_ITEM(args, layout->input_pos[k]);
    Py_INCREF(v);
    PyTuple_SET_ITEM(inputs, static_cast<Py_ssize_t>(k), v);
  }
  Py_DECREF(args);
  if (!inputs) return nullptr;
  PyObject* result = Submit(op, inputs, std::move(attrs), CallerLocation());
  Py_DECREF(inputs);
  return result;
}

PyObject* AsyncFlush() {
  Status s;
  Py_BEGIN_ALLOW_THREADS
  s = AsyncQueue::Global()->Flush();
  Py_END_ALLOW_THREADS
  if (!s.ok()) return SetError(s);
  Py_RETURN_NONE;
}

PyObject* AsyncDrain() {
  Py_BEGIN_ALLOW_THREADS
  AsyncQueue::Global()->Drain();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

PyObject* AsyncQueueSize() { return PyLong_FromLongLong(AsyncQueue::Global()->queued()); }
PyObject* AsyncPending() { return PyLong_FromLongLong(AsyncQueue::Global()->pending()); }

PyObject* IsPending(PyObject* tensor) { return PyBool_FromLong(IsTensor(tensor) && PendingOf(tensor) != nullptr); }

PyObject* InterOpThreads() { return PyLong_FromLong(NumInterOpThreads()); }

}  // namespace py
}  // namespace opforge
