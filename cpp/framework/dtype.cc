#include "opforge/dtype.h"

namespace opforge {

namespace {
struct DTypeInfo { DType dtype; const char* name; size_t size; };
constexpr DTypeInfo kInfo[] = {
    {DType::kInvalid, "invalid", 0}, {DType::kFloat32, "float32", 4},
    {DType::kFloat64, "float64", 8}, {DType::kInt32, "int32", 4},
    {DType::kInt64, "int64", 8},     {DType::kBool, "bool", 1},
};
}  // namespace

const char* DTypeName(DType t) {
  int i = static_cast<int>(t);
  return (i > 0 && i < kNumDTypes) ? kInfo[i].name : "invalid";
}

bool DTypeFromName(std::string_view name, DType* out) {
  for (int i = 1; i < kNumDTypes; ++i) {
    if (name == kInfo[i].name) { *out = kInfo[i].dtype; return true; }
  }
  return false;
}

size_t DTypeSize(DType t) {
  int i = static_cast<int>(t);
  return (i > 0 && i < kNumDTypes) ? kInfo[i].size : 0;
}

}  // namespace opforge
