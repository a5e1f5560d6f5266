// Op declarations: the REGISTER_OP DSL and the OpDef it produces.
//
//   REGISTER_OP("Add")
//       .Input("x: T")
//       .Input("y: T")
//       .Output("z: T")
//       .Attr("T: {float32, float64, int32, int64}")
//       .SetShapeFn(shape_fns::BroadcastBinary)
//       .Doc(R"doc(
//   Returns x + y element-wise, with numpy broadcasting.
//
//   x: The first operand.
//   y: The second operand.
//   z: The sum.
//   )doc");
//
// In Doc(), an unindented "name: text" line documents the input, output or
// attr `name`; naming none of them is an error (indent prose lines).
//
// Arg specs:   "name: T" (type attr), "name: float32" (fixed type),
//              "name: N * T" (a list of N tensors sharing type attr T).
// Attr specs:  "name: type", "name: {float32, int32}", "name: int = -1",
//              "name: numbertype" (a dtype set: numbertype = the 32/64-bit
//              float and int types, floattype, inttype, halftype = float16
//              and bfloat16, alltypes = every dtype; also inside {...}),
//              "name: int >= 0", "name: list(int) = None", "name: float = 1e-6",
//              "name: bool = false", "name: string = 'x'", "name: shape",
//              "name: resource" (the name of a resource the op reads or
//              writes: a string attr; see resource.h and SetIsStateful()).
// The group of an op is its file's name less "_ops.cc" (math_ops.cc -> math).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "opforge/attr.h"
#include "opforge/dtype.h"
#include "opforge/stamp.h"  // every binary that declares ops is stamped
#include "opforge/status.h"

namespace opforge {

class InferenceContext;
struct KernelTable;
using ShapeFn = Status (*)(InferenceContext* ctx);

struct ArgDef {
  std::string name;
  std::string doc;
  std::string type_attr;             // "T", or empty when the type is fixed
  DType fixed_type = DType::kInvalid;
  std::string number_attr;           // "N" for list args, else empty
  int type_attr_index = -1;          // index into OpDef::attrs
  int number_attr_index = -1;
  // The bool attr that makes the op read this input's last two axes
  // transposed ("transpose_b"), declared with TransposeAttr(); empty if none.
  std::string transpose_attr;
  int transpose_attr_index = -1;
  bool is_list() const { return !number_attr.empty(); }
};

struct AttrDef {
  std::string name;
  std::string doc;
  AttrType type = AttrType::kInt;
  bool has_default = false;
  AttrValue default_value;           // kNone when declared "= None"
  std::vector<DType> allowed_types;  // for type / list(type); empty: any
  bool has_minimum = false;
  int64_t minimum = 0;
  bool inferred = false;             // set from the inputs (T of "x: T", N of "N * T")
  bool resource = false;             // "name: resource": a kString naming a resource
};

struct OpDef {
  std::string name;
  std::string group;
  std::string summary;
  std::string description;
  std::string file;
  int line = 0;
  std::vector<ArgDef> inputs;
  std::vector<ArgDef> outputs;
  std::vector<AttrDef> attrs;
  // The user-visible parameters, in order: inputs and non-inferred attrs as
  // declared. Generated wrappers and the generic execute path follow it.
  std::vector<std::string> params;
  ShapeFn shape_fn = nullptr;
  const KernelTable* kernels = nullptr;  // set at registration; never null after
  // Gradient declarations as written (see Gradient() below); the registry
  // parses and checks them once every op is registered.
  std::vector<std::string> gradient_specs;
  bool no_gradient = false;
  // How the op distributes over chunked arrays (see Category() below).
  std::string category = "none";
  // SetIsStateful(): the op reads or changes state (resource attrs, a random
  // op's draw counter), so graphs never merge, fold or reorder it against
  // the ops touching the same resources. resource_attrs: indices into attrs.
  bool stateful = false;
  std::vector<int> resource_attrs;

