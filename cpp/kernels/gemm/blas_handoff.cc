// See blas_handoff.h. Numpy's OpenBLAS starts its workers when numpy is
// imported, which is before this library loads (the extension imports numpy
// first): the threads other than the loading one at load time are taken as
// its workers. Whether one is on a core is read from its CPU clock, twice: a
// running thread's clock advances between the reads (the kernel brings a
// running task's runtime up to date when its clock is read), a waiting one's
// does not.
#include "blas_handoff.h"

#include <dirent.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../blas_loader.h"
#include "epilogue.h"

namespace opforge {
namespace gemm {
namespace {

constexpr size_t kMaxWatched = 32;
constexpr size_t kMaxChecked = 4;  // ~2.4 us of clock reads each

pid_t Tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// The CPU-time clock of thread `tid` (what glibc's pthread_getcpuclockid
// builds: CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD_MASK).
clockid_t ThreadClock(pid_t tid) { return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6); }

std::vector<pid_t> ThreadsAtLoad() {
  std::vector<pid_t> tids;
  const pid_t self = Tid();
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      const pid_t t = static_cast<pid_t>(std::atoi(e->d_name));
      if (t > 0 && t != self && tids.size() < kMaxWatched) tids.push_back(t);
    }
    closedir(d);
  }
  return tids;
}

// Filled when the library loads; a thread that has since exited fails its
// clock read and is skipped.
const std::vector<pid_t> g_watched = ThreadsAtLoad();
std::atomic<int64_t> g_handoffs{0};

bool Enabled() {
  static const bool on = [] {
    const char* v = std::getenv("OPFORGE_GEMM_HANDOFF");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

// Whether one of the watched threads (other than the caller) is on a core.
// numpy's OpenBLAS workers all spin after a call, so the first few suffice.
bool WatchedThreadRunning() {
  static thread_local const pid_t self = Tid();
  for (size_t i = 0; i < g_watched.size() && i < kMaxChecked; ++i) {
    const clockid_t c = ThreadClock(g_watched[i]);
    timespec first, again;
    if (g_watched[i] != self && clock_gettime(c, &first) == 0 && clock_gettime(c, &again) == 0 &&
        (again.tv_sec != first.tv_sec || again.tv_nsec != first.tv_nsec)) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool HandOffWhileBlasAwake(const StridedArgs& g, const Epilogue& ep, int64_t threads) {
  if (!Enabled() || g.alpha != 1.0f || g.beta != 0.0f || g.ldc < g.n) return false;
  const blas::Library* lib = blas::Shared();
  // Its threads must be ones we may use (OPFORGE_NUM_THREADS, cgroup quota).
  if (lib == nullptr || lib->num_threads() < 2 || lib->num_threads() > threads) return false;
  bool ta, tb;
  int64_t lda, ldb;
  if (!blas::CblasOperands(g, &ta, &lda, &tb, &ldb)) return false;
  const int64_t kMax = lib->max_dim;
  if (g.m > kMax || g.n > kMax || g.k > kMax || lda > kMax || ldb > kMax || g.ldc > kMax) return false;
  if (!WatchedThreadRunning()) return false;
  lib->sgemm(ta, tb, g.m, g.n, g.k, g.a, lda, g.b, ldb, g.c, g.ldc);
  if (!ep.empty()) ApplyEpilogue(ep, g.c, g.ldc, 0, 0, g.m, g.n);
  g_handoffs.fetch_add(1, std::memory_order_relaxed);
  return true;
}

int64_t HandoffCount() { return g_handoffs.load(std::memory_order_relaxed); }

}  // namespace gemm
}  // namespace opforge
