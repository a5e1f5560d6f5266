// How many CPUs this process may actually use: what the intra-op pool sizes
// itself from (thread_pool.cc). Internal to the framework.
#pragma once

namespace opforge {

// The intra-op thread count: OPFORGE_NUM_THREADS if set (>= 1), else
// OMP_NUM_THREADS's first value (Dask workers set it to 1), else
// UsableCpus().
int ConfiguredIntraOpThreads();

// min(CPUs in sched_getaffinity, ceil of the cgroup v2 cpu.max / v1 CFS
// quota along this process's cgroup and its ancestors); at least 1.
// OPFORGE_SYSROOT (tests only) prefixes every /proc and /sys path read.
int UsableCpus();

}  // namespace opforge
