#include "shape_checks.h"

namespace opforge {

std::string ListString(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

Status SliceResultShape(const TensorShape& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size,
                        TensorShape* out) {
  const int rank = x.rank();
  if (static_cast<int>(begin.size()) != rank) {
    return errors::InvalidArgument("attr 'begin' ", ListString(begin), " has ", begin.size(),
                                   " entries but argument 'x' has rank ", rank);
  }
  if (static_cast<int>(size.size()) != rank) {
    return errors::InvalidArgument("attr 'size' ", ListString(size), " has ", size.size(),
                                   " entries but argument 'x' has rank ", rank);
  }
  TensorShape sliced;
  for (int i = 0; i < rank; ++i) {
    const int64_t dim = x.dim(i);
    if (IsUnknownDim(dim)) {
      // Bounds are checked when the graph runs (shapes re-inferred from the feeds).
      if (begin[i] < 0 || size[i] < -1) {
        return errors::InvalidArgument("attr 'begin' ", ListString(begin), " and 'size' ", ListString(size),
                                       " entry ", i, " must be >= 0 (size: or -1)");
      }
      sliced.AddDim(size[i] == -1 ? kUnknownDim : size[i]);
      continue;
    }
    if (begin[i] < 0 || begin[i] > dim) {
      return errors::InvalidArgument("attr 'begin' ", ListString(begin), " entry ", i, " is ", begin[i],
                                     " but must be in [0, ", dim, "] for argument 'x' of shape ",
                                     x.DebugString());
    }
    int64_t n = size[i];
    if (n == -1) {
      n = dim - begin[i];
    } else if (n < 0 || n > dim - begin[i]) {
      return errors::InvalidArgument("attr 'size' ", ListString(size), " entry ", i, " is ", n,
                                     " but must be -1 or in [0, ", dim - begin[i], "] (begin ", begin[i],
                                     ", dim ", dim, ") for argument 'x' of shape ", x.DebugString());
    }
    sliced.AddDim(n);
  }
  *out = sliced;
  return Status::OK();
}

Status CheckRmsNormInputs(double epsilon, const TensorShape& x, const TensorShape& weight) {
  if (!(epsilon >= 0)) {  // also rejects NaN
    return errors::InvalidArgument("attr 'epsilon' must be >= 0, got ", epsilon);
  }
  if (x.rank() == 0) {
    return errors::InvalidArgument("argument 'x' must have rank >= 1, got a 0-d tensor");
  }
  const int64_t d = x.dim(x.rank() - 1);
  if (weight.rank() != 1 || weight.dim(0) != d) {
    return errors::InvalidArgument("argument 'weight' must have shape [", d,
                                   "] (the last dim of argument 'x' of shape ", x.DebugString(), "), got ",
                                   weight.DebugString());
  }
  return Status::OK();
}

}  // namespace opforge
