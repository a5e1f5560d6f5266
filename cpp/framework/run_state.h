// What a kernel of a stateful op sees of the run it is part of: the
// Session's resource manager and the graph node's name. Set per thread by the
// graph runners (one node at a time per thread); unset means eager mode.
#pragma once

#include <string>

#include "opforge/resource.h"

namespace opforge {

struct RunState {
  ResourceMgr* resources = nullptr;   // null: EagerResourceMgr()
  const std::string* node = nullptr;  // null: eager (no node)
};

RunState& CurrentRunState();  // this thread's

// Sets this thread's run state for a scope, restoring the previous one.
class ScopedRunState {
 public:
  ScopedRunState(ResourceMgr* resources, const std::string* node) : saved_(CurrentRunState()) {
    CurrentRunState() = RunState{resources, node};
  }
  ~ScopedRunState() { CurrentRunState() = saved_; }
  ScopedRunState(const ScopedRunState&) = delete;
  ScopedRunState& operator=(const ScopedRunState&) = delete;

 private:
  RunState saved_;
};

}  // namespace opforge
