// Attribute values: the typed, non-tensor parameters of an op (axis, epsilon, T).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "opforge/dtype.h"

namespace opforge {

enum class AttrType : int32_t {
  kInt, kFloat, kBool, kString, kType, kShape, kListInt, kListFloat, kListType,
};
inline constexpr int kNumAttrTypes = 9;
const char* AttrTypeName(AttrType t);  // "int", "list(int)", ...
bool AttrTypeFromName(const std::string& name, AttrType* out);

// One attr value. `kind` says which member is meaningful:
//   kUnset - not given by the caller: the executor infers it or uses the default
//   kNone  - explicitly "no value" (only for attrs declared `= None`)
//   kValue - the member named by the attr's AttrType holds the value
struct AttrValue {
  enum Kind : int8_t { kUnset, kNone, kValue };
  Kind kind = kUnset;
  int64_t i = 0;               // int
  double f = 0;                // float
  bool b = false;              // bool
  DType type = DType::kInvalid;  // type
  std::string s;               // string
  std::vector<int64_t> list_i;   // shape, list(int)
  std::vector<double> list_f;    // list(float)
  std::vector<DType> list_type;  // list(type)

  bool is_set() const { return kind != kUnset; }
  bool is_none() const { return kind == kNone; }

  static AttrValue None() { AttrValue v; v.kind = kNone; return v; }
  static AttrValue Int(int64_t x) { AttrValue v; v.kind = kValue; v.i = x; return v; }
  static AttrValue Float(double x) { AttrValue v; v.kind = kValue; v.f = x; return v; }
  static AttrValue Bool(bool x) { AttrValue v; v.kind = kValue; v.b = x; return v; }
  static AttrValue Type(DType x) { AttrValue v; v.kind = kValue; v.type = x; return v; }
  static AttrValue String(std::string x) { AttrValue v; v.kind = kValue; v.s = std::move(x); return v; }
  static AttrValue IntList(std::vector<int64_t> x) { AttrValue v; v.kind = kValue; v.list_i = std::move(x); return v; }
  static AttrValue FloatList(std::vector<double> x) { AttrValue v; v.kind = kValue; v.list_f = std::move(x); return v; }
  static AttrValue TypeList(std::vector<DType> x) { AttrValue v; v.kind = kValue; v.list_type = std::move(x); return v; }

  // Renders the value as the declaration DSL writes it ("1e-06", "[0, 1]", "float32").
  std::string DebugString(AttrType type) const;
};

}  // namespace opforge
