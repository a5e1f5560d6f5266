// Reduction kernels: Sum, Prod, Max, Min, Mean, ArgMax, ArgMin.
//
// Every reduction is brought down to one or more passes of a 3-D problem
// [outer, R, inner] -> [outer, inner]: the input shape drops its size-1 dims,
// adjacent reduced (or kept) dims merge, and each remaining reduced group is
// folded away in turn, innermost first. Intermediate passes keep the
// accumulator type (float32 sums stay in double). inner == 1 reduces
// contiguous rows with independent lanes (vectorizes, and keeps float error
// small); inner > 1 accumulates whole contiguous rows into a column block.
// Long reductions split into fixed-size chunks whose partial results are
// reduced again, so the result never depends on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>

#include "opforge/kernel.h"
#include "opforge/parallel.h"
#include "vector_math.h"

#include "compiler.h"

namespace opforge {
namespace {

using int64 = int64_t;

constexpr int64 kChunk = int64{1} << 15;  // elements per work unit / partial result
constexpr int64 kCols = 4096;              // column block for inner > 1 (stays in L1)
constexpr int kLanes = 16;                // independent accumulators per row

// ---- Reduction policies: an accumulator type, its identity, the combine
// step and the final conversion to the tensor type.

template <typename T> struct SumAccOf { using type = T; };
template <> struct SumAccOf<float> { using type = double; };
template <> struct SumAccOf<int32_t> { using type = uint32_t; };  // wraps like numpy
template <> struct SumAccOf<int64_t> { using type = uint64_t; };

template <typename T> struct ProdAccOf { using type = T; };  // float32 products overflow like numpy
template <> struct ProdAccOf<int32_t> { using type = uint32_t; };
template <> struct ProdAccOf<int64_t> { using type = uint64_t; };

template <typename T>
struct SumOp {
  using Type = T;
  using Acc = typename SumAccOf<T>::type;
  static Acc Identity() { return Acc(0); }
  static Acc Apply(Acc a, Acc b) { return a + b; }
  static T Finish(Acc a, int64) { return static_cast<T>(a); }
};

template <typename T>
struct MeanOp : SumOp<T> {
  using Acc = typename SumOp<T>::Acc;  // double or float64
  static T Finish(Acc a, int64 n) { return static_cast<T>(a / static_cast<double>(n)); }  // 0/0 = NaN
};

template <typename T>
struct ProdOp {
  using Type = T;
  using Acc = typename ProdAccOf<T>::type;
  static Acc Identity() { return Acc(1); }
  static Acc Apply(Acc a, Acc b) { return a * b; }
  static T Finish(Acc a, int64) { return static_cast<T>(a); }
};

// (a >= b) | (a != a) keeps a NaN accumulator and lets a NaN operand in;
// the non-short-circuit | keeps it branch-free, so the lane loops vectorize.
template <typename T>
struct MaxOp {
  using Type = T;
  using Acc = T;
  static Acc Identity() {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  }
  static Acc Apply(Acc a, Acc b) {
    if constexpr (std::is_floating_point_v<T>) return ((a >= b) | (a != a)) ? a : b;
    else return a >= b ? a : b;
  }
  static T Finish(Acc a, int64) { return a; }
};

template <typename T>
struct MinOp {
  using Type = T;
  using Acc = T;
  static Acc Identity() {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::max();
  }
  static Acc Apply(Acc a, Acc b) {
    if constexpr (std::is_floating_point_v<T>) return ((a <= b) | (a != a)) ? a : b;
    else return a <= b ? a : b;
  }
  static T Finish(Acc a, int64) { return a; }
};

template <class Op, bool kFinal, class Out>
inline Out Emit(typename Op::Acc a, int64 count) {
  if constexpr (kFinal) return Op::Finish(a, count);
  else return a;
}

// Sum and Mean of float32/float64 in double: the dispatched SIMD loop.
template <class Op, class In>
inline constexpr bool kVectorSum =
    std::is_base_of_v<SumOp<typename Op::Type>, Op> && std::is_same_v<typename Op::Acc, double> &&
    (std::is_same_v<In, float> || std::is_same_v<In, double>);

// Reduces the contiguous x[0, n) with kLanes independent accumulators.
template <class Op, class In>
typename Op::Acc ReduceRow(const In* OF_RESTRICT x, int64 n) {
  using Acc = typename Op::Acc;
  if constexpr (kVectorSum<Op, In>) return vmath::Sum(x, n);
  Acc r = Op::Identity();
  int64 i = 0;
  if (n >= kLanes) {
    Acc lanes[kLanes];
    for (int l = 0; l < kLanes; ++l) lanes[l] = Op::Identity();
    if constexpr (std::is_floating_point_v<Acc>) {
      for (; i + kLanes <= n; i += kLanes) {
        // Kept a loop (not unrolled into scalars) so the NaN-aware Max/Min vectorize too.
        OF_NO_UNROLL
        for (int l = 0; l < kLanes; ++l) lanes[l] = Op::Apply(lanes[l], static_cast<Acc>(x[i + l]));
      }
    } else {
      for (; i + kLanes <= n; i += kLanes) {
        for (int l = 0; l < kLanes; ++l) lanes[l] = Op::Apply(lanes[l], static_cast<Acc>(x[i + l]));
      }
    }
    for (int w = kLanes / 2; w >= 1; w /= 2) {
      for (int l = 0; l < w; ++l) lanes[l] = Op::Apply(lanes[l], lanes[l + w]);
    }
    r = lanes[0];
  }
  for (; i < n; ++i) r = Op::Apply(r, static_cast<Acc>(x[i]));
  return r;
}

// acc[k] = op(acc[k], x[k]) for k in [0, n).
template <class Op, class In>
inline void AccumulateRow(typename Op::Acc* OF_RESTRICT acc, const In* OF_RESTRICT x, int64 n) {
  using Acc = typename Op::Acc;
  for (int64 k = 0; k < n; ++k) acc[k] = Op::Apply(acc[k], static_cast<Acc>(x[k]));
}

template <typename A>
std::unique_ptr<A[]> NewBuffer(int64 n) {
  return std::unique_ptr<A[]>(new (std::nothrow) A[static_cast<size_t>(std::max<int64>(n, 1))]);
}

Status OutOfMemory(int64 n) {
  return errors::ResourceExhausted("could not allocate a ", n, "-element scratch buffer for the reduction");
}

// out[o, k] = reduce_r x[o, r, k], for R >= 1. `count` is the total number of
// reduced elements per output (Mean divides by it on the final pass).
template <class Op, class In, class Out, bool kFinal>
Status Reduce3D(const In* x, int64 outer, int64 R, int64 inner, Out* out, int64 count) {
  using Acc = typename Op::Acc;
  if (inner == 1) {
    const int64 nrc = (R + kChunk - 1) / kChunk;  // chunks per row
    if (nrc == 1) {
      ParallelFor(outer, R, [&](int64 b, int64 e) {
        for (int64 o = b; o < e; ++o) out[o] = Emit<Op, kFinal, Out>(ReduceRow<Op>(x + o * R, R), count);
      });
      return Status::OK();
    }
    auto partial = NewBuffer<Acc>(outer * nrc);
    if (!partial) return OutOfMemory(outer * nrc);
    Acc* p = partial.get();
    ParallelFor(outer * nrc, kChunk, [&](int64 b, int64 e) {
      for (int64 u = b; u < e; ++u) {
        const int64 o = u / nrc, s = (u % nrc) * kChunk;
        p[u] = ReduceRow<Op>(x + o * R + s, std::min(kChunk, R - s));
      }
    });
    return Reduce3D<Op, Acc, Out, kFinal>(p, outer, nrc, 1, out, count);
  }

  const int64 cw = std::min(inner, kCols);
  const int64 ncb = (inner + cw - 1) / cw;
  // Split R only when the outputs alone give too little parallel work.
  const int64 rows_per = std::max<int64>(kChunk / cw, 1);
  const int64 nrc = (outer * ncb < 16 && R > 2 * rows_per) ? (R + rows_per - 1) / rows_per : 1;
  std::unique_ptr<Acc[]> partial;
  if (nrc > 1) {
    partial = NewBuffer<Acc>(outer * nrc * inner);
    if (!partial) return OutOfMemory(outer * nrc * inner);
  }
  Acc* p = partial.get();
  const int64 rows = nrc == 1 ? R : rows_per;
  ParallelFor(outer * nrc * ncb, rows * cw, [&](int64 b, int64 e) {
    Acc acc[kCols];
    for (int64 u = b; u < e; ++u) {
      const int64 cb = u % ncb, t = u / ncb;
      const int64 c = t % nrc, o = t / nrc;
      const int64 col0 = cb * cw, w = std::min(cw, inner - col0);
      const int64 r0 = c * rows, r1 = std::min(R, r0 + rows);
      for (int64 k = 0; k < w; ++k) acc[k] = Op::Identity();
      const In* src = x + (o * R + r0) * inner + col0;
      for (int64 r = r0; r < r1; ++r, src += inner) AccumulateRow<Op>(acc, src, w);
      if (nrc == 1) {
        Out* dst = out + o * inner + col0;
        for (int64 k = 0; k < w; ++k) dst[k] = Emit<Op, kFinal, Out>(acc[k], count);
      } else {
        std::memcpy(p + (o * nrc + c) * inner + col0, acc, static_cast<size_t>(w) * sizeof(Acc));
      }
    }
  });
  if (nrc == 1) return Status::OK();
  return Reduce3D<Op, Acc, Out, kFinal>(p, outer, nrc, inner, out, count);
}

// Reduced axes from attr 'axis' (validated by the shape function).
void ReducedAxes(const OpKernelContext* ctx, int rank, bool reduced[kMaxRank]) {
  const AttrValue& axis = ctx->attr("axis");
  for (int i = 0; i < kMaxRank; ++i) reduced[i] = axis.is_none() && i < rank;
  if (axis.is_none()) return;
  for (int64 a : axis.list_i) reduced[a < 0 ? a + rank : a] = true;
}

// The input's shape without size-1 dims, adjacent dims of the same kind merged.
struct Collapsed {
  int n = 0;
  int64 dims[kMaxRank] = {};  // zeroed: GCC 12 otherwise warns (falsely) when PopInnermost copies it
  bool reduced[kMaxRank] = {};

