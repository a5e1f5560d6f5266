#include "opforge/attr.h"

#include <charconv>
#include <sstream>

namespace opforge {
namespace {

constexpr const char* kAttrTypeNames[] = {"int",   "float", "bool",      "string",     "type",
                                          "shape", "list(int)", "list(float)", "list(type)"};
static_assert(sizeof(kAttrTypeNames) / sizeof(kAttrTypeNames[0]) == kNumAttrTypes);

// Shortest text that round-trips, so the registry JSON is stable.
std::string FormatDouble(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // keep it a float
  return s;
}

}  // namespace

const char* AttrTypeName(AttrType t) { return kAttrTypeNames[static_cast<int>(t)]; }

bool AttrTypeFromName(const std::string& name, AttrType* out) {
  for (int i = 0; i < kNumAttrTypes; ++i) {
    if (name == kAttrTypeNames[i]) { *out = static_cast<AttrType>(i); return true; }
  }
  return false;
}

std::string AttrValue::DebugString(AttrType t) const {
  if (kind == kUnset) return "<unset>";
  if (kind == kNone) return "None";
  std::ostringstream os;
  switch (t) {
    case AttrType::kInt: os << i; break;
    case AttrType::kFloat: os << FormatDouble(f); break;
    case AttrType::kBool: os << (b ? "true" : "false"); break;
    case AttrType::kString: os << '\'' << s << '\''; break;
    case AttrType::kType: os << DTypeName(type); break;
    case AttrType::kShape:
    case AttrType::kListInt:
      os << '[';
      for (size_t k = 0; k < list_i.size(); ++k) os << (k ? ", " : "") << list_i[k];
      os << ']';
      break;
    case AttrType::kListFloat:
      os << '[';
      for (size_t k = 0; k < list_f.size(); ++k) os << (k ? ", " : "") << FormatDouble(list_f[k]);
      os << ']';
      break;
    case AttrType::kListType:
      os << '[';
      for (size_t k = 0; k < list_type.size(); ++k) os << (k ? ", " : "") << DTypeName(list_type[k]);
      os << ']';
      break;
  }
  return os.str();
}

}  // namespace opforge
