// Intra-op parallelism: splits [0, total) across the shared thread pool when
// the work is large enough to pay for it; small work runs inline.
#pragma once

#include <cstdint>
#include <functional>

namespace opforge {

// `cost_per_unit` is a rough count of cheap operations per unit of work.
void ParallelFor(int64_t total, int64_t cost_per_unit,
                 const std::function<void(int64_t begin, int64_t end)>& fn);

int NumIntraOpThreads();

}  // namespace opforge
