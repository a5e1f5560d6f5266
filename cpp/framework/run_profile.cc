// Per-node timing of graph runs (run_profile.h).
#include "run_profile.h"

#include <mutex>
#include <utility>

namespace opforge {

std::atomic<bool> g_profile_runs{false};

namespace {
std::mutex g_mu;
std::vector<StepTiming>& Recorded() {
  static auto* v = new std::vector<StepTiming>();  // never destroyed: no exit-order hazard
  return *v;
}
}  // namespace

bool SetProfilingRuns(bool on) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (on) Recorded().clear();
  return g_profile_runs.exchange(on);
}

void RecordStepTimings(std::vector<StepTiming>* run) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& all = Recorded();
  for (auto& t : *run) all.push_back(std::move(t));
  run->clear();
}

std::vector<StepTiming> TakeStepTimings() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<StepTiming> out;
  out.swap(Recorded());
  return out;
}

}  // namespace opforge
