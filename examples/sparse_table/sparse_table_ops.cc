// Op declarations of the sparse table library: a table of float32 rows
// keyed by int64 ids, kept as a resource named by the `table` attr (in the
// Session that runs the graph, or the process in eager mode). Rows are made
// on first sight of an id; Adagrad updates them in place.
#include "opforge/opforge.h"

namespace opforge {
namespace {

// rows: ids' shape + [dim].
Status PullShape(InferenceContext* ctx) {
  const TensorShape& ids = ctx->input_shape(0);
  if (ids.rank() + 1 > kMaxRank) return errors::InvalidArgument("ids has rank ", ids.rank(), ", too many");
  std::vector<int64_t> dims(ids.dims(), ids.dims() + ids.rank());
  dims.push_back(ctx->attr_int("dim"));
  TensorShape out;
  OF_RETURN_IF_ERROR(MakeShape(dims.data(), static_cast<int>(dims.size()), &out));
  ctx->set_output_shape(0, out);
  return Status::OK();
}

// grads must be ids' shape + [dim]; the output is a scalar.
Status PushShape(InferenceContext* ctx) {
  const TensorShape& ids = ctx->input_shape(0);
  const TensorShape& grads = ctx->input_shape(1);
  bool fits = grads.rank() == ids.rank() + 1;
  for (int i = 0; fits && i < ids.rank(); ++i) {
    fits = IsUnknownDim(ids.dim(i)) || IsUnknownDim(grads.dim(i)) || ids.dim(i) == grads.dim(i);
  }
  const int64_t dim = ctx->attr_int("dim");
  if (fits && !IsUnknownDim(grads.dim(ids.rank()))) fits = grads.dim(ids.rank()) == dim;
  if (!fits) {
    return errors::InvalidArgument("argument 'grads' must have the shape of 'ids' plus [dim] = [", dim,
                                   "]; got ids of rank ", ids.rank(), " and grads of rank ", grads.rank());
  }
  ctx->set_output_shape(0, TensorShape());
  return Status::OK();
}

Status ScalarShape(InferenceContext* ctx) {
  ctx->set_output_shape(0, TensorShape());
  return Status::OK();
}

}  // namespace

REGISTER_OP("SparseTablePull")
    .Input("ids: int64")
    .Attr("table: resource")
    .Attr("dim: int >= 1")
    .Attr("init_scale: float = 0.05")
    .Attr("seed: int = 0")
    .Output("rows: float32")
    .SetIsStateful()
    .SetShapeFn(PullShape)
    .NoGradient()
    .Doc(R"doc(
Looks up the rows of `ids` in the sparse table named `table`, making each
row on first sight of its id: uniform in [-init_scale, init_scale], drawn
from (seed, id) alone, so a row does not depend on the order ids arrive in.
The table is made by the first pull, with `dim` columns. Its rows are
trained by feeding the gradient of the loss with respect to `rows` to
SparseTablePush (the pull itself has no gradient: ids are integers).

table: The table's name (a resource of the Session, or of the process in eager mode).
dim: The row width.
init_scale: New rows are uniform in [-init_scale, init_scale].
seed: Seeds the new rows.
ids: Any shape; any int64 values.
rows: ids' shape + [dim]: a copy of each id's row.
)doc");

REGISTER_OP("SparseTablePush")
    .Input("ids: int64")
    .Input("grads: float32")
    .Attr("table: resource")
    .Attr("dim: int >= 1")
    .Attr("learning_rate: float = 0.1")
    .Attr("initial_accumulator: float = 0.1")
    .Output("updated: int64")
    .SetIsStateful()
    .SetShapeFn(PushShape)
    .NoGradient()
    .Doc(R"doc(
Applies Adagrad to the rows of `ids` in the sparse table named `table`: the
gradients of an id that occurs several times are summed first, then
acc += g * g and row -= learning_rate * g / sqrt(acc), per element (acc starts
at initial_accumulator). Ids must have been pulled before.

table: The table's name.
dim: The row width (the table's).
learning_rate: Adagrad's step size.
initial_accumulator: The accumulator of a row's first update.
ids: The ids that were pulled.
grads: ids' shape + [dim]: the loss's gradient with respect to the pulled rows.
updated: How many distinct rows were updated.
)doc");

REGISTER_OP("SparseTableSize")
    .Attr("table: resource")
    .Output("size: int64")
    .SetIsStateful()
    .SetShapeFn(ScalarShape)
    .NoGradient()
    .Doc(R"doc(
The number of rows of the sparse table named `table` (0 before its first pull).

table: The table's name.
size: How many ids have a row.
)doc");

}  // namespace opforge
