// The opforge extension module: the runtime's Python entry points plus one
// generated entry point per op (generated/swig/gen_<group>_ops.i).
%module pywrap_internal

%{
#include "py_autograd.h"
#include "py_binding.h"
#include "py_async.h"
#include "py_graph.h"
#include "py_graph_views.h"
#include "py_call.h"
#include "py_dlpack.h"
#include "py_module.h"
#include "py_op_library.h"
#include "py_state.h"
%}

%include "opforge_typemaps.i"

%init %{
  if (!opforge::py::InitModule()) return -1;  // SWIG >= 4.5: multi-phase init
%}

%feature("docstring") opforge::py::Init "_init(tensor_methods, dtypes, error_classes) -> Tensor type";
%rename(_init) opforge::py::Init;
%rename(check_fingerprint) opforge::py::CheckFingerprint;
%rename(to_tensor) opforge::py::ToTensor;
%rename(registry_json) opforge::py::RegistryJson;
%rename(registration_errors) opforge::py::RegistrationErrors;
%rename(_validate_declaration) opforge::py::ValidateDeclaration;
namespace opforge { namespace py {
PyObject* Init(PyObject* tensor_methods, PyObject* dtypes, PyObject* error_classes);
PyObject* CheckFingerprint(const char* group, const char* expected);
PyObject* ToTensor(PyObject* value, PyObject* dtype);
PyObject* RegistryJson();
PyObject* RegistrationErrors();
PyObject* ValidateDeclaration(const char* name, PyObject* specs);
}}

// The gradient tape's C half (py_autograd.h).
%feature("docstring") opforge::py::AutogradInit "autograd_init(python_gradients) -> (Meta, Node)";
%rename(autograd_init) opforge::py::AutogradInit;
%rename(grad_enabled) opforge::py::GradEnabled;
%rename(set_grad_enabled) opforge::py::SetGradEnabled;
namespace opforge { namespace py {
PyObject* AutogradInit(PyObject* python_gradients);
PyObject* GradEnabled();
PyObject* SetGradEnabled(PyObject* enabled);
}}

// Custom op libraries (py_op_library.h).
%rename(_load_library) opforge::py::LoadLibrary;
%rename(stamp) opforge::py::Stamp;
namespace opforge { namespace py {
PyObject* LoadLibrary(const char* path, PyObject* accept);
PyObject* Stamp();
}}

// The one call path (py_call.h): the generic entry point, this thread's
// modes, the hooks' OpCall, the binder without running (py_bind_api.cc).
%feature("docstring") opforge::py::ExecuteOp "execute(op_name, args) -> Tensor (args: the op's parameters in order)";
%rename(execute) opforge::py::ExecuteOp;
%rename(mode_push) opforge::py::ModePush;
%rename(mode_pop) opforge::py::ModePop;
%rename(hooks_init) opforge::py::HooksInit;
%rename(op_call_run) opforge::py::OpCallRun;
%rename(op_signature) opforge::py::OpSignature;
%feature("docstring") opforge::py::PublicEntry
  "public_entry(entry, name, module, doc) -> the op's public function (py_entry_points.cc)";
%rename(public_entry) opforge::py::PublicEntry;
%rename(caller_location) opforge::py::PyCallerLocation;
%feature("docstring") opforge::py::BindCall
  "bind(op_type, inputs, attrs) -> (inputs, output_dtypes, output_shapes, completed_attrs)";
%rename(bind) opforge::py::BindCall;
%feature("docstring") opforge::py::Infer
  "infer(op_type, inputs, attrs) -> (output_dtypes, output_shapes, completed_attrs)";
%rename(infer) opforge::py::Infer;
%rename(dtype_table) opforge::py::DTypeTable;
%rename(promotion_table) opforge::py::PromotionTable;
namespace opforge { namespace py {
PyObject* ExecuteOp(const char* op_name, PyObject* args);
PyObject* ModePush(const char* mode, PyObject* target);
PyObject* ModePop(const char* mode, PyObject* target);
PyObject* HooksInit(PyObject* op_call_type, PyObject* package_dirs);
PyObject* OpCallRun(PyObject* call, PyObject* eager);
PyObject* OpSignature(const char* op_name);
PyObject* PublicEntry(PyObject* entry, const char* name, const char* module, const char* doc);
PyObject* PyCallerLocation();
PyObject* BindCall(const char* op_type, PyObject* inputs, PyObject* attrs);
PyObject* Infer(const char* op_type, PyObject* inputs, PyObject* attrs);
PyObject* DTypeTable();
PyObject* PromotionTable();
}}

