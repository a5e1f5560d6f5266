#include "py_autograd.h"
#include "py_state.h"

#include <structmember.h>

#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "py_convert.h"
#include "py_errors.h"
#include "py_tensor.h"

namespace opforge {
namespace py {
namespace {

// Gradient mode per thread (no_grad, enable_grad); zero-initialised, so a
// new thread starts with recording on and no TLS constructor runs.
thread_local bool grad_disabled = false;

PyObject* python_gradients = nullptr;  // RegisterGradient's dict, op type -> fn

// ---- Meta: what autograd knows of one tensor --------------------------------

struct PyMeta {
  PyObject_HEAD
  PyObject* grad;     // accumulated gradient (a Tensor), or NULL
  PyObject* grad_fn;  // the Node that computed the tensor, NULL for leaves
  Py_ssize_t index;   // which output of grad_fn
  char requires_grad;
  PyObject* weakrefs;
};

PyTypeObject* meta_type = nullptr;
PyTypeObject* node_type = nullptr;

PyObject* NewMeta(PyObject* grad_fn, Py_ssize_t index) {
  PyMeta* m = PyObject_New(PyMeta, meta_type);
  if (!m) return nullptr;
  Py_XINCREF(grad_fn);
  m->grad = nullptr;
  m->grad_fn = grad_fn;
  m->index = index;
  m->requires_grad = 1;
  m->weakrefs = nullptr;
  return reinterpret_cast<PyObject*>(m);
}

PyObject* MetaNew(PyTypeObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"grad_fn", "index", nullptr};
  PyObject* grad_fn = Py_None;
  Py_ssize_t index = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|On:Meta", const_cast<char**>(kwlist), &grad_fn, &index)) {
    return nullptr;
  }
  if (grad_fn != Py_None && Py_TYPE(grad_fn) != node_type) {
    PyErr_SetString(PyExc_TypeError, "Meta: grad_fn must be a Node or None");
    return nullptr;
  }
  return NewMeta(grad_fn == Py_None ? nullptr : grad_fn, index);
}

void MetaDealloc(PyObject* self) {
  PyMeta* m = reinterpret_cast<PyMeta*>(self);
  PyTypeObject* type = Py_TYPE(self);
  if (m->weakrefs) PyObject_ClearWeakRefs(self);
  Py_CLEAR(m->grad);
  Py_CLEAR(m->grad_fn);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMemberDef kMetaMembers[] = {
    {"requires_grad", T_BOOL, offsetof(PyMeta, requires_grad), 0, "Whether the tensor requires a gradient."},
    {"grad", T_OBJECT, offsetof(PyMeta, grad), 0, "The accumulated gradient, or None."},
    {"grad_fn", T_OBJECT, offsetof(PyMeta, grad_fn), READONLY, "The Node that computed the tensor, or None."},
    {"index", T_PYSSIZET, offsetof(PyMeta, index), READONLY, "Which output of grad_fn the tensor is."},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(PyMeta, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

// ---- Node: one recorded op --------------------------------------------------

struct PyNode {
  PyObject_HEAD
  const OpDef* op;
  PyObject* inputs;   // tuple: per flat input, the caller's Tensor (requires grad) or a saved one
  PyObject* edges;    // tuple: per flat input, its Meta (requires grad) or None
  PyObject* outputs;  // tuple: aliases of the outputs, without autograd state
  PyObject* attrs;    // dict, built from `values` on first get_attr
  std::vector<AttrValue>* values;  // the completed attrs
  PyObject* weakrefs;
};

void NodeDealloc(PyObject* self) {
  PyNode* n = reinterpret_cast<PyNode*>(self);
  PyTypeObject* type = Py_TYPE(self);
  if (n->weakrefs) PyObject_ClearWeakRefs(self);
  // Freeing a long chain recurses Node -> edges tuple -> Meta -> Node; the
  // tuples' dealloc uses CPython's trashcan, which bounds the C stack depth
  // (tests/test_autodiff_recording.py frees a 50,000-op chain).
  Py_CLEAR(n->inputs);
  Py_CLEAR(n->edges);
  Py_CLEAR(n->outputs);
  Py_CLEAR(n->attrs);
  delete n->values;
  n->values = nullptr;
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* NodeNew(PyTypeObject*, PyObject*, PyObject*) {
  PyErr_SetString(PyExc_TypeError, "Node objects are made by recording ops, not created directly");
  return nullptr;
}

PyObject* NodeType(PyObject* self, void*) {
  const std::string& name = reinterpret_cast<PyNode*>(self)->op->name;
  return PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size()));
}

PyObject* NodeAttrs(PyNode* n) {
  if (n->attrs) return n->attrs;
  const OpDef& op = *n->op;
  PyObject* dict = PyDict_New();
  for (size_t i = 0; dict && i < op.attrs.size(); ++i) {
    PyObject* v = AttrToPython(op.attrs[i], (*n->values)[i]);
    if (!v || PyDict_SetItemString(dict, op.attrs[i].name.c_str(), v) < 0) Py_CLEAR(dict);
    Py_XDECREF(v);
  }
  n->attrs = dict;
  return dict;
}

PyObject* NodeGetAttr(PyObject* self, PyObject* name) {
  PyNode* n = reinterpret_cast<PyNode*>(self);
  PyObject* attrs = NodeAttrs(n);
  if (!attrs) return nullptr;
  PyObject* v = PyDict_GetItemWithError(attrs, name);
  if (v) {
    Py_INCREF(v);
    return v;
  }
  if (PyErr_Occurred()) return nullptr;
  PyObject* repr = PyObject_Repr(name);
  if (!repr) return nullptr;
  SetInvalidArgument(n->op->name.c_str(), std::string("op has no attr ") + PyUnicode_AsUTF8(repr));
  Py_DECREF(repr);
  return nullptr;
}

// Per flat input, whether it needs a gradient (PyTorch's ctx.needs_input_grad):
// its edge is a Meta that still requires one. Gradient functions skip work
// for the others (MatMul's gradient skips a GEMM).
PyObject* NodeNeedsInputGrad(PyObject* self, void*) {
  PyObject* edges = reinterpret_cast<PyNode*>(self)->edges;
  const Py_ssize_t n = PyTuple_GET_SIZE(edges);
  PyObject* out = PyTuple_New(n);
  if (!out) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* e = PyTuple_GET_ITEM(edges, i);
    const bool needs = e != Py_None && Py_TYPE(e) == meta_type && reinterpret_cast<PyMeta*>(e)->requires_grad;
    PyObject* b = needs ? Py_True : Py_False;
    Py_INCREF(b);
    PyTuple_SET_ITEM(out, i, b);
  }
  return out;
}

PyObject* NodeRepr(PyObject* self) {
  return PyUnicode_FromFormat("<grad_fn %s>", reinterpret_cast<PyNode*>(self)->op->name.c_str());
}

PyMemberDef kNodeMembers[] = {
    {"inputs", T_OBJECT, offsetof(PyNode, inputs), READONLY, "The recorded inputs, flat (a tuple of Tensors)."},
    {"edges", T_OBJECT, offsetof(PyNode, edges), READONLY, "Per input: its Meta if it requires a gradient, else None."},
    {"outputs", T_OBJECT, offsetof(PyNode, outputs), READONLY, "Aliases of the outputs (a tuple of Tensors)."},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(PyNode, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyGetSetDef kNodeGetSet[] = {
    {"type", NodeType, nullptr, "The op type.", nullptr},
    {"name", NodeType, nullptr, "The op type (TensorFlow's op.name).", nullptr},
    {"needs_input_grad", NodeNeedsInputGrad, nullptr,
     "Per flat input, whether it needs a gradient (a tuple of bools).", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef kNodeMethods[] = {
    {"get_attr", NodeGetAttr, METH_O, "get_attr(name) -> the completed attr's value"},
    {nullptr, nullptr, 0, nullptr},
};

// The types stay out of the cyclic GC like Tensor: the graph they form is a
// DAG from results back to leaves, and it is freed by reference counting.
PyTypeObject* MakeType(const char* name, int size, PyType_Slot* slots) {
  PyType_Spec spec = {name, size, 0, Py_TPFLAGS_DEFAULT, slots};
  return reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
}

inline PyMeta* RequiringMeta(PyObject* obj) {
  obj = UnwrapVariable(obj);  // an eager opforge.Variable in a list input: its leaf
  if (!IsTensor(obj)) return nullptr;
  PyObject* ag = reinterpret_cast<PyTensor*>(obj)->ag;
  if (ag == nullptr || Py_TYPE(ag) != meta_type) return nullptr;
  PyMeta* m = reinterpret_cast<PyMeta*>(ag);
  return m->requires_grad ? m : nullptr;
}

bool Differentiable(const OpDef& op) {
  if (!op.no_gradient) return true;
  if (python_gradients == nullptr) return false;
  PyObject* v = PyDict_GetItemString(python_gradients, op.name.c_str());
  return v != nullptr;
}

}  // namespace

bool WantsRecording(const OpDef& op, PyObject* const* inputs) {
  if (meta_type == nullptr) return false;  // opforge.autodiff was never imported
  bool any = false;
  for (size_t a = 0; !any && a < op.inputs.size(); ++a) {
    PyObject* obj = inputs[a];
    if (!op.inputs[a].is_list()) {
      any = RequiringMeta(obj) != nullptr;
      continue;
    }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    for (Py_ssize_t k = 0; !any && k < n; ++k) any = RequiringMeta(PySequence_Fast_GET_ITEM(obj, k)) != nullptr;
  }
  return any && !grad_disabled && Differentiable(op);
}

bool RecordCall(const OpDef& op, PyObject* const* inputs, const Tensor* tensors, size_t num_tensors,
                const AttrValue* attrs, PyObject* result) {
  const Py_ssize_t n = static_cast<Py_ssize_t>(num_tensors);
  const bool several = PyTuple_Check(result);
  const Py_ssize_t num_outputs = several ? PyTuple_GET_SIZE(result) : 1;
  PyNode* node = PyObject_New(PyNode, node_type);
  if (!node) return false;
  node->op = &op;
  node->attrs = nullptr;
  node->weakrefs = nullptr;
  node->values = nullptr;
  node->inputs = PyTuple_New(n);
  node->edges = PyTuple_New(n);
  node->outputs = PyTuple_New(num_outputs);
  PyObject* self = reinterpret_cast<PyObject*>(node);
  if (!node->inputs || !node->edges || !node->outputs) {
    Py_DECREF(self);
    return false;
  }
  node->values = new std::vector<AttrValue>(attrs, attrs + op.attrs.size());

  // Inputs, flat: the caller's object where it requires a gradient (the
  // backward pass follows its Meta), else the converted tensor, copied if
  // the caller could still write its memory.
  Py_ssize_t slot = 0;
  auto add = [&](PyObject* given) -> bool {
    given = UnwrapVariable(given);
    PyMeta* meta = RequiringMeta(given);
    PyObject* saved;
    PyObject* edge;
    if (meta) {
      saved = given;
      Py_INCREF(saved);
      edge = reinterpret_cast<PyObject*>(meta);
    } else {
      const Tensor& t = tensors[slot];
      if (BorrowsWritableMemory(t)) {
        Tensor copy;
        Status s = Tensor::Allocate(t.dtype(), t.shape(), &copy);
        if (!s.ok()) return SetError(s) != nullptr;
        if (t.TotalBytes()) std::memcpy(copy.raw_data(), t.raw_data(), t.TotalBytes());
        saved = WrapTensor(std::move(copy));
      } else {
        saved = WrapTensor(t);
      }
      if (!saved) return false;
      edge = Py_None;
    }
    Py_INCREF(edge);
    PyTuple_SET_ITEM(node->inputs, slot, saved);
    PyTuple_SET_ITEM(node->edges, slot, edge);
    ++slot;
    return true;
  };
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    PyObject* obj = inputs[a];
    bool ok = true;
    if (!op.inputs[a].is_list()) {
      ok = add(obj);
    } else {
      const Py_ssize_t len = PySequence_Fast_GET_SIZE(obj);
      for (Py_ssize_t k = 0; ok && k < len; ++k) ok = add(PySequence_Fast_GET_ITEM(obj, k));
    }
    if (!ok) {
      Py_DECREF(self);
      return false;
    }
  }
  if (slot != n) {  // cannot happen: ConvertArgs flattened the same inputs
    Py_DECREF(self);
    PyErr_SetString(PyExc_SystemError, "RecordCall: input count mismatch");
    return false;
  }

  // Outputs: aliases without autograd state (no cycle through the Node),
  // and each floating-point result gets its Meta.
  for (Py_ssize_t i = 0; i < num_outputs; ++i) {
    PyObject* out = several ? PyTuple_GET_ITEM(result, i) : result;
    PyObject* alias = WrapTensor(TensorOf(out));
    if (!alias) {
      Py_DECREF(self);
      return false;
    }
    PyTuple_SET_ITEM(node->outputs, i, alias);
  }
  for (Py_ssize_t i = 0; i < num_outputs; ++i) {
    PyObject* out = several ? PyTuple_GET_ITEM(result, i) : result;
    if (!IsFloating(TensorOf(out).dtype())) continue;
    PyObject* meta = NewMeta(self, i);
    if (!meta) {
      Py_DECREF(self);
      return false;
    }
    Py_XSETREF(reinterpret_cast<PyTensor*>(out)->ag, meta);
  }
  Py_DECREF(self);  // the outputs' Metas hold it (or nothing does: no float output)
  return true;
}

PyObject* AutogradInit(PyObject* gradients) {
  if (!PyDict_Check(gradients)) {
    PyErr_SetString(PyExc_TypeError, "autograd_init: expected the dict of Python gradients");
    return nullptr;
  }
  Py_INCREF(gradients);
  Py_XSETREF(python_gradients, gradients);
  if (meta_type == nullptr) {
    PyType_Slot meta_slots[] = {
        {Py_tp_dealloc, reinterpret_cast<void*>(MetaDealloc)},
        {Py_tp_new, reinterpret_cast<void*>(MetaNew)},
        {Py_tp_members, kMetaMembers},
        {Py_tp_doc, const_cast<char*>("Meta(grad_fn=None, index=0): a tensor's autograd state.")},
        {0, nullptr},
    };
    PyType_Slot node_slots[] = {
        {Py_tp_dealloc, reinterpret_cast<void*>(NodeDealloc)},
        {Py_tp_new, reinterpret_cast<void*>(NodeNew)},
        {Py_tp_members, kNodeMembers},
        {Py_tp_getset, kNodeGetSet},
        {Py_tp_methods, kNodeMethods},
        {Py_tp_repr, reinterpret_cast<void*>(NodeRepr)},
        {Py_tp_doc, const_cast<char*>("A recorded op: the grad_fn of its outputs.")},
        {0, nullptr},
    };
    PyTypeObject* node = MakeType("opforge.autodiff.Node", sizeof(PyNode), node_slots);
    if (!node) return nullptr;
    PyTypeObject* meta = MakeType("opforge.autodiff.Meta", sizeof(PyMeta), meta_slots);
    if (!meta) {
      Py_DECREF(node);
      return nullptr;
    }
    node_type = node;
    meta_type = meta;
  }
  return Py_BuildValue("(OO)", meta_type, node_type);
}

PyObject* GradEnabled() { return PyBool_FromLong(!grad_disabled); }

PyObject* SetGradEnabled(PyObject* enabled) {
  const int on = PyObject_IsTrue(enabled);
  if (on < 0) return nullptr;
  PyObject* previous = PyBool_FromLong(!grad_disabled);
  grad_disabled = !on;
  return previous;
}

}  // namespace py
}  // namespace opforge