  void Add(int64 d, bool red) {
    if (d == 1) return;
    if (n > 0 && reduced[n - 1] == red) {
      dims[n - 1] *= d;
    } else {
      dims[n] = d;
      reduced[n] = red;
      ++n;
    }
  }
  int ReducedGroups() const {
    int g = 0;
    for (int i = 0; i < n; ++i) g += reduced[i];
    return g;
  }
  // Takes out the innermost reduced group as [outer, R, inner].
  void PopInnermost(int64* outer, int64* R, int64* inner) {
    int j = n - 1;
    while (!reduced[j]) --j;
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < j; ++i) *outer *= dims[i];
    for (int i = j + 1; i < n; ++i) *inner *= dims[i];
    *R = dims[j];
    Collapsed next;
    for (int i = 0; i < n; ++i) {
      if (i != j) next.Add(dims[i], reduced[i]);
    }
    *this = next;
  }
};

template <template <typename> class OpT, typename T>
Status ReduceKernel(OpKernelContext* ctx) {
  using Op = OpT<T>;
  using Acc = typename Op::Acc;
  const Tensor& x = ctx->input(0);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const int64 nout = y->NumElements();
  if (nout == 0) return Status::OK();
  T* out = y->data<T>();
  const T* in = x.data<T>();

  bool reduced[kMaxRank];
  ReducedAxes(ctx, x.rank(), reduced);
  Collapsed shape;
  int64 count = 1;
  for (int i = 0; i < x.rank(); ++i) {
    if (reduced[i]) count *= x.dim(i);
    shape.Add(x.dim(i), reduced[i]);
  }
  if (count == 0) {  // Sum 0, Prod 1, Mean NaN (Max/Min are rejected by the shape fn)
    std::fill(out, out + nout, Op::Finish(Op::Identity(), 0));
    return Status::OK();
  }
  if (count == 1) {  // nothing to combine: every op is the identity map here
    std::memcpy(out, in, static_cast<size_t>(nout) * sizeof(T));
    return Status::OK();
  }

  int64 outer, R, inner;
  if (shape.ReducedGroups() == 1) {
    shape.PopInnermost(&outer, &R, &inner);
    return Reduce3D<Op, T, T, true>(in, outer, R, inner, out, count);
  }
  // Several reduced groups: fold them innermost first through Acc buffers.
  shape.PopInnermost(&outer, &R, &inner);
  auto buf = NewBuffer<Acc>(outer * inner);
  if (!buf) return OutOfMemory(outer * inner);
  OF_RETURN_IF_ERROR((Reduce3D<Op, T, Acc, false>(in, outer, R, inner, buf.get(), count)));
  while (shape.ReducedGroups() > 1) {
    shape.PopInnermost(&outer, &R, &inner);
    auto next = NewBuffer<Acc>(outer * inner);
    if (!next) return OutOfMemory(outer * inner);
    OF_RETURN_IF_ERROR((Reduce3D<Op, Acc, Acc, false>(buf.get(), outer, R, inner, next.get(), count)));
    buf = std::move(next);
  }
  shape.PopInnermost(&outer, &R, &inner);
  return Reduce3D<Op, Acc, T, true>(buf.get(), outer, R, inner, out, count);
}

// ---- ArgMax / ArgMin

// Index of the first element of x[0, n) equal to m (or the first NaN if m is
// NaN); m is known to occur. Scans blocks with a branch-free test first.
template <typename T>
int64 FirstIndexOf(const T* OF_RESTRICT x, int64 n, T m) {
  const bool nan = m != m;
  constexpr int64 kBlock = 64;
  int64 b = 0;
  for (; b + kBlock <= n; b += kBlock) {
    int hit = 0;
    if (nan) {
      for (int64 l = 0; l < kBlock; ++l) hit |= x[b + l] != x[b + l];
    } else {
      for (int64 l = 0; l < kBlock; ++l) hit |= x[b + l] == m;
    }
    if (hit) break;
  }
  for (int64 i = b; i < n; ++i) {
    if (nan ? x[i] != x[i] : x[i] == m) return i;
  }
  return n - 1;  // unreachable for valid m
}

template <typename T, bool kMax>
inline bool Better(T v, T best) {
  const bool beats = kMax ? v > best : v < best;
  if constexpr (std::is_floating_point_v<T>) return beats | ((v != v) & (best == best));
  else return beats;
}

template <typename T, bool kMax>
Status ArgReduceKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const int64 nout = y->NumElements();
  if (nout == 0) return Status::OK();
  int64* out = y->data<int64>();
  const T* in = x.data<T>();

