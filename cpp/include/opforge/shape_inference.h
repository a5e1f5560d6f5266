// Shape functions: compute output shapes from input dtypes and shapes and
// attrs, and reject bad shapes before any memory is allocated. They read no
// tensor data, except the values of small shape tensors (Reshape's target in
// ReshapeTo, Expand's shape, ...) through input_value(), which may be unknown
// in a graph (then the output dims they set are unknown, -1).
#pragma once

#include <vector>

#include "opforge/op_context.h"
#include "opforge/tensor.h"

namespace opforge {

// What shape inference knows of one input slot: its dtype and shape (a view;
// the shape outlives the inference).
struct InputSpec {
  DType dtype = DType::kInvalid;
  const TensorShape* shape = nullptr;
  // The input's value where it is known (eager calls, graph constants, shape
  // tensors the planner computed from the fed shapes); null in a graph
  // where it is computed at run time.
  const Tensor* value = nullptr;
};

class InferenceContext : public OpContext {
 public:
  InferenceContext(const OpDef& op, const InputSpec* inputs, int num_inputs, const AttrValue* attrs,
                   TensorShape* output_shapes)
      : OpContext(op, num_inputs, attrs), inputs_(inputs), output_shapes_(output_shapes) {}

  const TensorShape& input_shape(int i) const { return *inputs_[i].shape; }
  DType input_dtype(int i) const { return inputs_[i].dtype; }
  // Input i's value, or null where it is known only at run time: the shape
  // function then gives unknown (-1) dims for what it would have read (and
  // the executor accepts them, as for unknown input dims).
  const Tensor* input_value(int i) const {
    const Tensor* v = inputs_[i].value;
    if (v == nullptr) read_unknown_value_ = true;
    return v;
  }
  bool read_unknown_value() const { return read_unknown_value_; }
  void set_output_shape(int i, const TensorShape& s) { output_shapes_[i] = s; }

 private:
  const InputSpec* inputs_;
  mutable bool read_unknown_value_ = false;
  TensorShape* output_shapes_;  // one per op.outputs
};

// Unknown dims (TensorFlow's InferenceContext::UnknownDim): graph shapes
// may hold kUnknownDim (-1) where a dim is known only when the graph runs
// ([None, 784] placeholders). A shape function passes such dims through,
// and an output dim computed from one is unknown too; checks that need the
// size run again at Session.run, when shapes are re-inferred from the feeds.
// Concrete tensors (eager calls, kernels) never hold one.
constexpr int64_t kUnknownDim = -1;
inline bool IsUnknownDim(int64_t d) { return d == kUnknownDim; }
inline bool IsFullyDefined(const TensorShape& s) {
  for (int i = 0; i < s.rank(); ++i) {
    if (IsUnknownDim(s.dim(i))) return false;
  }
  return true;
}
// Some input slot has an unknown dim (then outputs may have them too).
inline bool HasUnknownDims(const InputSpec* inputs, int n) {
  for (int i = 0; i < n; ++i) {
    if (inputs[i].shape && !IsFullyDefined(*inputs[i].shape)) return true;
  }
  return false;
}
// Every dim is >= 0 or unknown, and the known ones' product fits int64.
bool IsPartialShapeValid(const TensorShape& s);
// TensorShape::Make for a shape function's result: unknown dims are kept.
Status MakeShape(const int64_t* dims, int rank, TensorShape* out);

// numpy broadcasting of two shapes. On failure the message names both args.
// An unknown dim broadcasts with 1 or another unknown dim (unknown result);
// against a known dim > 1 it fails: it would fit only at one size.
Status BroadcastShapes(const TensorShape& a, const char* a_name, const TensorShape& b,
                       const char* b_name, TensorShape* out);

// Maps a possibly negative axis into [0, rank). `what` is the subject of the
// error message as written, e.g. "attr 'axis'".
Status NormalizeAxis(int64_t axis, int rank, const char* what, int* out);

// Ready-made shape functions for common op families.
namespace shape_fns {
Status Unchanged(InferenceContext* ctx);       // output 0 has input 0's shape
Status BroadcastInputs(InferenceContext* ctx);  // output 0 is all inputs broadcast
}  // namespace shape_fns

}  // namespace opforge
