// Kernels of random_ops.cc. Every value is a pure function of (seed, seed2,
// element index) through Philox4x32-10, so results are the same for any
// intra-op thread count; ParallelFor only splits the index range.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

#include "philox.h"

namespace opforge {
namespace {

using int64 = int64_t;
using random::Block;
using random::Stream;

// splitmix64 of the seed: nearby seeds give unrelated keys.
inline uint64_t MixSeed(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// How many times a graph node drew in one Session (its state: random ops are
// stateful, so each Session.run draws fresh numbers, the same sequence in
// every new Session of the graph).
struct DrawCounter : ResourceBase {
  uint64_t draws = 0;
  std::string DebugString() const override { return "random draw counter"; }
};

// The stream of this call: seed2 in eager mode (opforge.random advances it
// per call); in a graph, seed2 moved on by the node's draws so far.
Stream StreamOf(const OpKernelContext* ctx) {
  const uint64_t key = MixSeed(static_cast<uint64_t>(ctx->attr_int("seed")));
  uint64_t stream = static_cast<uint64_t>(ctx->attr_int("seed2"));
  const std::string& node = ctx->node_name();
  if (!node.empty()) {
    std::shared_ptr<DrawCounter> c;
    Status s = ctx->resource_manager()->LookupOrCreate<DrawCounter>(
        "random:" + node, &c, [](std::shared_ptr<DrawCounter>* out) {
          *out = std::make_shared<DrawCounter>();
          return Status::OK();
        });
    if (s.ok()) {
      std::lock_guard<std::mutex> lock(c->mu());
      stream += 0x9E3779B97F4A7C15ull * c->draws++;  // run 0 draws what eager mode would
    }
  }
  return Stream{key, stream};
}

// Values per Philox block: 4 floats (32 bits each) or 2 doubles (64 bits each).
template <typename T> constexpr int64 kPerBlock = sizeof(T) == 4 ? 4 : 2;

template <typename T>
void UniformBlock(const Block& b, T out[kPerBlock<T>]) {
  if constexpr (sizeof(T) == 4) {
    for (int j = 0; j < 4; ++j) out[j] = random::Uniform24(b.v[j]);
  } else {
    out[0] = random::Uniform53(b.v[0], b.v[1]);
    out[1] = random::Uniform53(b.v[2], b.v[3]);
  }
}

template <typename T>
void NormalBlock(const Block& b, T out[kPerBlock<T>]) {
  double z0, z1;
  if constexpr (sizeof(T) == 4) {
    double z2, z3;
    random::BoxMuller(random::Uniform24(b.v[0]), random::Uniform24(b.v[1]), &z0, &z1);
    random::BoxMuller(random::Uniform24(b.v[2]), random::Uniform24(b.v[3]), &z2, &z3);
    out[0] = static_cast<T>(z0), out[1] = static_cast<T>(z1), out[2] = static_cast<T>(z2), out[3] = static_cast<T>(z3);
  } else {
    random::BoxMuller(random::Uniform53(b.v[0], b.v[1]), random::Uniform53(b.v[2], b.v[3]), &z0, &z1);
    out[0] = z0, out[1] = z1;
  }
}

// Fills out[0, n) block by block; a block straddling a split is recomputed
// by both sides, and each side keeps its own elements.
template <typename T, typename F>
Status FillBlocks(OpKernelContext* ctx, int cost, F block_fn) {
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const Stream s = StreamOf(ctx);
  T* y = out->data<T>();
  constexpr int64 per = kPerBlock<T>;
  ParallelFor(out->NumElements(), cost, [&](int64 lo, int64 hi) {
    T vals[per];
    for (int64 i = lo; i < hi;) {
      const int64 block = i / per;
      block_fn(s.At(static_cast<uint64_t>(block)), vals);
      for (int64 j = i - block * per; j < per && i < hi; ++j, ++i) y[i] = vals[j];
    }
  });
  return Status::OK();
}

template <typename T>
Status RandomUniformKernel(OpKernelContext* ctx) {
  return FillBlocks<T>(ctx, 8, UniformBlock<T>);
}

template <typename T>
Status RandomStandardNormalKernel(OpKernelContext* ctx) {
  return FillBlocks<T>(ctx, 40, NormalBlock<T>);
}

// Standard normal restricted to [-2, 2] by rejection: element i draws its own
// sub-stream (attempt k in the counter's top word), two candidates a block.
template <typename T>
Status TruncatedNormalKernel(OpKernelContext* ctx) {
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const Stream s = StreamOf(ctx);
  T* y = out->data<T>();
  ParallelFor(out->NumElements(), 60, [&](int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) {
      double value = 0.0;
      for (uint32_t k = 1;; ++k) {  // P(a block has no accepted value) ~ 0.002; k never wraps in practice
        const Block b = s.At(static_cast<uint64_t>(i), k * 0x9E3779B9u);
        double z0, z1;
        random::BoxMuller(random::Uniform53(b.v[0], b.v[1]), random::Uniform53(b.v[2], b.v[3]), &z0, &z1);
        if (z0 >= -2.0 && z0 <= 2.0) { value = z0; break; }
        if (z1 >= -2.0 && z1 <= 2.0) { value = z1; break; }
      }
      y[i] = static_cast<T>(value);
    }
  });
  return Status::OK();
}

// minval + (64 random bits mod range): the bias is below range / 2^64.
template <typename T>
Status RandomUniformIntKernel(OpKernelContext* ctx) {
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const Stream s = StreamOf(ctx);
  const int64 minval = ctx->attr_int("minval");
  const uint64_t range = static_cast<uint64_t>(ctx->attr_int("maxval")) - static_cast<uint64_t>(minval);
  T* y = out->data<T>();
  ParallelFor(out->NumElements(), 10, [&](int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) {
      const Block b = s.At(static_cast<uint64_t>(i / 2));
      const int j = static_cast<int>(i % 2) * 2;
      const uint64_t x = (static_cast<uint64_t>(b.v[j + 1]) << 32) | b.v[j];
      y[i] = static_cast<T>(static_cast<uint64_t>(minval) + x % range);
    }
  });
  return Status::OK();
}

// Fisher-Yates over the row indices (sequential, so thread-independent; draw
// k is block k of the stream), then the rows are copied in parallel.
Status RandomShuffleKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (x.NumElements() == 0) return Status::OK();
  const int64 n = x.shape().rank() == 0 ? 1 : x.shape().dim(0);
  const size_t row = x.TotalBytes() / static_cast<size_t>(n);
  std::vector<int64> perm(static_cast<size_t>(n));
  for (int64 i = 0; i < n; ++i) perm[i] = i;
  const Stream s = StreamOf(ctx);
  for (int64 k = n - 1; k > 0; --k) {
    const Block b = s.At(static_cast<uint64_t>(k));
    const uint64_t r = (static_cast<uint64_t>(b.v[1]) << 32) | b.v[0];
    std::swap(perm[k], perm[r % static_cast<uint64_t>(k + 1)]);
  }
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out->raw_data());
  ParallelFor(n, static_cast<int64>(row / 8 + 1), [&](int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) std::memcpy(dst + i * row, src + perm[i] * row, row);
  });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("RandomUniform", kCPU, DType::kFloat32, RandomUniformKernel<float>);
