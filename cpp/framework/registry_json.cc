#include "gradient.h"
#include "registry_internal.h"

#include <cstdio>
#include <map>
#include <set>
#include <sstream>


namespace opforge {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string OrNull(const std::string& s) { return s.empty() ? "null" : Quote(s); }

// The DSL's rendering of values is already valid JSON except for strings,
// dtypes and None.
std::string ValueJson(const AttrValue& v, AttrType t) {
  if (v.kind != AttrValue::kValue) return "null";
  switch (t) {
    case AttrType::kString: return Quote(v.s);
    case AttrType::kType: return Quote(DTypeName(v.type));
    case AttrType::kListType: {
      std::string out = "[";
      for (size_t i = 0; i < v.list_type.size(); ++i) out += (i ? ", " : "") + Quote(DTypeName(v.list_type[i]));
      return out + "]";
    }
    default: return v.DebugString(t);
  }
}

std::string ArgJson(const ArgDef& a) {
  std::ostringstream os;
  os << "{\"doc\": " << Quote(a.doc) << ", \"fixed_type\": "
     << (a.fixed_type == DType::kInvalid ? "null" : Quote(DTypeName(a.fixed_type)))
     << ", \"name\": " << Quote(a.name) << ", \"number_attr\": " << OrNull(a.number_attr);
  if (!a.transpose_attr.empty()) os << ", \"transpose_attr\": " << Quote(a.transpose_attr);  // only where declared
  os << ", \"type_attr\": " << OrNull(a.type_attr) << "}";
  return os.str();
}

std::string AttrJson(const AttrDef& a) {
  std::ostringstream os;
  os << "{\"allowed\": ";
  if (a.allowed_types.empty()) {
    os << "null";
  } else {
    os << "[";
    for (size_t i = 0; i < a.allowed_types.size(); ++i) os << (i ? ", " : "") << Quote(DTypeName(a.allowed_types[i]));
    os << "]";
  }
  os << ", \"default\": " << (a.has_default ? ValueJson(a.default_value, a.type) : "null")
     << ", \"doc\": " << Quote(a.doc) << ", \"has_default\": " << (a.has_default ? "true" : "false")
     << ", \"inferred\": " << (a.inferred ? "true" : "false")
     << ", \"minimum\": " << (a.has_minimum ? std::to_string(a.minimum) : "null")
     << ", \"name\": " << Quote(a.name);
  if (a.resource) os << ", \"resource\": true";  // only where true: other ops' records stay as they were
  os << ", \"type\": " << Quote(AttrTypeName(a.type)) << "}";
  return os.str();
}

template <typename T, typename F>
std::string JsonList(const std::vector<T>& items, F render) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + render(items[i]);
  return out + "]";
}

}  // namespace

std::string OpDefToJson(const OpDef& op, bool full) {
  std::ostringstream os;
  os << "{\"attrs\": " << JsonList(op.attrs, AttrJson) << ", \"category\": " << Quote(op.category)
     << ", \"description\": " << Quote(op.description)
     << ", \"gradient\": " << GradientJson(op) << ", \"group\": " << Quote(op.group)
     << ", \"inputs\": " << JsonList(op.inputs, ArgJson);
  if (full) {
    os << ", \"kernels\": {";
    // A staged op (a library being loaded) has its own table; no global lookup.
    const KernelTable* table = op.kernels ? op.kernels : OpRegistry::Global()->Kernels(op.name);
    bool first_device = true;
    for (int d = 0; d < kNumDevices; ++d) {
      std::vector<std::string> dtypes;
      for (int t = 0; t < kNumDTypes; ++t) {
        if (table->fn[d][t]) dtypes.push_back(DTypeName(static_cast<DType>(t)));
      }
      if (dtypes.empty()) continue;
      os << (first_device ? "" : ", ") << Quote(DeviceName(d)) << ": " << JsonList(dtypes, Quote);
      first_device = false;
    }
    os << "}";
  }
  os << ", \"name\": " << Quote(op.name) << ", \"outputs\": " << JsonList(op.outputs, ArgJson)
     << ", \"params\": " << JsonList(op.params, Quote);
  if (full) os << ", \"source\": {\"file\": " << Quote(op.file) << ", \"line\": " << op.line << "}";
  if (op.stateful) os << ", \"stateful\": true";
  os << ", \"summary\": " << Quote(op.summary) << "}";
  return os.str();
}

namespace {

// The "attr_types" and "dtypes" members: the one dtype table (dtype.h) as
// codegen and Python read it.
std::string TypeTablesJson() {
  std::ostringstream os;
  os << "\"attr_types\": [";
  for (int i = 0; i < kNumAttrTypes; ++i) os << (i ? ", " : "") << Quote(AttrTypeName(static_cast<AttrType>(i)));
  os << "], \"dtypes\": [";
  for (int i = 1; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    os << (i > 1 ? ", " : "") << "{\"enum\": " << i << ", \"is_floating\": " << (IsFloating(t) ? "true" : "false")
       << ", \"is_integer\": " << (IsInteger(t) ? "true" : "false") << ", \"name\": " << Quote(DTypeName(t))
       << ", \"numpy\": " << Quote(DTypeNumpyName(t)) << ", \"size\": " << DTypeSize(t) << "}";
  }
  os << "], ";
  return os.str();
}

}  // namespace

std::string RegistryDocumentJson(const std::vector<const OpDef*>& ops,
                                 const std::function<std::string(const std::string& group)>& fingerprint) {
  std::set<std::string> groups;
  for (const OpDef* op : ops) groups.insert(op->group);
  std::ostringstream os;
  os << "{" << TypeTablesJson() << "\"format\": " << kRegistryFormat << ", \"groups\": [";
  bool first = true;
  for (const std::string& g : groups) {
    os << (first ? "" : ", ") << "{\"fingerprint\": " << Quote(fingerprint(g)) << ", \"name\": " << Quote(g) << "}";
    first = false;
  }
  os << "], \"ops\": [";
  for (size_t i = 0; i < ops.size(); ++i) os << (i ? ",\n" : "\n") << OpDefToJson(*ops[i], true);
  os << "]}\n";
  return os.str();
}

std::string RegistryToJson() {
  OpRegistry* reg = OpRegistry::Global();
  return RegistryDocumentJson(reg->ListOps(), [reg](const std::string& g) { return reg->Fingerprint(g); });
}

}  // namespace opforge
