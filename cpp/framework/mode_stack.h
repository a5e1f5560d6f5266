// The per-thread mode stack: which mode an op call runs in.
//
// Every generated wrapper makes one call into C++; the binder (bind.h)
// binds it once, and the innermost entry of the calling thread's stack
// decides what happens to the bound call. An empty stack is eager mode.
//
//   kEager  run the kernel now; the tape records the call when an input
//           requires a gradient (recording is a property of the call, so
//           it needs no entry: every mode that defers work runs such a
//           call eagerly instead, and the recorded call is taped once)
//   kAsync  submit to the engine's async queue; return pending Tensors
//   kGraph  add a node to the graph `target` (a Graph) from the bound call
//   kHook   hand the call to a function the user wrote (`target`: the
//           extension's handle of it); the only entry that crosses back
//           into the host language. It may pass the call on to the entry
//           below it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "opforge/status.h"

namespace opforge {

enum class Mode : uint8_t { kEager, kAsync, kGraph, kHook };

struct ModeEntry {
  Mode mode = Mode::kEager;
  void* target = nullptr;
};

// This thread's stack. Entries are pushed and popped by the thread itself,
// innermost first; other threads never see them.
class ModeStack {
 public:
  static ModeStack& ThisThread();

  // Fails past kMaxDepth entries (a runaway recursion, not a program).
  Status Push(Mode mode, void* target);
  // Removes the innermost entry, which must be (mode, target).
  Status Pop(Mode mode, void* target);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Entry `i` counting from the bottom (0); the innermost is size() - 1.
  const ModeEntry& at(size_t i) const { return entries_[i]; }

 static constexpr size_t kMaxDepth = 256;

 private:
  ModeEntry entries_[kMaxDepth];
  size_t size_ = 0;
};

const char* ModeName(Mode mode);

}  // namespace opforge
