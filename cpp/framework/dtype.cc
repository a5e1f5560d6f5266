#include "opforge/dtype.h"

namespace opforge {

namespace {
struct DTypeInfo { const char* name; const char* numpy; size_t size; };
constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"invalid", "", 0},
#define OPFORGE_DTYPE_INFO(e, v, nm, np, ctype, size, ...) {nm, np, size},
    OPFORGE_DTYPES(OPFORGE_DTYPE_INFO)
#undef OPFORGE_DTYPE_INFO
};

// kInfo is indexed by enum value: the X-macro must list values 1, 2, ... in order.
constexpr bool ValuesAreIndices() {
#define OPFORGE_DTYPE_VALUE(e, v, ...) v,
  constexpr int values[] = {0, OPFORGE_DTYPES(OPFORGE_DTYPE_VALUE)};
#undef OPFORGE_DTYPE_VALUE
  for (int i = 0; i < kNumDTypes; ++i) {
    if (values[i] != i) return false;
  }
  return true;
}
static_assert(ValuesAreIndices(), "OPFORGE_DTYPES must list enum values 1, 2, ... in order");

inline const DTypeInfo& Info(DType t) {
  int i = static_cast<int>(t);
  return kInfo[(i > 0 && i < kNumDTypes) ? i : 0];
}
}  // namespace

const char* DTypeName(DType t) { return Info(t).name; }
const char* DTypeNumpyName(DType t) { return Info(t).numpy; }
size_t DTypeSize(DType t) { return Info(t).size; }

bool DTypeFromName(std::string_view name, DType* out) {
  for (int i = 1; i < kNumDTypes; ++i) {
    if (name == kInfo[i].name) { *out = static_cast<DType>(i); return true; }
  }
  return false;
}

}  // namespace opforge
