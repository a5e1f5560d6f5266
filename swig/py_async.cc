#include "py_async.h"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../cpp/framework/engine.h"
#include "py_op_args.h"

namespace opforge {
namespace py {
namespace {

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
