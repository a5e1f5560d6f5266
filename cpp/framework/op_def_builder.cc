// Parses the REGISTER_OP declaration DSL into an OpDef and validates it once.
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "gradient.h"
#include "opforge/op.h"

namespace opforge {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

// "src/cpp/ops/math_ops.cc" -> "math"; a file not named *_ops.cc gives its stem.
std::string GroupFromFile(const std::string& file) {
  size_t slash = file.find_last_of("/\\");
  std::string base = slash == std::string::npos ? file : file.substr(slash + 1);
  size_t dot = base.find('.');
  if (dot != std::string::npos) base = base.substr(0, dot);
  const std::string suffix = "_ops";
  if (base.size() > suffix.size() && base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
    base = base.substr(0, base.size() - suffix.size());
  }
  return base;
}

std::vector<std::string> SplitList(const std::string& inner) {
  std::vector<std::string> items;
  std::string cur;
  for (char c : inner) {
    if (c == ',') { items.push_back(Trim(cur)); cur.clear(); }
    else cur += c;
  }
  if (!Trim(cur).empty() || !items.empty()) items.push_back(Trim(cur));
  return items;
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0') return false;
  *out = v;
  return true;
}

// Parses a default value written in the DSL for an attr of type `t`.
bool ParseDefault(const std::string& text, AttrType t, AttrValue* out, std::string* why) {
  if (text == "None") { *out = AttrValue::None(); return true; }
  auto list_items = [&](std::vector<std::string>* items) {
    if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
      *why = "a list default must be written [a, b, ...]";
      return false;
    }
    *items = SplitList(text.substr(1, text.size() - 2));
    return true;
  };
  out->kind = AttrValue::kValue;
  std::vector<std::string> items;
  switch (t) {
    case AttrType::kInt:
      if (ParseInt(text, &out->i)) return true;
      *why = "'" + text + "' is not an int";
      return false;
    case AttrType::kFloat:
      if (ParseDouble(text, &out->f)) return true;
      *why = "'" + text + "' is not a float";
      return false;
    case AttrType::kBool:
      if (text == "true" || text == "false") { out->b = text == "true"; return true; }
      *why = "a bool default is true or false";
      return false;
    case AttrType::kString:
      if (text.size() >= 2 && text.front() == '\'' && text.back() == '\'') {
        out->s = text.substr(1, text.size() - 2);
        return true;
      }
      *why = "a string default is written in single quotes";
      return false;
    case AttrType::kType:
      if (DTypeFromName(text, &out->type)) return true;
      *why = "'" + text + "' is not a dtype";
      return false;
    case AttrType::kShape:
    case AttrType::kListInt:
      if (!list_items(&items)) return false;
      for (const auto& it : items) {
        int64_t v;
        if (!ParseInt(it, &v)) { *why = "'" + it + "' is not an int"; return false; }
        out->list_i.push_back(v);
      }
      return true;
    case AttrType::kListFloat:
      if (!list_items(&items)) return false;
      for (const auto& it : items) {
        double v;
        if (!ParseDouble(it, &v)) { *why = "'" + it + "' is not a float"; return false; }
        out->list_f.push_back(v);
      }
      return true;
    case AttrType::kListType:
      if (!list_items(&items)) return false;
      for (const auto& it : items) {
        DType v;
        if (!DTypeFromName(it, &v)) { *why = "'" + it + "' is not a dtype"; return false; }
        out->list_type.push_back(v);
      }
      return true;
  }
  return false;
}

bool ContainsType(const std::vector<DType>& allowed, DType t) {
  for (DType a : allowed) if (a == t) return true;
  return false;
}

