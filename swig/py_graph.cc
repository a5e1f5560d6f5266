#include "py_graph.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../cpp/framework/graph.h"
#include "../cpp/framework/run_profile.h"
#include "py_call.h"
#include "py_graph_views.h"
#include "py_op_args.h"
#include "py_state.h"

namespace opforge {
namespace py {
namespace {

constexpr const char* kCapsule = "opforge.Graph";  // py_graph_views.cc reads it too

PyObject* symbolic_type = nullptr;  // opforge.graph.SymbolicTensor (GraphInit)

// One input as the binder takes it: a SymbolicTensor of `graph_obj` is its
// node's output (dtype and shape from the C++ graph); anything else is what
// an eager call takes (Tensors, arrays, scalars, lists), made a constant
// node after binding.
bool ToGraphInput(Graph* g, PyObject* graph_obj, PyObject* obj, const OpDef& op, const std::string& label,
                  BindInput* out) {
  static PyObject *s_graph = PyUnicode_InternFromString("graph"), *s_node = PyUnicode_InternFromString("_node"),
                  *s_index = PyUnicode_InternFromString("value_index");
  if (symbolic_type == nullptr || !PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(symbolic_type))) {
    return ToBindInput(obj, op.name.c_str(), label, false, out);
  }
  PyObject* owner = PyObject_GetAttr(obj, s_graph);
  if (!owner) return false;
  Py_DECREF(owner);  // only compared
  if (owner != graph_obj) {
    SetInvalidArgument(op.name.c_str(), "argument '" + label + "' is a tensor of another graph");
    return false;
  }
  PyObject* node_obj = PyObject_GetAttr(obj, s_node);
  PyObject* index_obj = node_obj ? PyObject_GetAttr(obj, s_index) : nullptr;
  const long node = node_obj ? PyLong_AsLong(node_obj) : -1;
  const long index = index_obj ? PyLong_AsLong(index_obj) : -1;
  Py_XDECREF(node_obj);
  Py_XDECREF(index_obj);
  if (PyErr_Occurred()) return false;
  if (node < 0 || node >= g->num_nodes() || index < 0 ||
      index >= static_cast<long>(g->node(static_cast<int>(node)).dtypes.size())) {
    SetInvalidArgument(op.name.c_str(), "argument '" + label + "' refers to a tensor that is not in this graph");
    return false;
  }
  const opforge::GraphNode& src = g->node(static_cast<int>(node));
  *out = BindInput::Symbolic(static_cast<int>(node), static_cast<int>(index), src.dtypes[index],
                             src.RankUnknown(static_cast<int>(index)) ? PartialShape::UnknownRank()
                                                                      : PartialShape(src.shapes[index]));
  return true;
}

// A value made a constant node: copied when it borrows numpy memory, so
// later writes to the array do not change the graph.
Status ConstantOf(Graph* g, Tensor value, const std::string& where, int* id) {
  if (IsBorrowedFromNumpy(value.buffer())) {
    Tensor copy;
    OF_RETURN_IF_ERROR(Tensor::Allocate(value.dtype(), value.shape(), &copy));
    if (value.TotalBytes()) std::memcpy(copy.raw_data(), value.raw_data(), value.TotalBytes());
    value = std::move(copy);
  }
  *id = g->AddConstant("Const", std::move(value), where);
  return Status::OK();
}

}  // namespace

PyObject* GraphInit(PyObject* symbolic_tensor_type) {
  if (!PyType_Check(symbolic_tensor_type)) return SetInvalidArgument("graph_init", "expected the SymbolicTensor type");
  Py_INCREF(symbolic_tensor_type);
  Py_XSETREF(symbolic_type, symbolic_tensor_type);
  Py_RETURN_NONE;
}

namespace {

// The node's output views, cached on the Python Graph (`_out_views`), so an
// output always has one SymbolicTensor.
PyObject* OutputViews(PyObject* graph_obj, int node, Py_ssize_t n) {
  static PyObject* s_views = PyUnicode_InternFromString("_out_views");
  PyObject* cache = PyObject_GetAttr(graph_obj, s_views);
  if (!cache) return nullptr;
  PyObject* key = PyLong_FromLong(node);
  PyObject* outs = key ? PyDict_GetItemWithError(cache, key) : nullptr;  // borrowed
  if (outs) {
    Py_INCREF(outs);
  } else if (key && !PyErr_Occurred()) {
    outs = PyTuple_New(n);
    for (Py_ssize_t i = 0; outs && i < n; ++i) {
      PyObject* t = PyObject_CallFunction(symbolic_type, "Oin", graph_obj, node, i);
      if (!t) Py_CLEAR(outs);
      else PyTuple_SET_ITEM(outs, i, t);
    }
    if (outs && PyDict_SetItem(cache, key, outs) != 0) Py_CLEAR(outs);
  }
  Py_XDECREF(key);
  Py_DECREF(cache);
  if (!outs || n != 1) return outs;
  PyObject* only = PyTuple_GET_ITEM(outs, 0);
  Py_INCREF(only);
  Py_DECREF(outs);
  return only;
}

// Binds a call (`inputs`: one object per op input, a list for list args;
// `attrs`: one per op attr, unset where not given), adds constants for its
// values and the node; *id is the node's.
bool AddCall(PyObject* graph_obj, Graph* g, const OpDef& op, PyObject* const* inputs, AttrValue* attrs,
             const std::string& base, const std::string& where, int* id) {
  InlinedVector<BindInput, 4> bind_inputs(op.inputs.size());
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    const ArgDef& arg = op.inputs[a];
    PyObject* obj = inputs[a];
    if (!arg.is_list()) {
      if (!ToGraphInput(g, graph_obj, obj, op, arg.name, &bind_inputs[a])) return false;
      continue;
    }
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
      SetInvalidArgument(op.name.c_str(), "argument '" + arg.name + "' must be a list or tuple of tensors, not " +
                                              Py_TYPE(obj)->tp_name);
      return false;
    }
    BindInput& list = bind_inputs[a];
    list.kind = BindInput::kList;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    list.items.resize(static_cast<size_t>(n));
    for (Py_ssize_t k = 0; k < n; ++k) {
      if (!ToGraphInput(g, graph_obj, PySequence_Fast_GET_ITEM(obj, k), op, InputLabel(arg, k, true),
                        &list.items[static_cast<size_t>(k)])) {
        return false;
      }
    }
  }
  // The name is taken even when the call fails, so errors name the node.
  std::string name = g->UniqueName(base);
  BoundCall bc;
  Status s = Bind(op, bind_inputs.data(), attrs, &bc);
  if (!s.ok()) {
    opforge::GraphNode label;
    label.name = name;
    label.op = &op;
    label.where = where;
    SetError(s.WithPrefix(label.Label() + ": "));
    return false;
  }
  std::vector<NodeOutput> refs(bc.slots.size());
  for (size_t i = 0; i < bc.slots.size(); ++i) {
    if (bc.slots[i].kind == BindInput::kSymbolic) {
      refs[i] = NodeOutput{bc.slots[i].node, bc.slots[i].output};
      continue;
    }
    s = ConstantOf(g, bc.values[i], where, &refs[i].node);
    if (!s.ok()) {
      SetError(s.WithPrefix(op.name + ": "));
      return false;
    }
  }
  *id = g->AddBound(std::move(name), bc, std::move(refs), where);
  return true;
}

}  // namespace