  const AttrValue& axis = ctx->attr("axis");
  int64 outer = 1, R = x.NumElements(), inner = 1;
  if (!axis.is_none() && x.rank() > 0) {
    const int a = static_cast<int>(axis.i < 0 ? axis.i + x.rank() : axis.i);
    for (int i = 0; i < a; ++i) outer *= x.dim(i);
    for (int i = a + 1; i < x.rank(); ++i) inner *= x.dim(i);
    R = x.dim(a);
  }
  if (inner == 1) {
    // The extreme of each row (parallel, chunked), then its first position.
    auto best = NewBuffer<T>(outer);
    if (!best) return OutOfMemory(outer);
    using Op = std::conditional_t<kMax, MaxOp<T>, MinOp<T>>;
    OF_RETURN_IF_ERROR((Reduce3D<Op, T, T, true>(in, outer, R, 1, best.get(), R)));
    const T* m = best.get();
    ParallelFor(outer, R, [&](int64 b, int64 e) {
      for (int64 o = b; o < e; ++o) out[o] = FirstIndexOf(in + o * R, R, m[o]);
    });
    return Status::OK();
  }
  const int64 cw = std::min(inner, kCols);
  const int64 ncb = (inner + cw - 1) / cw;
  ParallelFor(outer * ncb, R * cw, [&](int64 b, int64 e) {
    T best[kCols];
    int64 idx[kCols];
    for (int64 u = b; u < e; ++u) {
      const int64 o = u / ncb, col0 = (u % ncb) * cw, w = std::min(cw, inner - col0);
      const T* src = in + o * R * inner + col0;
      for (int64 k = 0; k < w; ++k) {
        best[k] = src[k];
        idx[k] = 0;
      }
      for (int64 r = 1; r < R; ++r) {
        src += inner;
        for (int64 k = 0; k < w; ++k) {
          const bool take = Better<T, kMax>(src[k], best[k]);
          best[k] = take ? src[k] : best[k];
          idx[k] = take ? r : idx[k];
        }
      }
      std::memcpy(out + o * inner + col0, idx, static_cast<size_t>(w) * sizeof(int64));
    }
  });
  return Status::OK();
}