// Splits the Doc() text into summary, description and "name: text" blocks.
// An unindented "name: ..." line whose name is an identifier but no input,
// output or attr is an error (a typo would otherwise become prose); `where`
// names the op and its file:line.
Status ParseDoc(const std::string& text, const std::string& where, OpDef* def) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  auto doc_target = [&](const std::string& name) -> std::string* {
    for (auto& a : def->inputs) if (a.name == name) return &a.doc;
    for (auto& a : def->outputs) if (a.name == name) return &a.doc;
    for (auto& a : def->attrs) if (a.name == name) return &a.doc;
    return nullptr;
  };
  std::string* current = nullptr;  // the arg doc a continuation line extends
  std::vector<std::string> prose;
  for (const std::string& raw : lines) {
    std::string line = Trim(raw);
    size_t colon = line.find(':');
    const bool unindented = !raw.empty() && !std::isspace(static_cast<unsigned char>(raw[0]));
    const std::string label = colon == std::string::npos ? "" : Trim(line.substr(0, colon));
    std::string* target = label.empty() ? nullptr : doc_target(label);
    const bool labelled = IsIdentifier(label) && label == line.substr(0, colon) &&
                          (colon + 1 == line.size() || line[colon + 1] == ' ');
    if (unindented && !target && labelled) {
      std::string names;
      for (const auto* list : {&def->inputs, &def->outputs}) {
        for (const ArgDef& a : *list) names += (names.empty() ? "" : ", ") + a.name;
      }
      for (const AttrDef& a : def->attrs) names += (names.empty() ? "" : ", ") + a.name;
      return errors::InvalidArgument(where, "Doc line '", line, "' documents '", label,
                                     "', which is no input, output or attr of the op (", names,
                                     "); indent the line if it is prose");
    }
    if (target && unindented) {
      *target = Trim(line.substr(colon + 1));
      current = target;
    } else if (current && !line.empty()) {
      *current += " " + line;
    } else {
      current = nullptr;
      prose.push_back(line);
    }
  }
  // First paragraph: summary; the rest: description (paragraphs kept).
  size_t i = 0;
  while (i < prose.size() && prose[i].empty()) ++i;
  std::string summary;
  for (; i < prose.size() && !prose[i].empty(); ++i) summary += (summary.empty() ? "" : " ") + prose[i];
  std::string desc;
  bool pending_break = false;
  for (; i < prose.size(); ++i) {
    if (prose[i].empty()) { pending_break = !desc.empty(); continue; }
    if (pending_break) desc += "\n\n";
    else if (!desc.empty()) desc += " ";
    desc += prose[i];
    pending_break = false;
  }
  def->summary = summary;
  def->description = desc;
  return Status::OK();
}

// Named dtype sets the DSL accepts for a type attr, alone ("T: numbertype")
// or inside braces ("T: {numbertype, halftype}"), like TensorFlow's
// realnumbertype. numbertype/floattype/inttype are the 32- and 64-bit types
// (every op has kernels for those); halftype is {float16, bfloat16}; an op
// that also takes narrow ints names them. alltypes is the whole table.
bool DTypeSetFromName(const std::string& name, std::vector<DType>* out) {
  if (name == "alltypes") {
    for (int t = 1; t < kNumDTypes; ++t) out->push_back(static_cast<DType>(t));
    return true;
  }
  if (name == "halftype") {
    out->push_back(DType::kFloat16);
    out->push_back(DType::kBFloat16);
    return true;
  }
  const bool number = name == "numbertype", floating = name == "floattype", integer = name == "inttype";
  if (!number && !floating && !integer) return false;
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64}) {
    if ((IsFloating(d) && (number || floating)) || (IsInteger(d) && (number || integer))) out->push_back(d);
  }
  return true;
}