PyObject* GraphEntry(PyObject* graph_obj, const OpDef& op, PyObject* const* inputs, AttrValue* attrs) {
  static PyObject* s_handle = PyUnicode_InternFromString("_handle");
  PyObject* handle = PyObject_GetAttr(graph_obj, s_handle);
  if (!handle) return nullptr;
  Graph* g = GraphOf(handle);
  Py_DECREF(handle);  // the Python Graph holds it
  int id = -1;
  if (!g || !AddCall(graph_obj, g, op, inputs, attrs, op.name, CallerLocation(), &id)) return nullptr;
  return OutputViews(graph_obj, id, static_cast<Py_ssize_t>(op.outputs.size()));
}

PyObject* GraphAddCall(PyObject* graph_obj, PyObject* graph, const char* op_type, const char* base, PyObject* where_obj,
                       PyObject* inputs, PyObject* attrs_dict) {
  Graph* g = GraphOf(graph);
  const OpDef* op = g ? FindOp(op_type) : nullptr;
  if (!op) return nullptr;
  const std::string where = where_obj == Py_None ? CallerLocation()
                            : PyUnicode_Check(where_obj) ? PyUnicode_AsUTF8(where_obj) : "<unknown>";
  if (!PyTuple_Check(inputs) || static_cast<size_t>(PyTuple_GET_SIZE(inputs)) != op->inputs.size()) {
    return SetInvalidArgument(op->name.c_str(), "expected a tuple of " + std::to_string(op->inputs.size()) + " inputs");
  }
  std::vector<AttrValue> attrs;
  if (!ConvertAttrs(*op, attrs_dict, &attrs)) return nullptr;
  int id = -1;
  if (!AddCall(graph_obj, g, *op, &PyTuple_GET_ITEM(inputs, 0), attrs.data(), base, where, &id)) return nullptr;
  return OutputViews(graph_obj, id, static_cast<Py_ssize_t>(op->outputs.size()));
}

