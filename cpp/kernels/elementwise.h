// Shared loops for element-wise kernels: unary maps and N-ary numpy
// broadcasting. Any kernel author may include this header.
//
//   template <typename T> Status AddKernel(OpKernelContext* ctx) {
//     return elementwise::BinaryOp<T, T>(ctx, [](T a, T b) { return a + b; });
//   }
//
// Functors are template parameters (never std::function) so the inner loops
// inline and vectorize. Inner loops walk contiguous memory; broadcasting is
// handled by collapsing the shapes to as few dims as possible and stepping
// an odometer once per contiguous run, not once per element.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "opforge/kernel.h"
#include "opforge/parallel.h"
#include "opforge/tensor.h"

#include "compiler.h"

namespace opforge {
namespace elementwise {

// Rough per-element costs for ParallelFor (cheap ops ~ 1).
inline constexpr int64_t kCheapCost = 1;
inline constexpr int64_t kDivCost = 4;
inline constexpr int64_t kTranscendentalCost = 20;

// ---- integer arithmetic that wraps like numpy (signed overflow is UB in C++).

template <typename T>
inline T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
inline T WrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <typename T>
inline T WrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}
template <typename T>
inline T WrapNeg(T a) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(U(0) - static_cast<U>(a));
  } else {
    return -a;
  }
}

// ---- contiguous inner loops (the only per-element code).

template <typename TI, typename TO, typename F>
inline void MapV(const TI* OF_RESTRICT in, TO* OF_RESTRICT out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
}
template <typename TA, typename TB, typename TO, typename F>
inline void MapVV(const TA* OF_RESTRICT a, const TB* OF_RESTRICT b, TO* OF_RESTRICT out,
                  int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}
template <typename TA, typename TB, typename TO, typename F>
inline void MapSV(TA a, const TB* OF_RESTRICT b, TO* OF_RESTRICT out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a, b[i]);
}
template <typename TA, typename TB, typename TO, typename F>
inline void MapVS(const TA* OF_RESTRICT a, TB b, TO* OF_RESTRICT out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b);
}

// ---- broadcasting layout.

// The layout of N operands broadcast against an output shape, collapsed:
// output dims of size 1 are dropped and adjacent dims are merged whenever
// every operand is either contiguous across both or broadcast across both.
// strides[k][d] is operand k's element stride along collapsed dim d (0 where
// it is broadcast). The innermost stride of each operand is 0 or 1.
template <int N>
struct BroadcastPlan {
  int rank = 1;                        // >= 1
  int64_t dims[kMaxRank] = {1};
  int64_t strides[N][kMaxRank] = {};
  int64_t inner() const { return dims[rank - 1]; }
};

// `in[k]` must broadcast to `out` (the shape function checked it).
template <int N>
BroadcastPlan<N> MakeBroadcastPlan(const TensorShape& out, const TensorShape* const* in) {
  // Built innermost-first, then reversed.
  int64_t dims[kMaxRank];
  int64_t strides[N][kMaxRank];
  int64_t acc[N];
  for (int k = 0; k < N; ++k) acc[k] = 1;
  int t = 0;
  const int r = out.rank();
  for (int i = r - 1; i >= 0; --i) {
    const int64_t od = out.dim(i);
    int64_t cur[N];
    for (int k = 0; k < N; ++k) {
      const int ki = in[k]->rank() - (r - i);
      const int64_t d = ki >= 0 ? in[k]->dim(ki) : 1;
      cur[k] = d == 1 ? 0 : acc[k];
      acc[k] *= d;
    }
    if (od == 1) continue;
    bool merge = t > 0;
    for (int k = 0; k < N && merge; ++k) merge = (cur[k] == 0) == (strides[k][t - 1] == 0);
    if (merge) {
      dims[t - 1] *= od;  // keeps the inner dim's strides
      continue;
    }
    dims[t] = od;
    for (int k = 0; k < N; ++k) strides[k][t] = cur[k];
    ++t;
  }
  BroadcastPlan<N> p;
  if (t == 0) return p;  // every dim is 1: one element
  p.rank = t;
  for (int d = 0; d < t; ++d) {
    p.dims[d] = dims[t - 1 - d];
    for (int k = 0; k < N; ++k) p.strides[k][d] = strides[k][t - 1 - d];
  }
  return p;
}

