// Per-node timing of graph runs (a profiling aid, off by default): while
// on, the in-order runner records each step's kernel time. Costs one
// relaxed atomic load per run when off.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace opforge {

struct StepTiming {
  std::string node;  // the graph node's name
  std::string op;    // its op (a fused node's op is the fused op)
  int64_t ns;        // the kernel call, wall time
};

extern std::atomic<bool> g_profile_runs;
inline bool ProfilingRuns() { return g_profile_runs.load(std::memory_order_relaxed); }
// Turns recording on or off; returns the previous setting. Turning it on
// drops what was recorded.
bool SetProfilingRuns(bool on);
void RecordStepTimings(std::vector<StepTiming>* run);  // appends (moves out)
std::vector<StepTiming> TakeStepTimings();             // and clears

}  // namespace opforge