#define OF_REGISTER_REDUCTION(name, OpT, T) \
  REGISTER_KERNEL(name, kCPU, DTypeOf<T>::value, ReduceKernel<OpT, T>)
#define OF_REGISTER_ALL_REDUCTIONS(T)        \
  OF_REGISTER_REDUCTION("Sum", SumOp, T);    \
  OF_REGISTER_REDUCTION("Prod", ProdOp, T);  \
  OF_REGISTER_REDUCTION("Max", MaxOp, T);    \
  OF_REGISTER_REDUCTION("Min", MinOp, T);    \
  REGISTER_KERNEL("ArgMax", kCPU, DTypeOf<T>::value, ArgReduceKernel<T, true>); \
  REGISTER_KERNEL("ArgMin", kCPU, DTypeOf<T>::value, ArgReduceKernel<T, false>)

OF_REGISTER_ALL_REDUCTIONS(float);
OF_REGISTER_ALL_REDUCTIONS(double);
OF_REGISTER_ALL_REDUCTIONS(int32_t);
OF_REGISTER_ALL_REDUCTIONS(int64_t);
OF_REGISTER_REDUCTION("Mean", MeanOp, float);
OF_REGISTER_REDUCTION("Mean", MeanOp, double);

}  // namespace
}  // namespace opforge
