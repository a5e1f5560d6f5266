// Gradient declarations: the parsed form of OpDefBuilder::Gradient specs.
//
//   .Gradient("x = Mul(dz, y)")                     one input
//   .Gradient("a, b = MatMulGrad(a, b, dproduct, transpose_a=transpose_a)")
//   .Gradient("values[i] = ConcatGrad(doutput, values, axis=axis, index=i)")
//   .Gradient("condition = None")                    no gradient for this input
//   .Gradient("let n = RmsNorm(x, OnesLike(weight))") a local: later rules use n,
//                                                    computed once
//
// An expression is a number, a name or a call of a registered op with
// positional inputs and `attr=value` keywords. A list input of the called op
// takes a list: a list input's name, `[e, ...]`, `append(list, e)` (one more
// element) or, in a per-element rule, `replace(list, e)` (element i
// replaced by e). Names are the op's inputs,
// outputs, `d<output>` (the gradient flowing into an output) and scalar
// attrs (a value like a number). An attr
// value is a literal (number, true/false, None, 'string', [list], dtype
// name), a forward attr's name, `i` (the element of a list input), or
// shape(input) / inverse_perm(attr) / list(attr) (a one-element list) /
// needs_grad(input) (a bool: whether that input needs a gradient in this
// backward pass, for a bool attr of a backward op that can skip work).
//
// A rule none of whose inputs needs a gradient is not evaluated (its inputs
// get None), so a rule's cost is only paid where its result is used.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "opforge/op.h"

namespace opforge {

struct GradAttrValue {
  enum Kind { kLiteral, kAttr, kIndex, kFunction } kind = kLiteral;
  std::string text;      // kLiteral: JSON of the literal; kAttr: the attr; kFunction: its name
  std::string argument;  // kFunction: the input or attr it applies to
};

struct GradExpr {
  enum Kind { kNone, kNumber, kName, kCall, kList } kind = kNone;
  std::string text;  // kNumber: as written; kName: the name; kCall: the op; kList: literal/append/replace
  enum NameKind { kInput, kOutput, kGrad, kAttr, kLocal } name_kind = kInput;
  int index = 0;     // kName: which input/output/attr/local (for kGrad, the output)
  std::vector<GradExpr> args;  // kCall: the inputs; kList: the elements (append/replace: the list, then e)
  std::vector<std::pair<std::string, GradAttrValue>> attrs;
};

struct GradRule {
  std::vector<std::string> targets;  // input names (a local: its name)
  bool per_element = false;          // `values[i] = ...`: one expression per list element
  bool local = false;                // `let name = ...`: a value later rules share
  GradExpr expr;
};

// Parses one spec and checks its names against `op` (not the ops it calls)
// and `locals`, the names of the lets before it, in order.
Status ParseGradientRule(const OpDef& op, const std::string& spec, const std::vector<std::string>& locals,
                         GradRule* out);

// Checks the parsed rules of `op` against the ops they call: each exists, gets
// as many inputs as it declares, attrs it has, and as many outputs as bound.
// Also that an op declaring rules covers every input that may be floating
// point. `find` resolves op names.
Status CheckGradient(const OpDef& op, const std::function<const OpDef*(const std::string&)>& find);

// {"none": bool, "rules": [...]}: what codegen renders.
std::string GradientJson(const OpDef& op);

}  // namespace opforge