// Parses "name: type [>= min] [= default]" into `a`; errors are the message only.
Status ParseAttrSpec(const std::string& text, AttrDef* a) {
  size_t colon = text.find(':');
  if (colon == std::string::npos) return errors::InvalidArgument("attr spec '", text, "' lacks ':'");
  a->name = Trim(text.substr(0, colon));
  if (!IsIdentifier(a->name)) return errors::InvalidArgument("attr name '", a->name, "' is not an identifier");
  const std::string where = "attr '" + a->name + "': ";
  std::string rest = Trim(text.substr(colon + 1));
  std::string default_text;
  size_t eq = rest.find('=');
  // "= default", but not the '=' of ">=".
  while (eq != std::string::npos && eq > 0 && rest[eq - 1] == '>') eq = rest.find('=', eq + 1);
  if (eq != std::string::npos) {
    default_text = Trim(rest.substr(eq + 1));
    rest = Trim(rest.substr(0, eq));
    a->has_default = true;
  }
  size_t ge = rest.find(">=");
  if (ge != std::string::npos) {
    if (!ParseInt(Trim(rest.substr(ge + 2)), &a->minimum)) {
      return errors::InvalidArgument(where, "bad minimum in '", text, "'");
    }
    a->has_minimum = true;
    rest = Trim(rest.substr(0, ge));
  }
  if (!rest.empty() && rest.front() == '{') {
    if (rest.back() != '}') return errors::InvalidArgument(where, "unterminated '{'");
    a->type = AttrType::kType;
    for (const std::string& item : SplitList(rest.substr(1, rest.size() - 2))) {
      DType t;
      std::vector<DType> set;
      if (DTypeFromName(item, &t)) set.push_back(t);
      else if (!DTypeSetFromName(item, &set)) return errors::InvalidArgument(where, "unknown dtype '", item, "'");
      for (DType d : set) {
        if (!ContainsType(a->allowed_types, d)) a->allowed_types.push_back(d);
      }
    }
    if (a->allowed_types.empty()) return errors::InvalidArgument(where, "empty set of dtypes");
  } else if (rest == "resource") {
    a->type = AttrType::kString;
    a->resource = true;
  } else if (DTypeSetFromName(rest, &a->allowed_types)) {
    a->type = AttrType::kType;
  } else if (!AttrTypeFromName(rest, &a->type)) {
    return errors::InvalidArgument(where, "unknown attr type '", rest, "'");
  }
  if (a->has_minimum && a->type != AttrType::kInt && a->type != AttrType::kFloat) {
    return errors::InvalidArgument(where, "'>=' applies only to int and float attrs");
  }
  if (!a->has_default) return Status::OK();
  std::string why;
  if (!ParseDefault(default_text, a->type, &a->default_value, &why)) {
    return errors::InvalidArgument(where, "bad default: ", why);
  }
  const AttrValue& d = a->default_value;
  if (d.kind == AttrValue::kValue && a->has_minimum) {
    double v = a->type == AttrType::kInt ? static_cast<double>(d.i) : d.f;
    if (v < static_cast<double>(a->minimum)) {
      return errors::InvalidArgument(where, "default ", d.DebugString(a->type), " is below the minimum ",
                                     a->minimum);
    }
  }
  if (d.kind == AttrValue::kValue && a->type == AttrType::kType && !a->allowed_types.empty() &&
      !ContainsType(a->allowed_types, d.type)) {
    return errors::InvalidArgument(where, "default ", DTypeName(d.type), " is not an allowed dtype");
  }
  return Status::OK();
}

// Parses "name: T", "name: float32" or "name: N * T" against the attrs
// already in `def` (marking the attrs it infers); errors are the message only.
Status ParseArgSpec(const std::string& text, bool is_input, OpDef* def, ArgDef* arg) {
  const std::string what = is_input ? "input" : "output";
  size_t colon = text.find(':');
  if (colon == std::string::npos) return errors::InvalidArgument(what, " spec '", text, "' lacks ':'");
  arg->name = Trim(text.substr(0, colon));
  if (!IsIdentifier(arg->name)) return errors::InvalidArgument(what, " name '", arg->name, "' is not an identifier");
  std::string type = Trim(text.substr(colon + 1));
  size_t star = type.find('*');
  if (star != std::string::npos) {
    arg->number_attr = Trim(type.substr(0, star));
    type = Trim(type.substr(star + 1));
    int n = def->FindAttr(arg->number_attr);
    if (n < 0 || def->attrs[n].type != AttrType::kInt) {
      return errors::InvalidArgument(what, " '", arg->name, "': '", arg->number_attr,
                                     "' must be a declared int attr");
    }
    if (!is_input) return errors::InvalidArgument("output '", arg->name, "': list outputs are not supported");
    arg->number_attr_index = n;
    def->attrs[n].inferred = true;
  }
  if (!DTypeFromName(type, &arg->fixed_type)) {
    int t = def->FindAttr(type);
    if (t < 0 || def->attrs[t].type != AttrType::kType) {
      return errors::InvalidArgument(what, " '", arg->name, "': '", type, "' is neither a dtype nor a type attr");
    }
    arg->type_attr = type;
    arg->type_attr_index = t;
    if (is_input) def->attrs[t].inferred = true;
  }
  for (const ArgDef& other : is_input ? def->inputs : def->outputs) {
    if (other.name == arg->name) return errors::InvalidArgument(what, " '", arg->name, "' is declared twice");
  }
  if (is_input && def->FindAttr(arg->name) >= 0) {
    return errors::InvalidArgument("input '", arg->name, "' has the name of an attr");
  }
  return Status::OK();
}