REGISTER_KERNEL("RandomUniform", kCPU, DType::kFloat64, RandomUniformKernel<double>);
REGISTER_KERNEL("RandomStandardNormal", kCPU, DType::kFloat32, RandomStandardNormalKernel<float>);
REGISTER_KERNEL("RandomStandardNormal", kCPU, DType::kFloat64, RandomStandardNormalKernel<double>);
REGISTER_KERNEL("TruncatedNormal", kCPU, DType::kFloat32, TruncatedNormalKernel<float>);
REGISTER_KERNEL("TruncatedNormal", kCPU, DType::kFloat64, TruncatedNormalKernel<double>);
REGISTER_KERNEL("RandomUniformInt", kCPU, DType::kInt32, RandomUniformIntKernel<int32_t>);
REGISTER_KERNEL("RandomUniformInt", kCPU, DType::kInt64, RandomUniformIntKernel<int64_t>);
REGISTER_KERNEL("RandomShuffle", kCPU, DType::kFloat32, RandomShuffleKernel);
REGISTER_KERNEL("RandomShuffle", kCPU, DType::kFloat64, RandomShuffleKernel);
REGISTER_KERNEL("RandomShuffle", kCPU, DType::kInt32, RandomShuffleKernel);
REGISTER_KERNEL("RandomShuffle", kCPU, DType::kInt64, RandomShuffleKernel);
REGISTER_KERNEL("RandomShuffle", kCPU, DType::kBool, RandomShuffleKernel);

}  // namespace opforge
