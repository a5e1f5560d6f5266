#include "py_graph.h"

#include <string>
#include <utility>
#include <vector>

#include "../cpp/framework/graph.h"
#include "py_op_args.h"

namespace opforge {
namespace py {
namespace {

constexpr const char* kCapsule = "opforge.Graph";

Graph* GraphOf(PyObject* capsule) {
  void* p = PyCapsule_GetPointer(capsule, kCapsule);
  if (!p) {
    PyErr_Clear();
    SetError(errors::InvalidArgument("expected a graph handle from graph_new()"));
  }
  return static_cast<Graph*>(p);
}


PyObject* ShapeTuple(const TensorShape& s) {
  PyObject* t = PyTuple_New(s.rank());
  for (int i = 0; t && i < s.rank(); ++i) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(s.dim(i)));
  return t;
}

PyObject* IntList(const std::vector<int64_t>& v) {
  PyObject* l = PyList_New(static_cast<Py_ssize_t>(v.size()));
  for (size_t i = 0; l && i < v.size(); ++i) PyList_SET_ITEM(l, i, PyLong_FromLongLong(v[i]));
  return l;
}

PyObject* AttrToPy(const AttrDef& def, const AttrValue& v) {
  if (!v.is_set() || v.is_none()) Py_RETURN_NONE;
  switch (def.type) {
    case AttrType::kInt: return PyLong_FromLongLong(v.i);
    case AttrType::kFloat: return PyFloat_FromDouble(v.f);
    case AttrType::kBool: return PyBool_FromLong(v.b);
    case AttrType::kString: return PyUnicode_FromStringAndSize(v.s.data(), static_cast<Py_ssize_t>(v.s.size()));
    case AttrType::kType: {
      PyObject* d = DTypeObject(v.type);
      Py_INCREF(d);
      return d;
    }
    case AttrType::kShape:
    case AttrType::kListInt: return IntList(v.list_i);
    case AttrType::kListFloat: {
      PyObject* l = PyList_New(static_cast<Py_ssize_t>(v.list_f.size()));
      for (size_t i = 0; l && i < v.list_f.size(); ++i) PyList_SET_ITEM(l, i, PyFloat_FromDouble(v.list_f[i]));
      return l;
    }
    case AttrType::kListType: {
      PyObject* l = PyList_New(static_cast<Py_ssize_t>(v.list_type.size()));
      for (size_t i = 0; l && i < v.list_type.size(); ++i) {
        PyObject* d = DTypeObject(v.list_type[i]);
        Py_INCREF(d);
        PyList_SET_ITEM(l, i, d);
      }
      return l;
    }
  }
  Py_RETURN_NONE;
}

PyObject* OutputsInfo(const OpDef& op, const std::vector<DType>& dtypes, const std::vector<TensorShape>& shapes,
                      const std::vector<AttrValue>& attrs, int node) {
  PyObject* dt = PyTuple_New(static_cast<Py_ssize_t>(dtypes.size()));
  PyObject* sh = PyTuple_New(static_cast<Py_ssize_t>(shapes.size()));
  PyObject* at = PyDict_New();
  for (size_t i = 0; i < dtypes.size(); ++i) {
    PyObject* d = DTypeObject(dtypes[i]);
    Py_INCREF(d);
    PyTuple_SET_ITEM(dt, i, d);
    PyTuple_SET_ITEM(sh, i, ShapeTuple(shapes[i]));
  }
  for (size_t i = 0; i < op.attrs.size(); ++i) {
    PyObject* v = AttrToPy(op.attrs[i], attrs[i]);
    PyDict_SetItemString(at, op.attrs[i].name.c_str(), v);
    Py_XDECREF(v);
  }
  return Py_BuildValue("(iNNN)", node, dt, sh, at);
}

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
    const long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      PyErr_Clear();
      return SetInvalidArgument("placeholder", "argument 'shape' must be a sequence of ints");
    }
    dims.push_back(v);
  }
  Py_DECREF(seq);
  TensorShape s;
  Status st = TensorShape::Make(dims.data(), static_cast<int>(dims.size()), &s);
  if (!st.ok()) return SetError(st.WithPrefix(std::string("placeholder '") + name + "': argument 'shape': "));
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
  const GraphNode& node = g->node(id);
  return OutputsInfo(*op, node.dtypes, node.shapes, node.attrs, id);
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
}  // namespace py
}  // namespace opforge