// Which dtype keys the kernel table (see kernel.h).
void SetKernelDType(OpDef* def) {
  for (const ArgDef& in : def->inputs) {
    if (in.type_attr_index >= 0) { def->kernel_type_attr = in.type_attr_index; return; }
  }
  if (!def->inputs.empty()) {
    def->kernel_fixed_type = def->inputs[0].fixed_type;
    return;
  }
  for (size_t i = 0; i < def->attrs.size(); ++i) {
    if (def->attrs[i].type == AttrType::kType) { def->kernel_type_attr = static_cast<int>(i); return; }
  }
  // No inputs, no type attr (Group, VariableIsInitialized): the first output's fixed dtype.
  if (!def->outputs.empty()) def->kernel_fixed_type = def->outputs[0].fixed_type;
}

// The user-visible parameters (inputs and non-inferred attrs) in declaration
// order: the one contract for codegen's wrappers and the generic execute
// path. Python needs defaulted parameters after the others.
Status SetParams(const std::vector<std::string>& declared, OpDef* def) {
  bool seen_default = false;
  for (const std::string& name : declared) {
    int a = def->FindAttr(name);
    if (a >= 0 && def->attrs[a].inferred) continue;
    bool has_default = a >= 0 && def->attrs[a].has_default;
    if (seen_default && !has_default) {
      return errors::InvalidArgument("'", name, "' has no default but follows a parameter that has one");
    }
    seen_default = seen_default || has_default;
    def->params.push_back(name);
  }
  return Status::OK();
}

}  // namespace

int OpDef::FindAttr(const std::string& n) const {
  for (size_t i = 0; i < attrs.size(); ++i) if (attrs[i].name == n) return static_cast<int>(i);
  return -1;
}

int OpDef::FindInput(const std::string& n) const {
  for (size_t i = 0; i < inputs.size(); ++i) if (inputs[i].name == n) return static_cast<int>(i);
  return -1;
}

namespace {
// The source tree's path of `file`: a compiler cache that rewrites paths
// relative to the build directory (ccache's base_dir) hands __FILE__ as
// "../../cpp/ops/x.cc", which -fmacro-prefix-map does not see.
std::string SourcePath(const char* file) {
  std::string f = file;
  while (f.compare(0, 3, "../") == 0 || f.compare(0, 2, "./") == 0) f.erase(0, f[1] == '/' ? 2 : 3);
  return f;
}
}  // namespace

OpDefBuilder::OpDefBuilder(const char* name, const char* file, int line)
    : name_(name), file_(SourcePath(file)), line_(line) {}

OpDefBuilder& OpDefBuilder::Input(std::string spec) {
  specs_.push_back({Spec::kInput, std::move(spec)});
  return *this;
}
OpDefBuilder& OpDefBuilder::Output(std::string spec) {
  specs_.push_back({Spec::kOutput, std::move(spec)});
  return *this;
}
OpDefBuilder& OpDefBuilder::Attr(std::string spec) {
  specs_.push_back({Spec::kAttr, std::move(spec)});
  return *this;
}
OpDefBuilder& OpDefBuilder::SetShapeFn(ShapeFn fn) {
  shape_fn_ = fn;
  return *this;
}
OpDefBuilder& OpDefBuilder::Doc(std::string text) {
  doc_ = std::move(text);
  return *this;
}

OpDefBuilder& OpDefBuilder::Gradient(std::string rule) {
  gradients_.push_back(std::move(rule));
  return *this;
}

OpDefBuilder& OpDefBuilder::NoGradient() {
  no_gradient_ = true;
  return *this;
}

OpDefBuilder& OpDefBuilder::SetIsStateful() {
  stateful_ = true;
  return *this;
}

OpDefBuilder& OpDefBuilder::TransposeAttr(std::string input, std::string attr) {
  transpose_attrs_.emplace_back(std::move(input), std::move(attr));
  return *this;
}

OpDefBuilder& OpDefBuilder::Category(std::string family) {
  category_ = std::move(family);
  return *this;
}

