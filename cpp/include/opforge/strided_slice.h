// ONNX Slice bounds (numpy's slice.indices per axis), shared by the
// StridedSlice op's shape function and its kernel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "opforge/status.h"
#include "opforge/tensor.h"

namespace opforge {

// For x's shape and the per-sliced-axis starts/ends/axes/steps: the first
// index and the step on every axis of x (0 and 1 where not sliced) and the
// result's shape. Errors name the argument.
inline Status StridedSliceBounds(const TensorShape& x, const std::vector<int64_t>& starts,
                                 const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                                 const std::vector<int64_t>& steps, std::vector<int64_t>* begin,
                                 std::vector<int64_t>* step, TensorShape* out) {
  const int rank = x.rank();
  begin->assign(rank, 0);
  step->assign(rank, 1);
  std::vector<int64_t> dims(x.dims(), x.dims() + rank);
  std::vector<char> seen(rank, 0);
  if (starts.size() != ends.size() || starts.size() != axes.size() || starts.size() != steps.size()) {
    return errors::InvalidArgument("arguments 'starts', 'ends', 'axes' and 'steps' must have one entry each per "
                                   "sliced axis");
  }
  for (size_t j = 0; j < axes.size(); ++j) {
    if (axes[j] < -rank || axes[j] >= rank) {
      return errors::InvalidArgument("argument 'axes' entry ", axes[j], " is out of range for rank ", rank);
    }
    const int a = static_cast<int>(axes[j] < 0 ? axes[j] + rank : axes[j]);
    if (seen[a]) return errors::InvalidArgument("argument 'axes' lists axis ", a, " twice");
    seen[a] = 1;
    const int64_t d = x.dim(a), st = steps[j];
    if (st == 0) return errors::InvalidArgument("argument 'steps' has a 0 (on axis ", a, ")");
    int64_t s = starts[j], e = ends[j];
    // numpy: negative bounds count from the end; then clamp to [0, d] going
    // forwards and to [-1, d - 1] going backwards.
    if (s < 0) s = s < -d ? -1 : s + d;  // written to avoid overflow at INT64_MIN
    if (e < 0) e = e < -d ? -1 : e + d;
    int64_t n;
    if (st > 0) {
      s = std::min(std::max<int64_t>(s, 0), d);
      e = std::min(std::max<int64_t>(e, 0), d);
      n = e > s ? (e - s - 1) / st + 1 : 0;
    } else {
      s = std::min(std::max<int64_t>(s, -1), d - 1);
      e = std::min(std::max<int64_t>(e, -1), d - 1);
      n = s > e ? (s - e - 1) / (st == INT64_MIN ? INT64_MAX : -st) + 1 : 0;
    }
    (*begin)[a] = n > 0 ? s : 0;
    (*step)[a] = st;
    dims[a] = n;
  }
  return TensorShape::Make(dims.data(), rank, out);
}

}  // namespace opforge
