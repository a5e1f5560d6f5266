// Promotion of an op call's inputs (dtype_promotion_args.h).
#include "dtype_promotion_args.h"

#include <string>
#include <vector>

namespace opforge {
namespace {

std::string TypeSet(const std::vector<DType>& types) {
  std::string out = "{";
  for (size_t i = 0; i < types.size(); ++i) out += std::string(i ? ", " : "") + DTypeName(types[i]);
  return out + "}";
}

}  // namespace

bool PromotesInputs(const OpDef& op) {
  if (op.category != "elementwise" && op.category != "contraction") return false;
  for (const ArgDef& a : op.inputs) {
    if (a.is_list()) return false;
  }
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (op.inputs[i].fixed_type != DType::kInvalid) continue;
    for (size_t j = i + 1; j < op.inputs.size(); ++j) {
      if (op.inputs[j].fixed_type == DType::kInvalid &&
          op.inputs[j].type_attr_index == op.inputs[i].type_attr_index) {
        return true;
      }
    }
  }
  return false;
}

Status PromoteInputDTypes(const OpDef& op, DType* dtypes, bool* changed) {
  *changed = false;
  const size_t n = op.inputs.size();
  for (size_t i = 0; i < n; ++i) {
    const ArgDef& arg = op.inputs[i];
    if (arg.fixed_type != DType::kInvalid || dtypes[i] == DType::kInvalid) continue;
    // The first strong input of each type attr folds the others in.
    bool first = true;
    for (size_t j = 0; j < i && first; ++j) {
      first = !(op.inputs[j].fixed_type == DType::kInvalid && dtypes[j] != DType::kInvalid &&
                op.inputs[j].type_attr_index == arg.type_attr_index);
    }
    if (!first) continue;
    DType common = dtypes[i];
    size_t widest = i;
    bool mixed = false;
    for (size_t j = i + 1; j < n; ++j) {
      if (op.inputs[j].fixed_type != DType::kInvalid || dtypes[j] == DType::kInvalid ||
          op.inputs[j].type_attr_index != arg.type_attr_index || dtypes[j] == common) {
        continue;
      }
      mixed = true;
      DType next;
      if (!PromoteTypes(common, dtypes[j], &next)) {
        return errors::InvalidArgument("argument '", op.inputs[j].name, "' has dtype ", DTypeName(dtypes[j]),
                                       " and argument '", op.inputs[widest].name, "' has dtype ",
                                       DTypeName(common),
                                       ": the promotion table has no common dtype for them; use cast");
      }
      if (next == dtypes[j]) widest = j;
      common = next;
    }
    if (!mixed) continue;
    const AttrDef& def = op.attrs[arg.type_attr_index];
    bool allowed = def.allowed_types.empty();
    for (DType a : def.allowed_types) allowed = allowed || a == common;
    if (!allowed) {
      std::string names;
      for (size_t j = i; j < n; ++j) {
        if (op.inputs[j].type_attr_index != arg.type_attr_index || dtypes[j] == DType::kInvalid) continue;
        names += (names.empty() ? "" : ", ") + ("'" + op.inputs[j].name + "' ") + DTypeName(dtypes[j]);
      }
      return errors::InvalidArgument("arguments ", names, " promote to ", DTypeName(common), ", which is not supported: ",
                                     def.name, " must be one of ", TypeSet(def.allowed_types));
    }
    for (size_t j = i; j < n; ++j) {
      if (op.inputs[j].fixed_type == DType::kInvalid && dtypes[j] != DType::kInvalid &&
          op.inputs[j].type_attr_index == arg.type_attr_index && dtypes[j] != common) {
        dtypes[j] = common;
        *changed = true;
      }
    }
  }
  return Status::OK();
}

}  // namespace opforge