// Calls run(off, n) for each contiguous run of output elements in
// [begin, end): off[k] is operand k's element offset at the run's start,
// off[N] the output's; the run spans n elements along the innermost dim.
template <int N, typename Run>
void ForEachRun(const BroadcastPlan<N>& p, int64_t begin, int64_t end, Run run) {
  const int r = p.rank;
  int64_t idx[kMaxRank];
  int64_t off[N + 1];
  for (int k = 0; k < N; ++k) off[k] = 0;
  off[N] = begin;
  int64_t rem = begin;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % p.dims[d];
    rem /= p.dims[d];
    for (int k = 0; k < N; ++k) off[k] += idx[d] * p.strides[k][d];
  }
  int64_t pos = begin;
  while (pos < end) {
    const int64_t n = std::min(p.dims[r - 1] - idx[r - 1], end - pos);
    run(static_cast<const int64_t*>(off), n);
    pos += n;
    if (pos >= end) break;
    off[N] += n;
    for (int k = 0; k < N; ++k) off[k] += n * p.strides[k][r - 1];
    idx[r - 1] += n;
    // Carry into outer dims.
    for (int d = r - 1; d > 0 && idx[d] == p.dims[d]; --d) {
      for (int k = 0; k < N; ++k) off[k] += p.strides[k][d - 1] - idx[d] * p.strides[k][d];
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

// ---- whole loops over raw buffers.

template <typename TI, typename TO, typename F>
void UnaryLoop(const TI* in, TO* out, int64_t n, F f, int64_t cost = kCheapCost) {
  ParallelFor(n, cost, [&](int64_t b, int64_t e) { MapV(in + b, out + b, e - b, f); });
}

// out[i] = f(a[.], b[.]) with numpy broadcasting of a and b to `os`.
template <typename TA, typename TB, typename TO, typename F>
void BinaryLoop(const TA* a, const TensorShape& as, const TB* b, const TensorShape& bs, TO* out,
                const TensorShape& os, F f, int64_t cost = kCheapCost) {
  const int64_t n = os.num_elements();
  if (n == 0) return;
  const int64_t an = as.num_elements(), bn = bs.num_elements();
  if (an == n && bn == n) {  // same layout (possibly differing only in 1-dims)
    ParallelFor(n, cost, [&](int64_t s, int64_t e) { MapVV(a + s, b + s, out + s, e - s, f); });
    return;
  }
  if (an == 1 && bn == n) {
    const TA av = a[0];
    ParallelFor(n, cost, [&](int64_t s, int64_t e) { MapSV(av, b + s, out + s, e - s, f); });
    return;
  }
  if (bn == 1 && an == n) {
    const TB bv = b[0];
    ParallelFor(n, cost, [&](int64_t s, int64_t e) { MapVS(a + s, bv, out + s, e - s, f); });
    return;
  }
  const TensorShape* shapes[2] = {&as, &bs};
  const BroadcastPlan<2> plan = MakeBroadcastPlan<2>(os, shapes);
  const int last = plan.rank - 1;
  const bool a_inner = plan.strides[0][last] != 0, b_inner = plan.strides[1][last] != 0;
  ParallelFor(n, cost, [&](int64_t s, int64_t e) {
    ForEachRun<2>(plan, s, e, [&](const int64_t* off, int64_t len) {
      const TA* pa = a + off[0];
      const TB* pb = b + off[1];
      TO* po = out + off[2];
      if (a_inner && b_inner) {
        MapVV(pa, pb, po, len, f);
      } else if (b_inner) {
        MapSV(*pa, pb, po, len, f);
      } else if (a_inner) {
        MapVS(pa, *pb, po, len, f);
      } else {
        const TO v = f(*pa, *pb);
        std::fill(po, po + len, v);
      }
    });
  });
}

// Inner loop of TernaryLoop with compile-time strides (0: broadcast, 1:
// contiguous), so a broadcast operand is one hoisted load and the loop vectorizes.
template <int SA, int SB, int SC, typename TA, typename TB, typename TC, typename TO, typename F>
inline void Map3(const TA* OF_RESTRICT a, const TB* OF_RESTRICT b, const TC* OF_RESTRICT c,
                 TO* OF_RESTRICT out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[SA * i], b[SB * i], c[SC * i]);
}

template <typename TA, typename TB, typename TC, typename TO, typename F>
inline void Map3Strided(const TA* a, int64_t sa, const TB* b, int64_t sb, const TC* c, int64_t sc,
                        TO* out, int64_t n, F f) {
  switch ((sa != 0) << 2 | (sb != 0) << 1 | (sc != 0)) {
    case 0: std::fill(out, out + n, f(*a, *b, *c)); break;
    case 1: Map3<0, 0, 1>(a, b, c, out, n, f); break;
    case 2: Map3<0, 1, 0>(a, b, c, out, n, f); break;
    case 3: Map3<0, 1, 1>(a, b, c, out, n, f); break;
    case 4: Map3<1, 0, 0>(a, b, c, out, n, f); break;
    case 5: Map3<1, 0, 1>(a, b, c, out, n, f); break;
    case 6: Map3<1, 1, 0>(a, b, c, out, n, f); break;
    default: Map3<1, 1, 1>(a, b, c, out, n, f); break;
  }
}

// out[i] = f(a[.], b[.], c[.]) with three-way numpy broadcasting to `os`.
template <typename TA, typename TB, typename TC, typename TO, typename F>
void TernaryLoop(const TA* a, const TensorShape& as, const TB* b, const TensorShape& bs,
                 const TC* c, const TensorShape& cs, TO* out, const TensorShape& os, F f,
                 int64_t cost = kCheapCost) {
  const int64_t n = os.num_elements();
  if (n == 0) return;
  const int64_t an = as.num_elements(), bn = bs.num_elements(), cn = cs.num_elements();
  if ((an == n || an == 1) && (bn == n || bn == 1) && (cn == n || cn == 1)) {
    // Each operand is either the full layout or a single value.
    const int64_t sa = an == n && n > 1, sb = bn == n && n > 1, sc = cn == n && n > 1;
    ParallelFor(n, cost, [&](int64_t s, int64_t e) {
      Map3Strided(a + s * sa, sa, b + s * sb, sb, c + s * sc, sc, out + s, e - s, f);
    });
    return;
  }
  const TensorShape* shapes[3] = {&as, &bs, &cs};
  const BroadcastPlan<3> plan = MakeBroadcastPlan<3>(os, shapes);
  const int last = plan.rank - 1;
  const int64_t sa = plan.strides[0][last], sb = plan.strides[1][last],
                sc = plan.strides[2][last];
  ParallelFor(n, cost, [&](int64_t s, int64_t e) {
    ForEachRun<3>(plan, s, e, [&](const int64_t* off, int64_t len) {
      Map3Strided(a + off[0], sa, b + off[1], sb, c + off[2], sc, out + off[3], len, f);
    });
  });
}

// ---- kernel bodies: read inputs 0.., allocate output 0, run the loop.

template <typename TI, typename TO = TI, typename F>
Status UnaryOp(OpKernelContext* ctx, F f, int64_t cost = kCheapCost) {
  const Tensor& x = ctx->input(0);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  UnaryLoop(x.data<TI>(), y->data<TO>(), y->NumElements(), f, cost);
  return Status::OK();
}

template <typename TI, typename TO = TI, typename F>
Status BinaryOp(OpKernelContext* ctx, F f, int64_t cost = kCheapCost) {
  const Tensor& x = ctx->input(0);
  const Tensor& y = ctx->input(1);
  Tensor* z = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &z));
  BinaryLoop(x.data<TI>(), x.shape(), y.data<TI>(), y.shape(), z->data<TO>(), z->shape(), f,
             cost);
  return Status::OK();
}

}  // namespace elementwise
}  // namespace opforge
