// Cache blocking per CPU. Sessions 1-12 tuned kc = 256, 16 panels of A (192
// KiB for mr = 12), nc = 3072 and four tiles per thread on Zen 5 (1 MiB L2
// per core). On Intel Sapphire Rapids (2 MiB L2) the same kc / panels / nc
// measured best within noise, but fewer tiles per thread re-pack less of B
// (sgemm.cc's MakeGrid; docs/gemm.md, "Intel Sapphire Rapids").
#include "blocking.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace opforge {
namespace gemm {
namespace {

// "2048K" / "2M" / "1048576" -> bytes; 0 when unreadable.
int64_t ReadCacheSize(const char* path) {
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  long long v = 0;
  char unit = 0;
  const int got = std::fscanf(f, "%lld%c", &v, &unit);
  std::fclose(f);
  if (got < 1 || v <= 0) return 0;
  if (unit == 'K' || unit == 'k') v <<= 10;
  else if (unit == 'M' || unit == 'm') v <<= 20;
  return v;
}

Blocking Choose() {
  Blocking b{256, 16, 3072, 4};  // Zen 5 (1 MiB L2) and anything unknown
  const int64_t l2 = L2BytesPerCore();
  if (l2 >= (int64_t{2} << 20)) b.tiles_per_thread = 1;
  if (const char* env = std::getenv("OPFORGE_GEMM_BLOCKING")) {
    long long kc = 0, mp = 0, nc = 0, tpt = b.tiles_per_thread;
    if (std::sscanf(env, "%lld,%lld,%lld,%lld", &kc, &mp, &nc, &tpt) >= 3) {
      b.kc = std::clamp<int64_t>(kc, 16, 4096);
      b.mc_panels = std::clamp<int64_t>(mp, 1, 256);
      b.nc = std::clamp<int64_t>(nc, 64, 1 << 16);
      b.tiles_per_thread = std::clamp<int64_t>(tpt, 1, 64);
    }
  }
  return b;
}

}  // namespace

int64_t L2BytesPerCore() {
  static const int64_t bytes = [] {
    // index2 is the unified L2 on Linux x86 (index0/1: L1d/L1i).
    char path[96];
    for (int i = 0; i < 8; ++i) {
      std::snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
      FILE* f = std::fopen(path, "r");
      if (f == nullptr) break;
      int level = 0;
      const bool ok = std::fscanf(f, "%d", &level) == 1;
      std::fclose(f);
      if (ok && level == 2) {
        std::snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        return ReadCacheSize(path);
      }
    }
    return int64_t{0};
  }();
  return bytes;
}

const Blocking& GetBlocking() {
  static const Blocking b = Choose();
  return b;
}

}  // namespace gemm
}  // namespace opforge
