#include "opforge/status.h"

namespace opforge {

const char* CodeName(Code c) {
  switch (c) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kNotFound: return "NOT_FOUND";
    case Code::kUnimplemented: return "UNIMPLEMENTED";
    case Code::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case Code::kInternal: return "INTERNAL";
    case Code::kAlreadyExists: return "ALREADY_EXISTS";
    case Code::kFailedPrecondition: return "FAILED_PRECONDITION";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  return ok() ? "OK" : std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithPrefix(const std::string& prefix) const {
  if (ok()) return *this;
  return Status(code_, prefix + message_);
}

}  // namespace opforge
