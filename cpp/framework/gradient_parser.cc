// The gradient rule parser: one `.Gradient("...")` spec -> a GradRule
// (the grammar is in gradient.h). Names are resolved against the op here;
// the ops a rule calls are checked later, by CheckGradient (gradient.cc).
#include <cctype>
#include <cstdlib>

#include "gradient.h"
#include "gradient_internal.h"

namespace opforge {
namespace {

using gradient_internal::IsListExpr;
using gradient_internal::JsonString;
using gradient_internal::Where;

struct Token {
  enum Kind { kIdent, kNumber, kString, kPunct, kEnd } kind;
  std::string text;
};

bool Tokenize(const std::string& s, std::vector<Token>* out, std::string* error) {
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
    const size_t start = i;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      out->push_back({Token::kIdent, s.substr(start, i - start)});
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
               (c == '-' && i + 1 < s.size() && (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '.'))) {
      ++i;
      while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == 'e' ||
                              s[i] == 'E' || ((s[i] == '-' || s[i] == '+') && (s[i - 1] == 'e' || s[i - 1] == 'E')))) {
        ++i;
      }
      out->push_back({Token::kNumber, s.substr(start, i - start)});
    } else if (c == '\'') {
      const size_t end = s.find('\'', i + 1);
      if (end == std::string::npos) { *error = "unterminated string"; return false; }
      out->push_back({Token::kString, s.substr(i + 1, end - i - 1)});
      i = end + 1;
    } else if (std::string("()[],=").find(c) != std::string::npos) {
      out->push_back({Token::kPunct, std::string(1, c)});
      ++i;
    } else {
      *error = std::string("unexpected character '") + c + "'";
      return false;
    }
  }
  out->push_back({Token::kEnd, ""});
  return true;
}

bool IsNumber(const std::string& t) {
  char* end = nullptr;
  std::strtod(t.c_str(), &end);
  return end && *end == '\0';
}

class Parser {
 public:
  Parser(const OpDef& op, const std::vector<std::string>& locals, std::vector<Token> tokens)
      : op_(op), locals_(locals), t_(std::move(tokens)) {}

  Status Rule(GradRule* rule) {
    if (t_[0].kind == Token::kIdent && t_[0].text == "let" && t_[1].kind == Token::kIdent) {
      pos_ = 2;
      const std::string name = t_[1].text;
      if (name == "i" || name[0] == '_' || op_.FindInput(name) >= 0 || op_.FindAttr(name) >= 0 ||
          Known(name)) {
        return Error("'let " + name + "': the name is taken (an input, output, d<output>, attr, local, 'i', "
                     "or starts with '_')");
      }
      rule->targets.push_back(name);
      rule->local = true;
      if (!Accept("=")) return Error("expected '=' after 'let " + name + "'");
      OF_RETURN_IF_ERROR(Expr(&rule->expr));
      if (t_[pos_].kind != Token::kEnd) return Error("unexpected '" + t_[pos_].text + "' after the expression");
      if (rule->expr.kind == GradExpr::kNone || IsList(rule->expr)) return Error("a local is one tensor");
      return Status::OK();
    }
    do {
      OF_RETURN_IF_ERROR(Expect(Token::kIdent, "an input name"));
      const std::string name = t_[pos_ - 1].text;
      const int index = op_.FindInput(name);
      if (index < 0) return Error("'" + name + "' is not an input of " + op_.name);
      for (const std::string& t : rule->targets) {
        if (t == name) return Error("input '" + name + "' is bound twice");
      }
      rule->targets.push_back(name);
      if (op_.inputs[index].is_list() && t_[pos_].text != "[") {
        return Error("list input '" + name + "' is bound per element: '" + name + "[i] = ...'");
      }
      if (Accept("[")) {
        if (!op_.inputs[index].is_list()) return Error("'" + name + "[i]' but '" + name + "' is not a list input");
        if (!Accept("i") || !Accept("]")) return Error("a list input is bound per element as '" + name + "[i]'");
        rule->per_element = true;
      }
    } while (Accept(","));
    if (rule->per_element && rule->targets.size() != 1) return Error("a per-element rule binds one list input");
    if (!Accept("=")) return Error("expected '=' after the inputs");
    per_element_ = rule->per_element;
    OF_RETURN_IF_ERROR(Expr(&rule->expr));
    if (t_[pos_].kind != Token::kEnd) return Error("unexpected '" + t_[pos_].text + "' after the expression");
    if (IsList(rule->expr)) return Error("a gradient is one tensor, not a list");
    if (rule->targets.size() > 1 && rule->expr.kind != GradExpr::kCall) {
      return Error("several inputs are bound to one op call's outputs, not to a name or number");
    }
    return Status::OK();
  }

