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
void ParseDoc(const std::string& text, OpDef* def) {
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
    std::string* target = colon == std::string::npos ? nullptr : doc_target(Trim(line.substr(0, colon)));
    if (target && !raw.empty() && !std::isspace(static_cast<unsigned char>(raw[0]))) {
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

OpDefBuilder::OpDefBuilder(const char* name, const char* file, int line)
    : name_(name), file_(file), line_(line) {}

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

Status OpDefBuilder::Finalize(OpDef* out) const {
  const std::string where = "op '" + name_ + "' at " + file_ + ":" + std::to_string(line_) + ": ";
  auto fail = [&](const std::string& msg) { return errors::InvalidArgument(where, msg); };

  OpDef def;
  def.name = name_;
  def.file = file_;
  def.line = line_;
  def.group = GroupFromFile(file_);
  def.shape_fn = shape_fn_;
  if (!IsIdentifier(name_) || !std::isupper(static_cast<unsigned char>(name_[0]))) {
    return fail("op names are CamelCase identifiers");
  }

  // Attrs first, so args can refer to attrs declared after them.
  for (const Spec& spec : specs_) {
    if (spec.kind != Spec::kAttr) continue;
    size_t colon = spec.text.find(':');
    if (colon == std::string::npos) return fail("attr spec '" + spec.text + "' lacks ':'");
    AttrDef a;
    a.name = Trim(spec.text.substr(0, colon));
    if (!IsIdentifier(a.name)) return fail("attr name '" + a.name + "' is not an identifier");
    std::string rest = Trim(spec.text.substr(colon + 1));
    std::string default_text;
    size_t eq = rest.find('=');
    // "= default", but not the '=' of ">=".
    while (eq != std::string::npos && eq > 0 && rest[eq - 1] == '>') eq = rest.find('=', eq + 1);
    if (eq != std::string::npos) {
      default_text = Trim(rest.substr(eq + 1));
      rest = Trim(rest.substr(0, eq));
      a.has_default = true;
    }
    size_t ge = rest.find(">=");
    if (ge != std::string::npos) {
      if (!ParseInt(Trim(rest.substr(ge + 2)), &a.minimum)) {
        return fail("attr '" + a.name + "': bad minimum in '" + spec.text + "'");
      }
      a.has_minimum = true;
      rest = Trim(rest.substr(0, ge));
    }
    if (!rest.empty() && rest.front() == '{') {
      if (rest.back() != '}') return fail("attr '" + a.name + "': unterminated '{'");
      a.type = AttrType::kType;
      for (const std::string& item : SplitList(rest.substr(1, rest.size() - 2))) {
        DType t;
        if (!DTypeFromName(item, &t)) return fail("attr '" + a.name + "': unknown dtype '" + item + "'");
        a.allowed_types.push_back(t);
      }
      if (a.allowed_types.empty()) return fail("attr '" + a.name + "': empty set of dtypes");
    } else if (!AttrTypeFromName(rest, &a.type)) {
      return fail("attr '" + a.name + "': unknown attr type '" + rest + "'");
    }
    if (a.has_minimum && a.type != AttrType::kInt && a.type != AttrType::kFloat) {
      return fail("attr '" + a.name + "': '>=' applies only to int and float attrs");
    }
    if (a.has_default) {
      std::string why;
      if (!ParseDefault(default_text, a.type, &a.default_value, &why)) {
        return fail("attr '" + a.name + "': bad default: " + why);
      }
      const AttrValue& d = a.default_value;
      if (d.kind == AttrValue::kValue && a.has_minimum) {
        double v = a.type == AttrType::kInt ? static_cast<double>(d.i) : d.f;
        if (v < static_cast<double>(a.minimum)) {
          return fail("attr '" + a.name + "': default " + d.DebugString(a.type) + " is below the minimum " +
                      std::to_string(a.minimum));
        }
      }
      if (d.kind == AttrValue::kValue && a.type == AttrType::kType && !a.allowed_types.empty() &&
          !ContainsType(a.allowed_types, d.type)) {
        return fail("attr '" + a.name + "': default " + DTypeName(d.type) + " is not an allowed dtype");
      }
    }
    if (def.FindAttr(a.name) >= 0) return fail("attr '" + a.name + "' is declared twice");
    def.attrs.push_back(std::move(a));
  }

  for (const Spec& spec : specs_) {
    if (spec.kind == Spec::kAttr) {
      def.arg_order.push_back(Trim(spec.text.substr(0, spec.text.find(':'))));
      continue;
    }
    const bool is_input = spec.kind == Spec::kInput;
    const char* what = is_input ? "input" : "output";
    size_t colon = spec.text.find(':');
    if (colon == std::string::npos) return fail(std::string(what) + " spec '" + spec.text + "' lacks ':'");
    ArgDef arg;
    arg.name = Trim(spec.text.substr(0, colon));
    if (!IsIdentifier(arg.name)) return fail(std::string(what) + " name '" + arg.name + "' is not an identifier");
    std::string type = Trim(spec.text.substr(colon + 1));
    size_t star = type.find('*');
    if (star != std::string::npos) {
      arg.number_attr = Trim(type.substr(0, star));
      type = Trim(type.substr(star + 1));
      int n = def.FindAttr(arg.number_attr);
      if (n < 0 || def.attrs[n].type != AttrType::kInt) {
        return fail(std::string(what) + " '" + arg.name + "': '" + arg.number_attr + "' must be a declared int attr");
      }
      if (!is_input) return fail("output '" + arg.name + "': list outputs are not supported");
      arg.number_attr_index = n;
      def.attrs[n].inferred = true;
    }
    if (!DTypeFromName(type, &arg.fixed_type)) {
      int t = def.FindAttr(type);
      if (t < 0 || def.attrs[t].type != AttrType::kType) {
        return fail(std::string(what) + " '" + arg.name + "': '" + type + "' is neither a dtype nor a type attr");
      }
      arg.type_attr = type;
      arg.type_attr_index = t;
      if (is_input) def.attrs[t].inferred = true;
    }
    auto& list = is_input ? def.inputs : def.outputs;
    for (const ArgDef& other : list) {
      if (other.name == arg.name) return fail(std::string(what) + " '" + arg.name + "' is declared twice");
    }
    if (is_input) {
      if (def.FindAttr(arg.name) >= 0) return fail("input '" + arg.name + "' has the name of an attr");
      def.arg_order.push_back(arg.name);
    }
    list.push_back(std::move(arg));
  }
  if (def.outputs.empty()) return fail("an op needs at least one output");
  if (def.shape_fn == nullptr) return fail("missing SetShapeFn(...)");

  // Which dtype keys the kernel table (see kernel.h).
  for (const ArgDef& in : def.inputs) {
    if (in.type_attr_index >= 0) { def.kernel_type_attr = in.type_attr_index; break; }
  }
  if (def.kernel_type_attr < 0 && !def.inputs.empty()) def.kernel_fixed_type = def.inputs[0].fixed_type;
  if (def.kernel_type_attr < 0 && def.inputs.empty()) {
    for (size_t i = 0; i < def.attrs.size(); ++i) {
      if (def.attrs[i].type == AttrType::kType) { def.kernel_type_attr = static_cast<int>(i); break; }
    }
  }

  // Python needs defaulted parameters after the others.
  bool seen_default = false;
  for (const std::string& name : def.arg_order) {
    int a = def.FindAttr(name);
    if (a >= 0 && def.attrs[a].inferred) continue;
    bool has_default = a >= 0 && def.attrs[a].has_default;
    if (seen_default && !has_default) {
      return fail("'" + name + "' has no default but follows a parameter that has one");
    }
    seen_default = seen_default || has_default;
  }

  ParseDoc(doc_, &def);
  // Syntax and names now; the ops a rule calls once all are registered.
  def.gradient_specs = gradients_;
  def.no_gradient = no_gradient_;
  for (const std::string& spec : gradients_) {
    GradRule rule;
    OF_RETURN_IF_ERROR(ParseGradientRule(def, spec, &rule));
  }
  *out = std::move(def);
  return Status::OK();
}

}  // namespace opforge
