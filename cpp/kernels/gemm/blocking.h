// The cache blocking of the packed f32 GEMM (sgemm.cc), chosen once at run
// time from the CPU's caches. Internal to cpp/kernels/gemm/.
#pragma once

#include <cstdint>

namespace opforge {
namespace gemm {

struct Blocking {
  int64_t kc;         // depth of a packed block
  int64_t mc_panels;  // A block: mc_panels * mr rows x kc (in L2)
  int64_t nc;         // B block: nc columns x kc
  // Tiles per intra-op thread of a threaded product with packed A (sgemm.cc's
  // MakeGrid): more balance a busy core, fewer re-pack less of A and B.
  int64_t tiles_per_thread;
};

// The blocking for this CPU (blocking.cc). OPFORGE_GEMM_BLOCKING="kc,mc_panels,nc,tiles_per_thread"
// overrides it (for measuring; values are clamped to sane ranges).
const Blocking& GetBlocking();

// This core's L2 in bytes as the OS reports it (sysfs), 0 when unknown.
int64_t L2BytesPerCore();

}  // namespace gemm
}  // namespace opforge
