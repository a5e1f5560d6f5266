// See wake_steering.h.
#include "wake_steering.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

namespace opforge {
namespace {

bool Enabled() {
  static const bool on = [] {
    const char* v = std::getenv("OPFORGE_POOL_STEER");
    return v == nullptr || v[0] != '0' || v[1] != '\0';
  }();
  return on;
}

}  // namespace

void WakeSteering::Register(int i) { slots_[i].tid = static_cast<pid_t>(syscall(SYS_gettid)); }

void WakeSteering::Parking(int i) {
  Slot& s = slots_[i];
  // Read at every park: the worker's affinity may have been changed.
  s.parked = Enabled() && sched_getaffinity(0, sizeof(s.allowed), &s.allowed) == 0;
}

void WakeSteering::Woke(int i) {
  slots_[i].parked = false;
  // The other steered workers too: a notify wakes one of them, and the rest
  // would keep the narrowed affinity until their own next wake-up.
  for (Slot& s : slots_) {
    if (s.steered) sched_setaffinity(s.tid, sizeof(s.allowed), &s.allowed);
    s.steered = false;
  }
}

void WakeSteering::SteerAwayFromCaller() {
  const int cpu = sched_getcpu();
  if (cpu < 0 || cpu >= CPU_SETSIZE) return;
  for (Slot& s : slots_) {
    if (!s.parked || !CPU_ISSET(cpu, &s.allowed) || CPU_COUNT(&s.allowed) < 2) continue;
    cpu_set_t elsewhere = s.allowed;
    CPU_CLR(cpu, &elsewhere);
    if (sched_setaffinity(s.tid, sizeof(elsewhere), &elsewhere) == 0) s.steered = true;
  }
}

}  // namespace opforge
