// Running one op (framework-internal: not part of the public headers that
// custom op libraries are stamped with).
#pragma once

#include "opforge/kernel.h"
#include "opforge/shape_inference.h"

namespace opforge {

// Runs `op` eagerly. `inputs` are flattened (a list arg takes N slots);
// `attrs` has one entry per op.attrs, kUnset where not given: it is completed
// in place (inferred type and list-length attrs, defaults) and validated.
// `outputs` has one slot per op.outputs. Every error message starts with
// the op's name.
Status Execute(const OpDef& op, const Tensor* inputs, int num_inputs, AttrValue* attrs, Tensor* outputs,
               int device = kCPU);

// What Execute does before the kernel, on (dtype, shape) pairs only: binds
// type attrs from the inputs' dtypes, completes and validates `attrs` as
// Execute does, and runs the shape function. `output_shapes` and
// `output_dtypes` have one slot per op.outputs. The same errors as Execute,
// bar the kernel's (a missing kernel is not an error here).
Status InferOutputs(const OpDef& op, const InputSpec* inputs, int num_inputs, AttrValue* attrs,
                    TensorShape* output_shapes, DType* output_dtypes);

// InferOutputs without the shape function: for inputs of unknown rank
// (graph placeholders declared without a shape), whose output shapes stay
// unknown until the graph runs. The same dtype and attr errors.
Status InferOutputDTypes(const OpDef& op, const InputSpec* inputs, int num_inputs, AttrValue* attrs,
                         DType* output_dtypes);

// Only the shape function, for an op whose attrs are complete and whose
// input dtypes were checked when it was planned (a graph node re-inferred
// at other fed shapes). Errors start with the op's name.
Status InferPlannedShapes(const OpDef& op, const InputSpec* inputs, int num_inputs, const AttrValue* attrs,
                          TensorShape* output_shapes);

// Runs only the kernel of an op whose attrs are complete and whose output
// shapes are known (a planned graph node). Errors start with the op's name.
Status RunKernel(const OpDef& op, const Tensor* inputs, int num_inputs, const AttrValue* attrs,
                 const TensorShape* output_shapes, Tensor* outputs, int device = kCPU);

// Declared output dtype of output `i` given completed attrs.
DType OutputDType(const OpDef& op, int i, const AttrValue* attrs);

}  // namespace opforge
