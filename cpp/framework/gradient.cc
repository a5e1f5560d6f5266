// Gradient rules after parsing (gradient_parser.cc): checked against the
// ops they call, and serialised for codegen.
#include "gradient.h"
#include "gradient_internal.h"

#include <set>
#include <sstream>

namespace opforge {
namespace gradient_internal {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

bool IsListExpr(const OpDef& op, const GradExpr& e) {
  return e.kind == GradExpr::kList ||
         (e.kind == GradExpr::kName && e.name_kind == GradExpr::kInput && op.inputs[e.index].is_list());
}

std::string Where(const OpDef& op, const std::string& spec) {
  return "op '" + op.name + "' (declared at " + op.file + ":" + std::to_string(op.line) + "): gradient '" + spec +
         "': ";
}

}  // namespace gradient_internal

namespace {

using gradient_internal::IsListExpr;
using gradient_internal::JsonString;
using gradient_internal::Where;

bool MayBeFloat(const OpDef& op, const ArgDef& arg) {
  if (arg.fixed_type != DType::kInvalid) return IsFloating(arg.fixed_type);
  const AttrDef& t = op.attrs[arg.type_attr_index];
  if (t.allowed_types.empty()) return true;
  for (DType d : t.allowed_types) {
    if (IsFloating(d)) return true;
  }
  return false;
}

Status CheckCall(const OpDef& op, const GradExpr& e, size_t outputs_bound,
                 const std::function<const OpDef*(const std::string&)>& find) {
  if (e.kind == GradExpr::kList) {
    for (const GradExpr& a : e.args) OF_RETURN_IF_ERROR(CheckCall(op, a, 1, find));
    return Status::OK();
  }
  if (e.kind != GradExpr::kCall) return Status::OK();
  const OpDef* callee = find(e.text);
  if (callee == nullptr) return errors::NotFound("calls op '", e.text, "', which is not registered");
  if (e.args.size() != callee->inputs.size()) {
    return errors::InvalidArgument("calls ", e.text, " with ", e.args.size(), " inputs; it takes ",
                                   callee->inputs.size());
  }
  for (const auto& kv : e.attrs) {
    const int a = callee->FindAttr(kv.first);
    if (a < 0 || callee->attrs[a].inferred) {
      return errors::InvalidArgument("passes attr '", kv.first, "' to ", e.text, ", which has no such attr");
    }
    if (kv.second.kind == GradAttrValue::kFunction && kv.second.text == "needs_grad" &&
        callee->attrs[a].type != AttrType::kBool) {
      return errors::InvalidArgument("passes needs_grad(", kv.second.argument, ") to attr '", kv.first, "' of ",
                                     e.text, ", which is a ", AttrTypeName(callee->attrs[a].type),
                                     ", not a bool");
    }
  }
  if (callee->outputs.size() != outputs_bound) {
    return errors::InvalidArgument("uses ", e.text, ", which has ", callee->outputs.size(), " outputs, where ",
                                   outputs_bound, (outputs_bound == 1 ? " is" : " are"), " bound");
  }
  for (size_t i = 0; i < e.args.size(); ++i) {
    if (IsListExpr(op, e.args[i]) != callee->inputs[i].is_list()) {
      return errors::InvalidArgument("passes ", IsListExpr(op, e.args[i]) ? "a list" : "one tensor", " as input '",
                                     callee->inputs[i].name, "' of ", e.text, ", which takes ",
                                     callee->inputs[i].is_list() ? "a list" : "one tensor");
    }
    OF_RETURN_IF_ERROR(CheckCall(op, e.args[i], 1, find));
  }
  return Status::OK();
}

std::string ExprJson(const GradExpr& e) {
  std::ostringstream os;
  switch (e.kind) {
    case GradExpr::kNone: return "null";
    case GradExpr::kNumber: os << "{\"number\": " << JsonString(e.text) << "}"; break;
    case GradExpr::kName: {
      const char* kind = e.name_kind == GradExpr::kInput    ? "input"
                         : e.name_kind == GradExpr::kOutput ? "output"
                         : e.name_kind == GradExpr::kGrad   ? "grad"
                         : e.name_kind == GradExpr::kLocal  ? "local"
                                                            : "attr";
      os << "{\"index\": " << e.index << ", \"kind\": \"" << kind << "\", \"name\": " << JsonString(e.text) << "}";
      break;
    }
    case GradExpr::kList: {
      os << "{\"elements\": [";
      for (size_t i = 0; i < e.args.size(); ++i) os << (i ? ", " : "") << ExprJson(e.args[i]);
      os << "], \"list\": " << JsonString(e.text) << "}";
      break;
    }
    case GradExpr::kCall: {
      os << "{\"args\": [";
      for (size_t i = 0; i < e.args.size(); ++i) os << (i ? ", " : "") << ExprJson(e.args[i]);
      os << "], \"attrs\": [";
      for (size_t i = 0; i < e.attrs.size(); ++i) {
        const GradAttrValue& v = e.attrs[i].second;
        const char* kind = v.kind == GradAttrValue::kLiteral ? "literal"
                           : v.kind == GradAttrValue::kAttr  ? "attr"
                           : v.kind == GradAttrValue::kIndex ? "index"
                                                             : "function";
        os << (i ? ", " : "") << "{\"argument\": " << (v.argument.empty() ? "null" : JsonString(v.argument))
           << ", \"kind\": \"" << kind << "\", \"name\": " << JsonString(e.attrs[i].first)
           << ", \"value\": " << (v.kind == GradAttrValue::kLiteral ? v.text : v.kind == GradAttrValue::kIndex ? "null" : JsonString(v.text))
           << "}";
      }
      os << "], \"op\": " << JsonString(e.text) << "}";
      break;
    }
  }
  return os.str();
}

}  // namespace

Status CheckGradient(const OpDef& op, const std::function<const OpDef*(const std::string&)>& find) {
  std::set<std::string> covered;
  std::vector<std::string> locals;
  for (const std::string& spec : op.gradient_specs) {
    GradRule rule;
    OF_RETURN_IF_ERROR(ParseGradientRule(op, spec, locals, &rule));
    if (rule.local) {
      locals.push_back(rule.targets[0]);
      Status s = CheckCall(op, rule.expr, 1, find);
      if (!s.ok()) return Status(s.code(), Where(op, spec) + s.message());
      continue;
    }
    for (const std::string& t : rule.targets) {
      if (!covered.insert(t).second) {
        return errors::InvalidArgument(Where(op, spec), "input '", t, "' already has a gradient rule");
      }
    }
    Status s = CheckCall(op, rule.expr, rule.per_element ? 1 : rule.targets.size(), find);
    if (!s.ok()) return Status(s.code(), Where(op, spec) + s.message());
  }
  if (op.no_gradient) {
    if (!op.gradient_specs.empty()) {
      return errors::InvalidArgument("op '", op.name, "' (declared at ", op.file, ":", op.line,
                                     ") declares both NoGradient() and gradient rules");
    }
    return Status::OK();
  }
  // An op that declares nothing has no gradient yet (backpropagating through
  // it raises NotFound; tests/test_gradients.py requires in-tree ops to
  // declare): only a partial declaration is an error.
  if (op.gradient_specs.empty()) return Status::OK();
  for (const ArgDef& arg : op.inputs) {
    if (MayBeFloat(op, arg) && covered.count(arg.name) == 0) {
      return errors::InvalidArgument(
          "op '", op.name, "' (declared at ", op.file, ":", op.line, "): input '", arg.name,
          "' may be floating point but has no gradient: declare .Gradient(\"", arg.name,
          " = ...\") (or \"", arg.name, " = None\"), or .NoGradient() for an op that is not differentiable");
    }
  }
  return Status::OK();
}

std::string GradientJson(const OpDef& op) {
  std::string rules;
  std::vector<std::string> locals;
  for (const std::string& spec : op.gradient_specs) {
    GradRule rule;
    if (!ParseGradientRule(op, spec, locals, &rule).ok()) continue;  // reported at registration
    if (rule.local) locals.push_back(rule.targets[0]);
    std::string targets;
    for (const std::string& t : rule.targets) targets += (targets.empty() ? "" : ", ") + JsonString(t);
    rules += std::string(rules.empty() ? "" : ", ") + "{\"expr\": " + ExprJson(rule.expr) +
             ", \"local\": " + (rule.local ? "true" : "false") + ", \"per_element\": " + (rule.per_element ? "true" : "false") + ", \"spec\": " + JsonString(spec) +
             ", \"targets\": [" + targets + "]}";
  }
  return std::string("{\"none\": ") + (op.no_gradient ? "true" : "false") + ", \"rules\": [" + rules + "]}";
}

}  // namespace opforge