PyObject* GraphNew() {
  return PyCapsule_New(new Graph(), kCapsule, [](PyObject* c) {
    delete static_cast<Graph*>(PyCapsule_GetPointer(c, kCapsule));
  });
}

bool RejectSymbolic(PyObject* obj, const char* op, const std::string& arg) {
  if (symbolic_type == nullptr || !PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(symbolic_type))) {
    return false;
  }
  PyObject* name = PyObject_GetAttrString(obj, "name");
  PyObject* graph = name ? PyObject_GetAttrString(obj, "graph") : nullptr;
  PyObject* graph_repr = graph ? PyObject_Repr(graph) : nullptr;
  const char* n = name ? PyUnicode_AsUTF8(name) : nullptr;
  const char* gr = graph_repr ? PyUnicode_AsUTF8(graph_repr) : nullptr;
  const std::string tensor = n ? n : "?", where = gr ? gr : "a graph";
  Py_XDECREF(name);
  Py_XDECREF(graph);
  Py_XDECREF(graph_repr);
  PyErr_Clear();
  SetInvalidArgument(op, "argument '" + arg + "' is '" + tensor + "', a symbolic tensor of graph " + where +
                             ": it has no value outside a Session. Build this op inside `with graph.as_default():` "
                             "and compute it with opforge.Session(graph).run(...)");
  return true;
}

PyObject* GraphPlaceholder(PyObject* graph, const char* name, PyObject* dtype, PyObject* shape, const char* where) {
  Graph* g = GraphOf(graph);
  if (!g) return nullptr;
  DType d;
  if (!ToDType(dtype, &d)) {
    return SetInvalidArgument("placeholder", std::string("argument 'dtype' is not an opforge dtype: ") +
                                                 Py_TYPE(dtype)->tp_name);
  }
  if (shape == Py_None) {  // unknown rank: any shape is fed
    const int id = g->AddPlaceholder(name, d, TensorShape(), where, /*unknown_rank=*/true);
    return PyLong_FromLong(id);
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

PyObject* GraphRun(PyObject* graph, PyObject* feeds, PyObject* fetches, int inter_op_threads, PyObject* resources) {
  Graph* g = GraphOf(graph);
  if (!g) return nullptr;
  ResourceMgr* rm = nullptr;
  if (!ResourcesOf(resources, &rm)) return nullptr;
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
  s = g->Run(feed_values, fetch_refs, inter_op_threads, &results, &stats, rm);
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
  // The stats as a plain tuple (nodes_run, max_concurrent, peak_bytes):
  // Session makes the dict only when asked (a dict per run cost ~0.5 us).
  return Py_BuildValue("(N(LLL))", out, static_cast<long long>(stats.nodes_run),
                       static_cast<long long>(stats.max_concurrent), static_cast<long long>(stats.peak_bytes));
}
PyObject* GraphProfile(bool on) { return PyBool_FromLong(SetProfilingRuns(on)); }

PyObject* GraphProfileTake() {
  std::vector<StepTiming> rec = TakeStepTimings();
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(rec.size()));
  for (size_t i = 0; out && i < rec.size(); ++i) {
    PyObject* row = Py_BuildValue("(ssL)", rec[i].node.c_str(), rec[i].op.c_str(), static_cast<long long>(rec[i].ns));
    if (!row) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, i, row);
  }
  return out;
}
}  // namespace py
}  // namespace opforge
