// Loads, but its shape function and its kernel each look up a name the op
// does not declare: calls fail with InternalError naming the op and the name.
#include "opforge/opforge.h"

namespace opforge {
static Status TypoShape(InferenceContext* ctx) {
  if (ctx->attr_int("axes") != 0) return errors::InvalidArgument("unreachable");  // declared: axis
  ctx->set_output_shape(0, ctx->input_shape(0));
  return Status::OK();
}
static Status TypoKernel(OpKernelContext* ctx) {
  if (ctx->attr_bool("scale")) return errors::InvalidArgument("unreachable");  // declared: scaled
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}
static Status Copy(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}
REGISTER_OP("TypoInShapeFn").Input("x: float32").Output("y: float32").Attr("axis: int = 0")
    .SetShapeFn(TypoShape).Doc("Looks up attr 'axes'.\n\nx: In.\ny: Out.\naxis: Unused.");
REGISTER_KERNEL("TypoInShapeFn", kCPU, DType::kFloat32, Copy);
REGISTER_OP("TypoInKernel").Input("x: float32").Output("y: float32").Attr("scaled: bool = false")
    .SetShapeFn(shape_fns::Unchanged).Doc("Looks up attr 'scale'.\n\nx: In.\ny: Out.\nscaled: Unused.");
REGISTER_KERNEL("TypoInKernel", kCPU, DType::kFloat32, TypoKernel);
}  // namespace opforge