Status OpDefBuilder::Finalize(OpDef* out) const {
  const std::string where = "op '" + name_ + "' at " + file_ + ":" + std::to_string(line_) + ": ";
  auto fail = [&](const Status& s) { return errors::InvalidArgument(where, s.message()); };

  OpDef def;
  def.name = name_;
  def.file = file_;
  def.line = line_;
  def.group = GroupFromFile(file_);
  def.shape_fn = shape_fn_;
  if (!IsIdentifier(name_) || !std::isupper(static_cast<unsigned char>(name_[0]))) {
    return fail(errors::InvalidArgument("op names are CamelCase identifiers"));
  }

  // Attrs first, so args can refer to attrs declared after them.
  for (const Spec& spec : specs_) {
    if (spec.kind != Spec::kAttr) continue;
    AttrDef a;
    Status s = ParseAttrSpec(spec.text, &a);
    if (!s.ok()) return fail(s);
    if (def.FindAttr(a.name) >= 0) return fail(errors::InvalidArgument("attr '", a.name, "' is declared twice"));
    def.attrs.push_back(std::move(a));
  }

  std::vector<std::string> declared;  // inputs and attrs in declaration order
  for (const Spec& spec : specs_) {
    if (spec.kind == Spec::kAttr) {
      declared.push_back(Trim(spec.text.substr(0, spec.text.find(':'))));
      continue;
    }
    const bool is_input = spec.kind == Spec::kInput;
    ArgDef arg;
    Status s = ParseArgSpec(spec.text, is_input, &def, &arg);
    if (!s.ok()) return fail(s);
    if (is_input) declared.push_back(arg.name);
    (is_input ? def.inputs : def.outputs).push_back(std::move(arg));
  }
  if (def.outputs.empty()) return fail(errors::InvalidArgument("an op needs at least one output"));
  if (def.shape_fn == nullptr) return fail(errors::InvalidArgument("missing SetShapeFn(...)"));

  SetKernelDType(&def);
  Status s = SetParams(declared, &def);
  if (!s.ok()) return fail(s);
  OF_RETURN_IF_ERROR(ParseDoc(doc_, where, &def));
  // Syntax and names now; the ops a rule calls once all are registered.
  def.gradient_specs = gradients_;
  def.no_gradient = no_gradient_;
  static const char* const kCategories[] = {"elementwise", "reduction", "mean", "arg_reduction",
                                            "contraction", "whole_axis", "layout", "none"};
  bool known_category = false;
  for (const char* c : kCategories) known_category = known_category || category_ == c;
  if (!known_category) {
    return fail(errors::InvalidArgument(
        "Category('", category_, "') is not one of elementwise, reduction, mean, arg_reduction, "
        "contraction, whole_axis, layout, none"));
  }
  def.category = category_;
  def.stateful = stateful_;
  for (size_t i = 0; i < def.attrs.size(); ++i) {
    if (!def.attrs[i].resource) continue;
    if (!stateful_) {
      return fail(errors::InvalidArgument("attr '", def.attrs[i].name,
                                          "' is a resource, so the op must be declared SetIsStateful()"));
    }
    def.resource_attrs.push_back(static_cast<int>(i));
  }
  for (const auto& [input, attr] : transpose_attrs_) {
    const int i = def.FindInput(input), a = def.FindAttr(attr);
    if (i < 0 || def.inputs[i].is_list()) {
      return fail(errors::InvalidArgument("TransposeAttr('", input, "', ...): not a single-tensor input"));
    }
    if (a < 0 || def.attrs[a].type != AttrType::kBool || def.attrs[a].inferred) {
      return fail(errors::InvalidArgument("TransposeAttr('", input, "', '", attr, "'): '", attr,
                                          "' is not a bool attr"));
    }
    if (def.inputs[i].transpose_attr_index >= 0) {
      return fail(errors::InvalidArgument("TransposeAttr('", input, "', ...) is declared twice"));
    }
    def.inputs[i].transpose_attr = attr;
    def.inputs[i].transpose_attr_index = a;
  }
  std::vector<std::string> locals;
  for (const std::string& spec : gradients_) {
    GradRule rule;
    OF_RETURN_IF_ERROR(ParseGradientRule(def, spec, locals, &rule));
    if (rule.local) locals.push_back(rule.targets[0]);
  }
  *out = std::move(def);
  return Status::OK();
}

}  // namespace opforge
