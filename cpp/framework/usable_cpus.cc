// Sizing the intra-op pool to what the process may use, not what the machine
// has: a container with a 2-CPU quota on a 64-core host, `taskset -c 0`, or
// a Dask worker (OMP_NUM_THREADS=1) must not get 64 spinning threads.
#include "usable_cpus.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace opforge {
namespace {

constexpr int kMaxThreads = 1024;  // a typo like OPFORGE_NUM_THREADS=100000 must not fork-bomb

// A positive int from the start of `s` (an env value like "4" or "4,2"), or 0.
int LeadingPositiveInt(const char* s) {
  if (s == nullptr) return 0;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || errno != 0 || v < 1) return 0;
  if (*end != '\0' && *end != ',') return 0;  // "4x" is not a thread count
  return static_cast<int>(std::min<long>(v, kMaxThreads));
}

std::string SysPath(const std::string& path) {
  const char* root = std::getenv("OPFORGE_SYSROOT");
  return root != nullptr ? std::string(root) + path : path;
}

// A whole small file (cgroup and proc files are a few KB); "" if unreadable.
std::string ReadSmall(const std::string& path) {
  std::ifstream f(SysPath(path));
  if (!f) return "";
  std::string text(1 << 16, '\0');
  f.read(&text[0], static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(f.gcount()));
  return text;
}

bool ParseInt64(const std::string& s, long long* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str()) return false;
  while (*end == ' ' || *end == '\n') ++end;
  if (*end != '\0') return false;
  *out = v;
  return true;
}

// CPUs allowed by a quota over a period (ceil), or 0 for "no limit".
int QuotaCpus(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return 0;
  const long long cpus = quota / period + (quota % period != 0);
  return static_cast<int>(std::min<long long>(cpus, kMaxThreads));
}

struct Mount {
  std::string root, point;  // the mounted subtree of the hierarchy, and where
};

// Mounts of cgroup filesystems: v2 (`cgroup2`), or v1 with the cpu controller.
std::vector<Mount> CgroupMounts(bool v2) {
  std::vector<Mount> mounts;
  std::istringstream in(ReadSmall("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string id, parent, dev, root, point, fstype, source, opts;
    if (!(head >> id >> parent >> dev >> root >> point) || !(tail >> fstype >> source >> opts)) continue;
    if (v2 ? fstype != "cgroup2" : fstype != "cgroup") continue;
    if (!v2 && ("," + opts + ",").find(",cpu,") == std::string::npos) continue;
    mounts.push_back({root, point});
  }
  return mounts;
}

// This process's cgroup path: v2 ("0::/path") or v1's cpu controller line.
std::string OwnCgroup(bool v2) {
  std::istringstream in(ReadSmall("/proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (v2 ? (line.compare(0, a, "0") == 0 && controllers.empty())
           : ("," + controllers + ",").find(",cpu,") != std::string::npos) {
      return line.substr(b + 1);
    }
  }
  return "";
}

// The smallest quota from the cgroup's directory up to the mount point (a
// parent's limit binds its children); 0 when none is set.
int HierarchyLimit(bool v2) {
  const std::string cgroup = OwnCgroup(v2);
  if (cgroup.empty() || cgroup.find("..") != std::string::npos) return 0;
  int limit = 0;
  for (const Mount& m : CgroupMounts(v2)) {
    // Inside a container the cgroup path may not start with the mount's root
    // (cgroup namespaces): then the mount point is our own cgroup.
    std::string rel = cgroup;
    if (m.root != "/" && rel.compare(0, m.root.size(), m.root) == 0) rel = rel.substr(m.root.size());
    else if (m.root != "/") rel = "";
    std::string dir = m.point + (rel == "/" ? "" : rel);
    for (;;) {
      int cpus = 0;
      if (v2) {
        std::istringstream max(ReadSmall(dir + "/cpu.max"));
        std::string quota, period;
        long long q, p;
        if ((max >> quota >> period) && quota != "max" && ParseInt64(quota, &q) && ParseInt64(period, &p)) {
          cpus = QuotaCpus(q, p);
        }
      } else {
        long long q, p;
        if (ParseInt64(ReadSmall(dir + "/cpu.cfs_quota_us"), &q) &&
            ParseInt64(ReadSmall(dir + "/cpu.cfs_period_us"), &p)) {
          cpus = QuotaCpus(q, p);
        }
      }
      if (cpus > 0) limit = limit == 0 ? cpus : std::min(limit, cpus);
      if (dir.size() <= m.point.size()) break;
      dir = dir.substr(0, dir.rfind('/'));
    }
  }
  return limit;
}

int AffinityCpus() {
  for (int size = 1024; size <= (1 << 16); size *= 4) {
    cpu_set_t* set = CPU_ALLOC(size);
    if (set == nullptr) break;
    const size_t bytes = CPU_ALLOC_SIZE(size);
    CPU_ZERO_S(bytes, set);
    const int rc = sched_getaffinity(0, bytes, set);
    const int n = rc == 0 ? CPU_COUNT_S(bytes, set) : 0;
    CPU_FREE(set);
    if (rc == 0) return n;
    if (errno != EINVAL) break;  // EINVAL: more CPUs than the set holds
  }
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

int UsableCpus() {
  int n = std::clamp(AffinityCpus(), 1, kMaxThreads);
  for (bool v2 : {true, false}) {
    const int quota = HierarchyLimit(v2);
    if (quota > 0) n = std::min(n, quota);
  }
  return n;
}

int ConfiguredIntraOpThreads() {
  if (int n = LeadingPositiveInt(std::getenv("OPFORGE_NUM_THREADS"))) return n;
  if (int n = LeadingPositiveInt(std::getenv("OMP_NUM_THREADS"))) return n;
  return UsableCpus();
}

}  // namespace opforge