  int FindAttr(const std::string& name) const;  // -1 if absent
  int FindInput(const std::string& name) const;
  // How the kernel dtype of a call is found (see kernel.h): the index of the
  // type attr that decides it, or -1 with kernel_fixed_type set instead.
  int kernel_type_attr = -1;
  DType kernel_fixed_type = DType::kInvalid;
};

class OpDefBuilder {
 public:
  OpDefBuilder(const char* name, const char* file, int line);
  OpDefBuilder& Input(std::string spec);
  OpDefBuilder& Output(std::string spec);
  OpDefBuilder& Attr(std::string spec);
  OpDefBuilder& SetShapeFn(ShapeFn fn);
  OpDefBuilder& Doc(std::string text);
  // The gradient of inputs as a composition of registered ops, e.g.
  // "x = Mul(dz, y)", "a, b = MatMulGrad(a, b, dproduct)", "values[i] = ...",
  // "condition = None". Names: inputs, outputs, d<output> (the gradient
  // flowing into that output), scalar attrs; op calls take inputs
  // positionally and attrs as name=value. Once an op declares a rule, every
  // input that may be floating point needs one.
  OpDefBuilder& Gradient(std::string rule);
  // Declares the op not differentiable: its outputs never require gradients.
  OpDefBuilder& NoGradient();
  // How the op splits over chunks of its inputs, for opforge.dask (the
  // registry JSON exports it; codegen picks the Dask strategy from it):
  //   "elementwise"    output[i] depends on the (broadcast) inputs at i only
  //   "reduction"      over list(int) `axis` with `keepdims`; partial results
  //                    reduce again by the same op (Sum, Prod, Max, Min)
  //   "mean"           like "reduction", partials carried as sum and count
  //   "arg_reduction"  index of an extreme along int `axis` (ArgMax, ArgMin)
  //   "contraction"    MatMul-like (a, b, transpose_a, transpose_b)
  //   "whole_axis"     needs the whole of its `axis` attr (else the last
  //                    axis) of the first input; lower-rank inputs whole
  //   "layout"         moves data without arithmetic (dask's own functions)
  //   "none"           (the default) not distributable
  OpDefBuilder& Category(std::string family);
  // The op has state beyond its inputs (see OpDef::stateful); required for
  // ops with `resource` attrs.
  OpDefBuilder& SetIsStateful();
  // `attr` (bool) makes the op read `input`'s last two axes transposed, so
  // the op with the attr flipped on the swapped axes is the same function.
  // The call path uses it to borrow a transposed numpy view (w.T) in place,
  // where it would otherwise copy the view into a C-contiguous array.
  OpDefBuilder& TransposeAttr(std::string input, std::string attr);

  // Parses and validates every spec. Errors name the op and file:line.
  Status Finalize(OpDef* out) const;

 private:
  struct Spec { enum Kind { kInput, kOutput, kAttr } kind; std::string text; };
  std::string name_, file_, doc_;
  int line_;
  std::vector<Spec> specs_;
  ShapeFn shape_fn_ = nullptr;
  std::vector<std::string> gradients_;
  bool no_gradient_ = false;
  std::string category_ = "none";
  bool stateful_ = false;
  std::vector<std::pair<std::string, std::string>> transpose_attrs_;  // (input, attr)
};

// Registers at static-initialisation time. A declaration that fails
// validation is recorded (see OpRegistry::registration_errors), never aborts.
struct OpRegistrar {
  OpRegistrar(const OpDefBuilder& builder);  // NOLINT: implicit by design
};

}  // namespace opforge

#define OF_CONCAT_INNER(a, b) a##b
#define OF_CONCAT(a, b) OF_CONCAT_INNER(a, b)
#define REGISTER_OP(name)                                                  \
  [[maybe_unused]] static const ::opforge::OpRegistrar OF_CONCAT(          \
      of_op_registrar_, __COUNTER__) = ::opforge::OpDefBuilder(name, __FILE__, __LINE__)
