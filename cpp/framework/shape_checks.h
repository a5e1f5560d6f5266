// Shape rules shared by a forward op and its backward op, which live in
// different op files (op files do not include each other).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "opforge/shape_inference.h"

namespace opforge {

// "[1, 2, 3]": an int-list attr in error messages.
std::string ListString(const std::vector<int64_t>& v);

// Slice(x, begin, size)'s result shape: begin[i] in [0, dim], size[i] -1 or
// in [0, dim - begin[i]]. Errors name attrs 'begin'/'size' and argument 'x'.
Status SliceResultShape(const TensorShape& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size,
                        TensorShape* out);

// RmsNorm's inputs: epsilon >= 0 (not NaN), x of rank >= 1, weight of shape
// [x.shape[-1]].
Status CheckRmsNormInputs(double epsilon, const TensorShape& x, const TensorShape& weight);

}  // namespace opforge