// The engine: graphs (py_graph.h) and async mode (py_async.h).
%rename(graph_new) opforge::py::GraphNew;
%rename(graph_placeholder) opforge::py::GraphPlaceholder;
%rename(graph_constant) opforge::py::GraphConstant;
%rename(graph_run) opforge::py::GraphRun;
%rename(graph_profile) opforge::py::GraphProfile;
%rename(graph_profile_take) opforge::py::GraphProfileTake;
%rename(async_flush) opforge::py::AsyncFlush;
%rename(async_drain) opforge::py::AsyncDrain;
%rename(async_queue_size) opforge::py::AsyncQueueSize;
%rename(async_pending) opforge::py::AsyncPending;
%rename(is_pending) opforge::py::IsPending;
%rename(inter_op_threads) opforge::py::InterOpThreads;
namespace opforge { namespace py {
PyObject* GraphNew();
PyObject* GraphPlaceholder(PyObject* graph, const char* name, PyObject* dtype, PyObject* shape, const char* where);
PyObject* GraphConstant(PyObject* graph, const char* name, PyObject* value, const char* where);
PyObject* GraphRun(PyObject* graph, PyObject* feeds, PyObject* fetches, int inter_op_threads, PyObject* resources);
PyObject* GraphProfile(bool on);
PyObject* GraphProfileTake();
PyObject* AsyncFlush();
PyObject* AsyncDrain();
PyObject* AsyncQueueSize();
PyObject* AsyncPending();
PyObject* IsPending(PyObject* tensor);
PyObject* InterOpThreads();
}}

// The views' reads of the C++ graph (py_graph_views.h).
%rename(graph_add_call) opforge::py::GraphAddCall;
%rename(graph_init) opforge::py::GraphInit;
%rename(graph_num_nodes) opforge::py::GraphNumNodes;
%rename(graph_node) opforge::py::GraphNode;
%rename(graph_node_inputs) opforge::py::GraphNodeInputs;
%rename(graph_node_attrs) opforge::py::GraphNodeAttrs;
%rename(graph_output) opforge::py::GraphOutput;
%rename(graph_unique_name) opforge::py::GraphUniqueName;
%rename(graph_consumers) opforge::py::GraphConsumers;
namespace opforge { namespace py {
PyObject* GraphAddCall(PyObject* graph_obj, PyObject* graph, const char* op_type, const char* base, PyObject* where,
                       PyObject* inputs, PyObject* attrs);
PyObject* GraphInit(PyObject* symbolic_tensor_type);
PyObject* GraphNumNodes(PyObject* graph);
PyObject* GraphNode(PyObject* graph, int node);
PyObject* GraphNodeInputs(PyObject* graph, int node);
PyObject* GraphNodeAttrs(PyObject* graph, int node);
PyObject* GraphOutput(PyObject* graph, int node, int index);
PyObject* GraphUniqueName(PyObject* graph, const char* base);
PyObject* GraphConsumers(PyObject* graph);
}}

// State: resource managers and control dependencies (py_state.h).
%rename(resources_new) opforge::py::ResourcesNew;
%rename(resources_eager) opforge::py::ResourcesEager;
%rename(resources_list) opforge::py::ResourcesList;
%rename(resources_clear) opforge::py::ResourcesClear;
%rename(resources_delete) opforge::py::ResourcesDelete;
%rename(variable_init) opforge::py::VariableInit;
%rename(graph_set_control_deps) opforge::py::GraphSetControlDeps;
%rename(graph_control_deps) opforge::py::GraphControlDeps;
%rename(graph_node_control_inputs) opforge::py::GraphNodeControlInputs;
namespace opforge { namespace py {
PyObject* ResourcesNew();
PyObject* ResourcesEager();
PyObject* ResourcesList(PyObject* resources);
PyObject* ResourcesClear(PyObject* resources);
PyObject* ResourcesDelete(PyObject* resources, const char* name);
PyObject* VariableInit(PyObject* eager_variable_type);
PyObject* GraphSetControlDeps(PyObject* graph, PyObject* nodes);
PyObject* GraphControlDeps(PyObject* graph);
PyObject* GraphNodeControlInputs(PyObject* graph, int node);
}}

// DLPack for dtypes numpy's DLPack cannot carry (bfloat16) (py_dlpack.h).
%rename(dlpack_export) opforge::py::DLPackExport;
%rename(dlpack_import) opforge::py::DLPackImport;
namespace opforge { namespace py {
PyObject* DLPackExport(PyObject* tensor, int versioned);
PyObject* DLPackImport(PyObject* capsule);
}}
%include "gen_ops.i"
