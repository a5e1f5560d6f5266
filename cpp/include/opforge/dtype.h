// Element types a Tensor can hold, and the mapping to C++ types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace opforge {

// Values are stable: the Python layer and the registry JSON rely on them.
enum class DType : int32_t {
  kInvalid = 0,
  kFloat32 = 1,
  kFloat64 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kBool = 5,
};
inline constexpr int kNumDTypes = 6;

const char* DTypeName(DType t);                     // "float32"; "invalid"
bool DTypeFromName(std::string_view name, DType* out);
size_t DTypeSize(DType t);                          // bytes per element; 0 if invalid
inline bool IsFloating(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }
inline bool IsInteger(DType t) { return t == DType::kInt32 || t == DType::kInt64; }

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };

}  // namespace opforge
