// Status: how every fallible opforge call reports an error. The codes map
// one-to-one onto the Python classes in opforge.errors.
#pragma once

#include <sstream>
#include <string>
#include <utility>

namespace opforge {

enum class Code : int {
  kOk = 0,
  kInvalidArgument = 1,
  kNotFound = 2,
  kUnimplemented = 3,
  kResourceExhausted = 4,
  kInternal = 5,
  kAlreadyExists = 6,
  kFailedPrecondition = 7,  // the state is not ready for the call (an uninitialized variable)
};

const char* CodeName(Code c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status OK() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Returns a copy whose message starts with `prefix` (used to name the op).
  Status WithPrefix(const std::string& prefix) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

namespace errors {
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
#define OF_DEFINE_ERROR(Name, C)                          \
  template <typename... Args>                             \
  Status Name(const Args&... args) {                      \
    return Status(Code::C, StrCat(args...));              \
  }
OF_DEFINE_ERROR(InvalidArgument, kInvalidArgument)
OF_DEFINE_ERROR(NotFound, kNotFound)
OF_DEFINE_ERROR(Unimplemented, kUnimplemented)
OF_DEFINE_ERROR(ResourceExhausted, kResourceExhausted)
OF_DEFINE_ERROR(Internal, kInternal)
OF_DEFINE_ERROR(AlreadyExists, kAlreadyExists)
OF_DEFINE_ERROR(FailedPrecondition, kFailedPrecondition)
#undef OF_DEFINE_ERROR
}  // namespace errors

}  // namespace opforge

#define OF_RETURN_IF_ERROR(...)                         \
  do {                                                  \
    ::opforge::Status _of_status = (__VA_ARGS__);       \
    if (!_of_status.ok()) return _of_status;            \
  } while (0)
