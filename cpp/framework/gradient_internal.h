// Helpers gradient_parser.cc (the rule parser) and gradient.cc (checking
// and serialising the parsed rules) share; not part of gradient.h's API.
#pragma once

#include <string>

#include "gradient.h"

namespace opforge {
namespace gradient_internal {

// A JSON string literal of `s` (specs hold no control characters).
std::string JsonString(const std::string& s);

// A list of tensors: a list literal or function, or a list input's name.
bool IsListExpr(const OpDef& op, const GradExpr& e);

// The prefix of every error about `spec`: the op, where it is declared, the spec.
std::string Where(const OpDef& op, const std::string& spec);

}  // namespace gradient_internal
}  // namespace opforge
