#include "opforge/shape_inference.h"

#include <algorithm>

namespace opforge {

std::pair<int, int> OpContext::input_range(const std::string& name) const {
  int begin = 0;
  for (const ArgDef& arg : op_.inputs) {
    int n = arg.is_list() ? static_cast<int>(attrs_[arg.number_attr_index].i) : 1;
    if (arg.name == name) return {begin, begin + n};
    begin += n;
  }
  UnknownName("input", name);
  return {0, 0};
}

const AttrValue& OpContext::attr(const std::string& name) const {
  static const AttrValue kMissing;
  int i = op_.FindAttr(name);
  if (i >= 0) return attrs_[i];
  UnknownName("attr", name);
  return kMissing;
}

void OpContext::UnknownName(const char* what, const std::string& name) const {
  if (!lookup_error_.ok()) return;  // the first one is the one to fix
  std::string declared;
  if (std::string(what) == "attr") {
    for (const AttrDef& a : op_.attrs) declared += (declared.empty() ? "" : ", ") + a.name;
  } else {
    for (const ArgDef& a : op_.inputs) declared += (declared.empty() ? "" : ", ") + a.name;
  }
  lookup_error_ = errors::Internal("the shape function or kernel looked up ", what, " '", name,
                                   "', which the op does not declare (its ", what, "s: ",
                                   declared.empty() ? "none" : declared, ")");
}

Status BroadcastShapes(const TensorShape& a, const char* a_name, const TensorShape& b, const char* b_name,
                       TensorShape* out) {
  const int rank = std::max(a.rank(), b.rank());
  TensorShape result;
  for (int i = 0; i < rank; ++i) {
    // Align from the trailing dimension, numpy style.
    const int ia = i - (rank - a.rank());
    const int ib = i - (rank - b.rank());
    const int64_t da = ia >= 0 ? a.dim(ia) : 1;
    const int64_t db = ib >= 0 ? b.dim(ib) : 1;
    // An unknown dim against a known one > 1 takes the known size: it may be
    // computed at run time (a shape tensor's value: one graph for every
    // size), and the shapes re-inferred from the feeds check it then.
    if (IsUnknownDim(da) || IsUnknownDim(db)) {
      result.AddDim(da == 1 ? db : db == 1 ? da : IsUnknownDim(da) ? db : da);
      continue;
    }
    if (da != db && da != 1 && db != 1) {
      return errors::InvalidArgument("argument '", a_name, "' with shape ", a.DebugString(), " and argument '",
                                     b_name, "' with shape ", b.DebugString(), " cannot be broadcast together");
    }
    result.AddDim(da == 1 ? db : da);
  }
  *out = result;
  return Status::OK();
}

bool IsPartialShapeValid(const TensorShape& s) {
  int64_t known[kMaxRank];
  int rank = 0;
  for (int i = 0; i < s.rank(); ++i) {
    if (s.dim(i) < kUnknownDim) return false;
    if (!IsUnknownDim(s.dim(i))) known[rank++] = s.dim(i);
  }
  TensorShape checked;
  return TensorShape::Make(known, rank, &checked).ok();
}

Status MakeShape(const int64_t* dims, int rank, TensorShape* out) {
  if (rank >= 0 && rank <= kMaxRank) {
    TensorShape s(dims, rank);
    if (!IsFullyDefined(s) && IsPartialShapeValid(s)) {
      *out = s;
      return Status::OK();
    }
  }
  return TensorShape::Make(dims, rank, out);
}

Status NormalizeAxis(int64_t axis, int rank, const char* what, int* out) {
  if (axis < -rank || axis >= rank) {
    return errors::InvalidArgument(what, " is ", axis, " but must be in [", -rank, ", ", rank,
                                   ") for a tensor of rank ", rank);
  }
  *out = static_cast<int>(axis < 0 ? axis + rank : axis);
  return Status::OK();
}

namespace shape_fns {

Status Unchanged(InferenceContext* ctx) {
  ctx->set_output_shape(0, ctx->input_shape(0));
  return Status::OK();
}

Status BroadcastInputs(InferenceContext* ctx) {
  if (ctx->num_inputs() == 0) return errors::Internal("BroadcastInputs needs at least one input");
  TensorShape shape = ctx->input_shape(0);
  for (int i = 1; i < ctx->num_inputs(); ++i) {
    const TensorShape& next = ctx->input_shape(i);
    if (next == shape) continue;
    TensorShape merged;
    if (!BroadcastShapes(shape, "", next, "", &merged).ok()) {
      // Only now work out which args the slots belong to, for the message.
      auto slot_name = [ctx](int slot) -> const char* {
        for (const ArgDef& arg : ctx->op().inputs) {
          auto r = ctx->input_range(arg.name);
          if (slot >= r.first && slot < r.second) return arg.name.c_str();
        }
        return "?";
      };
      return BroadcastShapes(shape, slot_name(i - 1), next, slot_name(i), &merged);
    }
    shape = merged;
  }
  ctx->set_output_shape(0, shape);
  return Status::OK();
}

}  // namespace shape_fns
}  // namespace opforge
