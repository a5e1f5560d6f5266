// Element types a Tensor can hold, and the mapping to C++ types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "opforge/half.h"

// The one table of dtypes: everything else (DTypeName, the registry JSON's
// "dtypes", opforge.dtypes in Python, codegen) is derived from it.
//   X(Enumerator, value, name, numpy name, C++ type, size, is_floating, is_integer)
// Values are stable: the Python layer and the registry JSON rely on them.
// bfloat16's numpy dtype comes from the optional ml_dtypes package.
#define OPFORGE_DTYPES(X)                                       \
  X(kFloat32, 1, "float32", "float32", float, 4, true, false)   \
  X(kFloat64, 2, "float64", "float64", double, 8, true, false)  \
  X(kInt32, 3, "int32", "int32", int32_t, 4, false, true)       \
  X(kInt64, 4, "int64", "int64", int64_t, 8, false, true)       \
  X(kBool, 5, "bool", "bool", bool, 1, false, false)             \
  X(kFloat16, 6, "float16", "float16", float16, 2, true, false)   \
  X(kBFloat16, 7, "bfloat16", "bfloat16", bfloat16, 2, true, false) \
  X(kInt8, 8, "int8", "int8", int8_t, 1, false, true)             \
  X(kUInt8, 9, "uint8", "uint8", uint8_t, 1, false, true)         \
  X(kInt16, 10, "int16", "int16", int16_t, 2, false, true)        \
  X(kUInt16, 11, "uint16", "uint16", uint16_t, 2, false, true)    \
  X(kUInt32, 12, "uint32", "uint32", uint32_t, 4, false, true)    \
  X(kUInt64, 13, "uint64", "uint64", uint64_t, 8, false, true)

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

inline bool IsUnsigned(DType t) {
  switch (t) {
#define OPFORGE_DTYPE_UNSIGNED(e, v, nm, np, ctype, size, fl, in) \
  case DType::e: return in && std::is_unsigned_v<ctype>;
    OPFORGE_DTYPES(OPFORGE_DTYPE_UNSIGNED)
#undef OPFORGE_DTYPE_UNSIGNED
    default: return false;
  }
}

// The promotion table (dtype_promotion.cc): the Array API's rules, with
// bfloat16 and int/float mixing as JAX has them. Within a kind the wider
// type wins; signed with unsigned takes the smallest signed type holding
// both (int8+uint8 -> int16); float16 with bfloat16 -> float32; an integer
// with a float takes the float; bool with anything takes the other. int64
// (or a narrower signed int) with uint64 has no promotion: false, *out
// unchanged.
bool PromoteTypes(DType a, DType b, DType* out);

template <typename T> struct DTypeOf;
#define OPFORGE_DTYPE_OF(e, v, nm, np, ctype, ...) \
  template <> struct DTypeOf<ctype> { static constexpr DType value = DType::e; };
OPFORGE_DTYPES(OPFORGE_DTYPE_OF)
#undef OPFORGE_DTYPE_OF

}  // namespace opforge
