// Shape functions: compute output shapes from input dtypes and shapes and
// attrs, and reject bad shapes before any memory is allocated. They never see
// tensor data, so a graph can infer static shapes with no buffers.
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
};

class InferenceContext : public OpContext {
 public:
  InferenceContext(const OpDef& op, const InputSpec* inputs, int num_inputs, const AttrValue* attrs,
                   TensorShape* output_shapes)
      : OpContext(op, num_inputs, attrs), inputs_(inputs), output_shapes_(output_shapes) {}

  const TensorShape& input_shape(int i) const { return *inputs_[i].shape; }
  DType input_dtype(int i) const { return inputs_[i].dtype; }
  void set_output_shape(int i, const TensorShape& s) { output_shapes_[i] = s; }

 private:
  const InputSpec* inputs_;
  TensorShape* output_shapes_;  // one per op.outputs
};

// numpy broadcasting of two shapes. On failure the message names both args.
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
