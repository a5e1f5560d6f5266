// Where a parked pool worker wakes up (thread_pool.cc, inter_op_pool.cc).
//
// In a VM an idle vCPU looks preempted to the guest's scheduler, so a worker
// parked on a condition variable is woken onto its caller's CPU, and there
// it only time-slices with the caller until a load balance moves it, often
// after the call is over (measured on the 2-vCPU dev VM: always the caller's
// CPU, first run 20 us - 2.6 ms after the notify; docs/gemm_cold_calls.md).
// Waking it with the caller's CPU taken out of its affinity sends it to
// another CPU, where it runs beside the caller once that vCPU is back
// (0.2-0.75 ms there). The first worker to wake restores every narrowed one.
// OPFORGE_POOL_STEER=0 turns this off (to compare).
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <vector>

namespace opforge {

// One slot per worker. Every call is made under the owning pool's mutex.
class WakeSteering {
 public:
  explicit WakeSteering(int workers) : slots_(workers) {}

  // Worker `i`, on its own thread, before it first parks.
  void Register(int i);
  // Worker `i`, right before it waits on the pool's condition variable ...
  void Parking(int i);
  // ... and right after every return from that wait (spurious ones too):
  // restores the affinity of every worker steered since.
  void Woke(int i);
  // A task was queued and a worker is parked: narrow the parked workers'
  // affinity to exclude the calling thread's CPU. A system call per parked
  // worker, paid only when one is parked (tens of microseconds to wake anyway).
  void SteerAwayFromCaller();

 private:
  struct Slot {
    pid_t tid = 0;
    bool parked = false;
    bool steered = false;  // its affinity was narrowed while parked
    cpu_set_t allowed;     // its affinity before that
  };
  std::vector<Slot> slots_;
};

}  // namespace opforge
