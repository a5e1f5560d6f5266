// Element types a Tensor can hold, and the mapping to C++ types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

// The one table of dtypes: everything else (DTypeName, the registry JSON's
// "dtypes", opforge.dtypes in Python, codegen) is derived from it.
//   X(Enumerator, value, name, numpy name, C++ type, size, is_floating, is_integer)
// Values are stable: the Python layer and the registry JSON rely on them.
#define OPFORGE_DTYPES(X)                                       \
  X(kFloat32, 1, "float32", "float32", float, 4, true, false)   \
  X(kFloat64, 2, "float64", "float64", double, 8, true, false)  \
  X(kInt32, 3, "int32", "int32", int32_t, 4, false, true)       \
  X(kInt64, 4, "int64", "int64", int64_t, 8, false, true)       \
  X(kBool, 5, "bool", "bool", bool, 1, false, false)

namespace opforge {

enum class DType : int32_t {
  kInvalid = 0,
#define OPFORGE_DTYPE_ENUM(e, v, ...) e = v,
  OPFORGE_DTYPES(OPFORGE_DTYPE_ENUM)
#undef OPFORGE_DTYPE_ENUM
};
#define OPFORGE_DTYPE_COUNT(...) +1
inline constexpr int kNumDTypes = 1 OPFORGE_DTYPES(OPFORGE_DTYPE_COUNT);
#undef OPFORGE_DTYPE_COUNT

const char* DTypeName(DType t);                     // "float32"; "invalid"
const char* DTypeNumpyName(DType t);                // numpy's name: "float32", "bool"
bool DTypeFromName(std::string_view name, DType* out);
size_t DTypeSize(DType t);                          // bytes per element; 0 if invalid
inline bool IsFloating(DType t) {
  switch (t) {
#define OPFORGE_DTYPE_FLOATING(e, v, nm, np, ctype, size, fl, in) case DType::e: return fl;
    OPFORGE_DTYPES(OPFORGE_DTYPE_FLOATING)
#undef OPFORGE_DTYPE_FLOATING
    default: return false;
  }
}
inline bool IsInteger(DType t) {
  switch (t) {
#define OPFORGE_DTYPE_INTEGER(e, v, nm, np, ctype, size, fl, in) case DType::e: return in;
    OPFORGE_DTYPES(OPFORGE_DTYPE_INTEGER)
#undef OPFORGE_DTYPE_INTEGER
    default: return false;
  }
}

template <typename T> struct DTypeOf;
#define OPFORGE_DTYPE_OF(e, v, nm, np, ctype, ...) \
  template <> struct DTypeOf<ctype> { static constexpr DType value = DType::e; };
OPFORGE_DTYPES(OPFORGE_DTYPE_OF)
#undef OPFORGE_DTYPE_OF

}  // namespace opforge
