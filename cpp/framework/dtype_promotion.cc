// The one promotion table (declared in dtype.h, next to the dtype table).
//
// Rules, as the Array API states them for same-kind pairs and as JAX does
// for bfloat16 and for mixed kinds:
//   bool  + T            -> T
//   intN  + intM         -> int(max(N, M));  uintN + uintM -> uint(max(N, M))
//   intN  + uintM        -> the smallest signed int holding both (int64 at
//                           most; int* + uint64 has no promotion)
//   float + float        -> the wider; float16 + bfloat16 -> float32
//   int   + float        -> the float
#include <algorithm>

#include "opforge/dtype.h"

namespace opforge {
namespace {

int Bits(DType t) { return static_cast<int>(DTypeSize(t)) * 8; }

DType SignedOfBits(int bits) {
  switch (bits) {
    case 8: return DType::kInt8;
    case 16: return DType::kInt16;
    case 32: return DType::kInt32;
    case 64: return DType::kInt64;
    default: return DType::kInvalid;
  }
}

DType UnsignedOfBits(int bits) {
  switch (bits) {
    case 8: return DType::kUInt8;
    case 16: return DType::kUInt16;
    case 32: return DType::kUInt32;
    case 64: return DType::kUInt64;
    default: return DType::kInvalid;
  }
}

DType PromoteInts(DType a, DType b) {
  const bool ua = IsUnsigned(a), ub = IsUnsigned(b);
  if (ua == ub) return ua ? UnsignedOfBits(std::max(Bits(a), Bits(b))) : SignedOfBits(std::max(Bits(a), Bits(b)));
  const DType s = ua ? b : a, u = ua ? a : b;
  // The signed result must hold every unsigned value: one bit more than u.
  const int need = std::max(Bits(s), Bits(u) * 2);
  return need > 64 ? DType::kInvalid : SignedOfBits(need);
}

DType PromoteFloats(DType a, DType b) {
  if (a == b) return a;
  if (Bits(a) != Bits(b)) return Bits(a) > Bits(b) ? a : b;
  return DType::kFloat32;  // float16 with bfloat16: neither holds the other
}

}  // namespace

bool PromoteTypes(DType a, DType b, DType* out) {
  if (DTypeSize(a) == 0 || DTypeSize(b) == 0) return false;
  DType r = DType::kInvalid;
  if (a == b) r = a;
  else if (a == DType::kBool) r = b;
  else if (b == DType::kBool) r = a;
  else if (IsFloating(a) && IsFloating(b)) r = PromoteFloats(a, b);
  else if (IsFloating(a)) r = a;
  else if (IsFloating(b)) r = b;
  else r = PromoteInts(a, b);
  if (r == DType::kInvalid) return false;
  *out = r;
  return true;
}

}  // namespace opforge