 private:
  Status Expr(GradExpr* e) {
    const Token& tok = t_[pos_];
    if (tok.kind == Token::kPunct && tok.text == "[") {
      ++pos_;
      e->kind = GradExpr::kList;
      e->text = "literal";
      if (Accept("]")) return Status::OK();
      do {
        e->args.emplace_back();
        OF_RETURN_IF_ERROR(Element(&e->args.back(), "a list literal"));
      } while (Accept(","));
      if (!Accept("]")) return Error("expected ']' to close the list");
      return Status::OK();
    }
    if (tok.kind == Token::kIdent && (tok.text == "append" || tok.text == "replace") &&
        t_[pos_ + 1].kind == Token::kPunct && t_[pos_ + 1].text == "(") {
      const std::string fn = tok.text;
      pos_ += 2;
      if (fn == "replace" && !per_element_) {
        return Error("replace(list, e) replaces element i: it belongs in a per-element rule 'x[i] = ...'");
      }
      e->kind = GradExpr::kList;
      e->text = fn;
      e->args.emplace_back();
      OF_RETURN_IF_ERROR(Expr(&e->args.back()));
      if (!IsList(e->args.back())) return Error(fn + "(list, e): the first argument must be a list");
      if (!Accept(",")) return Error("expected ',' in " + fn + "(list, e)");
      e->args.emplace_back();
      OF_RETURN_IF_ERROR(Element(&e->args.back(), fn + "(list, e)"));
      if (!Accept(")")) return Error("expected ')' to close " + fn + "(list, e)");
      return Status::OK();
    }
    if (tok.kind == Token::kNumber) {
      if (!IsNumber(tok.text)) return Error("'" + tok.text + "' is not a number");
      e->kind = GradExpr::kNumber;
      e->text = t_[pos_++].text;
      return Status::OK();
    }
    OF_RETURN_IF_ERROR(Expect(Token::kIdent, "a name, a number or an op call"));
    const std::string name = t_[pos_ - 1].text;
    if (name == "None") {
      e->kind = GradExpr::kNone;
      return Status::OK();
    }
    if (!Accept("(")) return Name(name, e);
    e->kind = GradExpr::kCall;
    e->text = name;
    if (Accept(")")) return Status::OK();
    do {
      if (t_[pos_].kind == Token::kIdent && t_[pos_ + 1].kind == Token::kPunct && t_[pos_ + 1].text == "=") {
        std::string attr = t_[pos_].text;
        pos_ += 2;
        for (const auto& kv : e->attrs) {
          if (kv.first == attr) return Error("attr '" + attr + "' is given twice to " + name);
        }
        GradAttrValue v;
        OF_RETURN_IF_ERROR(AttrValueExpr(&v));
        e->attrs.emplace_back(attr, v);
      } else {
        if (!e->attrs.empty()) return Error("positional input after attrs in the call of " + name);
        e->args.emplace_back();
        OF_RETURN_IF_ERROR(Expr(&e->args.back()));
        if (e->args.back().kind == GradExpr::kNone) return Error("None is not an input of " + name);
      }
    } while (Accept(","));
    if (!Accept(")")) return Error("expected ')' to close the call of " + name);
    return Status::OK();
  }

  // One tensor: not None and not a list.
  Status Element(GradExpr* e, const std::string& where) {
    OF_RETURN_IF_ERROR(Expr(e));
    if (e->kind == GradExpr::kNone || IsList(*e)) return Error("an element of " + where + " must be one tensor");
    return Status::OK();
  }

  bool IsList(const GradExpr& e) const { return IsListExpr(op_, e); }

  // An output, d<output> or local of that name.
  bool Known(const std::string& name) const {
    for (const ArgDef& out : op_.outputs) {
      if (out.name == name || "d" + out.name == name) return true;
    }
    for (const std::string& l : locals_) {
      if (l == name) return true;
    }
    return false;
  }

  Status Name(const std::string& name, GradExpr* e) {
    e->kind = GradExpr::kName;
    e->text = name;
    for (size_t i = 0; i < locals_.size(); ++i) {
      if (locals_[i] == name) {
        e->name_kind = GradExpr::kLocal;
        e->index = static_cast<int>(i);
        return Status::OK();
      }
    }
    if ((e->index = op_.FindInput(name)) >= 0) {
      e->name_kind = GradExpr::kInput;
      return Status::OK();
    }
    for (size_t i = 0; i < op_.outputs.size(); ++i) {
      if (op_.outputs[i].name == name) {
        e->name_kind = GradExpr::kOutput;
        e->index = static_cast<int>(i);
        return Status::OK();
      }
      if ("d" + op_.outputs[i].name == name) {
        e->name_kind = GradExpr::kGrad;
        e->index = static_cast<int>(i);
        return Status::OK();
      }
    }
    const int attr = op_.FindAttr(name);
    if (attr >= 0) {
      const AttrType t = op_.attrs[attr].type;
      if (t != AttrType::kInt && t != AttrType::kFloat && t != AttrType::kBool) {
        return Error("attr '" + name + "' is a " + AttrTypeName(t) +
                     "; only int, float and bool attrs can be used as a (scalar) input");
      }
      e->name_kind = GradExpr::kAttr;
      e->index = attr;
      return Status::OK();
    }
    return Error("'" + name + "' is neither an input, an output, the gradient d<output> of an output, a " +
                 "scalar attr of " + op_.name + ", nor a local defined before ('let " + name + " = ...')");
  }

