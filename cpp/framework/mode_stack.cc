#include "mode_stack.h"

namespace opforge {

ModeStack& ModeStack::ThisThread() {
  static thread_local ModeStack stack;
  return stack;
}

Status ModeStack::Push(Mode mode, void* target) {
  if (size_ == kMaxDepth) {
    return errors::ResourceExhausted("more than ", kMaxDepth, " nested modes (entering ", ModeName(mode), ")");
  }
  entries_[size_++] = ModeEntry{mode, target};
  return Status::OK();
}

Status ModeStack::Pop(Mode mode, void* target) {
  if (size_ == 0 || entries_[size_ - 1].mode != mode || entries_[size_ - 1].target != target) {
    return errors::InvalidArgument("modes must be left innermost first, on the thread that entered them (leaving ",
                                   ModeName(mode), ")");
  }
  --size_;
  return Status::OK();
}

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kEager: return "eager";
    case Mode::kAsync: return "async";
    case Mode::kGraph: return "graph";
    case Mode::kHook: return "hook";
  }
  return "?";
}

}  // namespace opforge