  Status AttrValueExpr(GradAttrValue* v) {
    const Token tok = t_[pos_];
    if (tok.kind == Token::kNumber) {
      if (!IsNumber(tok.text)) return Error("'" + tok.text + "' is not a number");
      ++pos_;
      v->text = tok.text;
      return Status::OK();
    }
    if (tok.kind == Token::kString) {
      ++pos_;
      v->text = JsonString(tok.text);
      return Status::OK();
    }
    if (Accept("[")) {
      std::string items;
      if (!Accept("]")) {
        do {
          GradAttrValue item;
          OF_RETURN_IF_ERROR(AttrValueExpr(&item));
          if (item.kind != GradAttrValue::kLiteral) return Error("list attr values must be literals");
          items += (items.empty() ? "" : ", ") + item.text;
        } while (Accept(","));
        if (!Accept("]")) return Error("expected ']'");
      }
      v->text = "[" + items + "]";
      return Status::OK();
    }
    OF_RETURN_IF_ERROR(Expect(Token::kIdent, "an attr value"));
    const std::string name = tok.text;
    DType dtype;
    if (name == "true" || name == "false") {
      v->text = name;
    } else if (name == "None") {
      v->text = "null";
    } else if (name == "i" && per_element_) {
      v->kind = GradAttrValue::kIndex;
    } else if (Accept("(")) {
      OF_RETURN_IF_ERROR(Expect(Token::kIdent, "the argument of " + name + "()"));
      const std::string arg = t_[pos_ - 1].text;
      if (!Accept(")")) return Error("expected ')' after " + name + "(" + arg);
      if (name == "shape") {
        if (op_.FindInput(arg) < 0) return Error("shape(" + arg + "): '" + arg + "' is not an input");
      } else if (name == "inverse_perm" || name == "list") {
        if (op_.FindAttr(arg) < 0) return Error(name + "(" + arg + "): '" + arg + "' is not an attr");
      } else if (name == "needs_grad") {
        const int input = op_.FindInput(arg);
        if (input < 0) return Error("needs_grad(" + arg + "): '" + arg + "' is not an input of " + op_.name);
        if (op_.inputs[input].is_list()) {
          return Error("needs_grad(" + arg + "): '" + arg + "' is a list input; needs_grad takes one tensor input");
        }
      } else {
        return Error("unknown attr function '" + name + "' (known: shape, inverse_perm, list, needs_grad)");
      }
      v->kind = GradAttrValue::kFunction;
      v->text = name;
      v->argument = arg;
    } else if (op_.FindAttr(name) >= 0) {
      v->kind = GradAttrValue::kAttr;
      v->text = name;
    } else if (DTypeFromName(name, &dtype)) {
      v->text = JsonString(name);
    } else {
      return Error("'" + name + "' is not an attr of " + op_.name + ", a dtype or a literal");
    }
    return Status::OK();
  }

  bool Accept(const char* punct_or_ident) {
    const Token& tok = t_[pos_];
    if ((tok.kind == Token::kPunct || tok.kind == Token::kIdent) && tok.text == punct_or_ident) {
      ++pos_;
      return true;
    }
    return false;
  }

  Status Expect(Token::Kind kind, const std::string& what) {
    if (t_[pos_].kind != kind) {
      return Error("expected " + what + (t_[pos_].kind == Token::kEnd ? " at the end" : ", got '" + t_[pos_].text + "'"));
    }
    ++pos_;
    return Status::OK();
  }

  Status Error(const std::string& message) { return errors::InvalidArgument(message); }

  const OpDef& op_;
  const std::vector<std::string>& locals_;
  std::vector<Token> t_;
  size_t pos_ = 0;
  bool per_element_ = false;
};

}  // namespace

Status ParseGradientRule(const OpDef& op, const std::string& spec, const std::vector<std::string>& locals,
                         GradRule* out) {
  std::vector<Token> tokens;
  std::string error;
  Status s;
  if (!Tokenize(spec, &tokens, &error)) {
    s = errors::InvalidArgument(error);
  } else {
    *out = GradRule();
    s = Parser(op, locals, std::move(tokens)).Rule(out);
  }
  return s.ok() ? s : errors::InvalidArgument(Where(op, spec), s.message());
}

}  // namespace opforge
