// Kernels of cpp/ops/attention_ops.cc. The forward pass streams key/value
// blocks of kBlock rows past each query row with an online softmax: a running
// maximum m and sum l rescale the accumulated output when a larger score
// arrives, so only kBlock scores exist at a time. The backward pass, per
// (batch, key/value head) so the heads sharing a key/value head never race on
// dkey/dvalue, recomputes m and l for each row, then accumulates
// dS = P * (dP - rowsum(dy * y)) into dquery, dkey and dvalue.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"
#include "../gemm/gemm.h"
#include "attention_small.h"
#include "../half_via_float.h"
#include "../vector_math.h"

namespace opforge {
namespace {

using int64 = int64_t;
constexpr int64 kBlock = 64;

// Strides of one of query/key/value/y (and their gradients) over (batch, head,
// position); the last dim is contiguous. [B, H, S, D] or, with bshd, [B, S, H, D].
struct Layout {
  int64 b, h, s;
  Layout() = default;
  Layout(int64 heads, int64 seq, int64 dim, bool bshd)
      : b(heads * seq * dim), h(bshd ? dim : seq * dim), s(bshd ? heads * dim : dim) {}
  int64 at(int64 bb, int64 hh, int64 i) const { return bb * b + hh * h + i * s; }
};

struct Dims {
  int64 b, hq, hkv, sq, sk, d, dv;
  int64 ms[4];  // the mask's strides over [B, Hq, Sq, Sk]; 0 where it broadcasts
  Layout lq, lk, lv, ly;  // ly: y, dy (and dquery's rows follow lq)
  double scale;
  bool causal, bshd;

  Dims(const OpKernelContext* ctx) {
    const Tensor &q = ctx->input(0), &k = ctx->input(1), &v = ctx->input(2), &m = ctx->input(3);
    bshd = ctx->attr_bool("bshd");
    const int hd = bshd ? 2 : 1, sd = bshd ? 1 : 2;
    b = q.dim(0), hq = q.dim(hd), sq = q.dim(sd), d = q.dim(3);
    hkv = k.dim(hd), sk = k.dim(sd), dv = v.dim(3);
    lq = Layout(hq, sq, d, bshd), lk = Layout(hkv, sk, d, bshd), lv = Layout(hkv, sk, dv, bshd);
    ly = Layout(hq, sq, dv, bshd);
    scale = ctx->attr_float("scale") > 0 ? ctx->attr_float("scale") : 1.0 / std::sqrt(static_cast<double>(d));
    causal = ctx->attr_bool("causal");
    int64 stride = 1;
    for (int i = 3; i >= 0; --i) {
      const int mi = i - (4 - m.rank());
      const int64 dim = mi >= 0 ? m.dim(mi) : 1;
      ms[i] = dim == 1 ? 0 : stride;
      stride *= dim;
    }
  }
  // Keys [0, limit) are visible to query row i.
  int64 Limit(int64 i) const { return causal ? std::clamp<int64>(i + sk - sq + 1, 0, sk) : sk; }
};

template <typename T>
inline double Dot(const T* a, const T* b, int64 n) {
  double s = 0;
  for (int64 t = 0; t < n; ++t) s += static_cast<double>(a[t]) * static_cast<double>(b[t]);
  return s;
}

// One query row's scores against keys [j0, j0 + n) (key j at k + j * lk.s).
template <typename T>
void Scores(const Dims& g, const T* qi, const T* k, const T* mrow, int64 j0, int64 n, double* s) {
  for (int64 j = 0; j < n; ++j) {
    s[j] = g.scale * Dot(qi, k + (j0 + j) * g.lk.s, g.d) + static_cast<double>(mrow[(j0 + j) * g.ms[3]]);
  }
}

// Running max and sum of exp over the visible keys of one row (m = -inf: none).
template <typename T>
void RowStats(const Dims& g, const T* qi, const T* k, const T* mrow, int64 limit, double* m_out, double* l_out) {
  double m = -std::numeric_limits<double>::infinity(), l = 0, s[kBlock];
  for (int64 j0 = 0; j0 < limit; j0 += kBlock) {
    const int64 n = std::min(kBlock, limit - j0);
    Scores(g, qi, k, mrow, j0, n, s);
    double bm = *std::max_element(s, s + n);
    if (bm == -std::numeric_limits<double>::infinity()) continue;
    const double nm = std::max(m, bm);
    l *= std::exp(m - nm);
    for (int64 j = 0; j < n; ++j) l += std::exp(s[j] - nm);
    m = nm;
  }
  *m_out = m, *l_out = l;
}

template <typename T>
Status AttentionKernel(OpKernelContext* ctx) {
  const Dims g(ctx);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const T *q = ctx->input(0).data<T>(), *k = ctx->input(1).data<T>(), *v = ctx->input(2).data<T>();
  const T* mask = ctx->input(3).data<T>();
  T* y = out->data<T>();
  const int64 group = g.hq / g.hkv, rows = g.b * g.hq * g.sq;
  ParallelFor(rows, g.sk * (g.d + g.dv) * 2 + 1, [&](int64 lo, int64 hi) {
    std::vector<double> acc(g.dv);
    double s[kBlock];
    for (int64 r = lo; r < hi; ++r) {
      const int64 i = r % g.sq, h = (r / g.sq) % g.hq, bb = r / (g.sq * g.hq);
      const T* qi = q + g.lq.at(bb, h, i);
      const T* kb = k + g.lk.at(bb, h / group, 0);
      const T* vb = v + g.lv.at(bb, h / group, 0);
      const T* mrow = mask + bb * g.ms[0] + h * g.ms[1] + i * g.ms[2];
      const int64 limit = g.Limit(i);
      double m = -std::numeric_limits<double>::infinity(), l = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64 j0 = 0; j0 < limit; j0 += kBlock) {
        const int64 n = std::min(kBlock, limit - j0);
        Scores(g, qi, kb, mrow, j0, n, s);
        const double bm = *std::max_element(s, s + n);
        if (bm == -std::numeric_limits<double>::infinity()) continue;
        const double nm = std::max(m, bm), corr = std::exp(m - nm);
        l *= corr;
        for (int64 c = 0; c < g.dv; ++c) acc[c] *= corr;
        for (int64 j = 0; j < n; ++j) {
          const double p = std::exp(s[j] - nm);
          l += p;
          const T* vj = vb + (j0 + j) * g.lv.s;
          for (int64 c = 0; c < g.dv; ++c) acc[c] += p * static_cast<double>(vj[c]);
        }
        m = nm;
      }
      T* yi = y + g.ly.at(bb, h, i);
      for (int64 c = 0; c < g.dv; ++c) yi[c] = l > 0 ? static_cast<T>(acc[c] / l) : T(0);
    }
  });
  return Status::OK();
}

// float32 forward: blocks of up to kRows query rows and kCols keys per
// (batch, head); the block's scores and its probabilities times the values
// are two GEMMs (opforge's sgemm, strided views, no copies), the online
// softmax runs over the rows of the score block in float32 vector loops.
// (The double-precision per-key loops above cost more than the rest of a
// small transformer layer.)
constexpr int64 kRows = 64, kCols = 128;

Status AttentionKernelF32(OpKernelContext* ctx) {
  const Dims g(ctx);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const float *q = ctx->input(0).data<float>(), *k = ctx->input(1).data<float>();
  const float *v = ctx->input(2).data<float>(), *mask = ctx->input(3).data<float>();
  float* y = out->data<float>();
  const int64 group = g.hq / g.hkv, qblocks = (g.sq + kRows - 1) / kRows;
  if (attention::UseSmall(g.sq, g.sk, g.d, g.dv)) {  // short sequences: direct loops per head
    ParallelFor(g.b * g.hq, g.sq * g.sk * (g.d + g.dv) * 2 + 1, [&](int64 lo, int64 hi) {
      std::vector<float> scratch(attention::SmallScratch(g.sq, g.sk, g.d));
      for (int64 t = lo; t < hi; ++t) {
        const int64 h = t % g.hq, bb = t / g.hq, kv = h / group;
        const attention::SmallHead head{q + g.lq.at(bb, h, 0), k + g.lk.at(bb, kv, 0), v + g.lv.at(bb, kv, 0),
                                        mask + bb * g.ms[0] + h * g.ms[1], g.ms[2], g.ms[3],
                                        g.sq, g.sk, g.d, g.dv, static_cast<float>(g.scale), g.causal,
                                        y + g.ly.at(bb, h, 0), g.lq.s, g.lk.s, g.lv.s, g.ly.s};
        attention::RunSmallHead(head, scratch.data());
      }
    });
    return Status::OK();
  }
  const float ninf = -std::numeric_limits<float>::infinity();
  ParallelFor(g.b * g.hq * qblocks, std::min(g.sq, kRows) * g.sk * (g.d + g.dv) * 2 + 1, [&](int64 lo, int64 hi) {
    std::vector<float> sc(kRows * kCols), acc(kRows * g.dv), m(kRows), l(kRows);
    for (int64 t = lo; t < hi; ++t) {
      const int64 qb = t % qblocks, bh = t / qblocks, h = bh % g.hq, bb = bh / g.hq;
      const int64 i0 = qb * kRows, rows = std::min(kRows, g.sq - i0);
      const float* qblk = q + g.lq.at(bb, h, i0);
      const float* kb = k + g.lk.at(bb, h / group, 0);
      const float* vb = v + g.lv.at(bb, h / group, 0);
      std::fill(acc.begin(), acc.begin() + rows * g.dv, 0.0f);
      std::fill(m.begin(), m.end(), ninf);
      std::fill(l.begin(), l.end(), 0.0f);
      const int64 visible = g.Limit(i0 + rows - 1);  // the last row sees the most keys
      for (int64 j0 = 0; j0 < visible; j0 += kCols) {
        const int64 n = std::min(kCols, visible - j0);
        // sc[i, j] = scale * q[i] . k[j0 + j]
        gemm::SgemmStrided({rows, n, g.d, static_cast<float>(g.scale), qblk, g.lq.s, 1, kb + j0 * g.lk.s, 1,
                            g.lk.s, 0.0f, sc.data(), n},
                           gemm::Epilogue(), false);
        for (int64 r = 0; r < rows; ++r) {
          const int64 i = i0 + r;
          float* s = sc.data() + r * n;
          const int64 nv = std::clamp<int64>(g.Limit(i) - j0, 0, n);
          const float* mrow = mask + bb * g.ms[0] + h * g.ms[1] + i * g.ms[2] + j0 * g.ms[3];
          if (g.ms[3] == 1) {
            for (int64 j = 0; j < nv; ++j) s[j] += mrow[j];
          } else {
            for (int64 j = 0; j < nv; ++j) s[j] += mrow[j * g.ms[3]];
          }
          float bm = ninf;
          for (int64 j = 0; j < nv; ++j) bm = s[j] > bm ? s[j] : bm;
          if (bm == ninf) {  // nothing visible in this block: adds nothing
            std::fill(s, s + n, 0.0f);
            continue;
          }
          const float nm = std::max(m[r], bm), corr = std::exp(m[r] - nm);
          if (corr != 1.0f) {
            l[r] *= corr;
            float* a = acc.data() + r * g.dv;
            for (int64 c = 0; c < g.dv; ++c) a[c] *= corr;
          }
          for (int64 j = 0; j < nv; ++j) s[j] -= nm;
          vmath::Unary(vmath::UnaryFn::kExp, s, s, nv, false);
          std::fill(s + nv, s + n, 0.0f);
          float li = 0;
          for (int64 j = 0; j < nv; ++j) li += s[j];
          l[r] += li;
          m[r] = nm;
        }
        // acc += p @ v[j0:j0+n]
        gemm::SgemmStrided({rows, g.dv, n, 1.0f, sc.data(), n, 1, vb + j0 * g.lv.s, g.lv.s, 1, 1.0f, acc.data(),
                            g.dv},
                           gemm::Epilogue(), false);
      }
      for (int64 r = 0; r < rows; ++r) {
        float* yi = y + g.ly.at(bb, h, i0 + r);
        const float* a = acc.data() + r * g.dv;
        const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
        for (int64 c = 0; c < g.dv; ++c) yi[c] = a[c] * inv;
      }
    }
  });
  return Status::OK();
}

template <typename T>
Status AttentionGradKernel(OpKernelContext* ctx) {
  const Dims g(ctx);
  Tensor *dq_t = nullptr, *dk_t = nullptr, *dv_t = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &dq_t));
  OF_RETURN_IF_ERROR(ctx->allocate_output(1, &dk_t));
  OF_RETURN_IF_ERROR(ctx->allocate_output(2, &dv_t));
  const T *q = ctx->input(0).data<T>(), *k = ctx->input(1).data<T>(), *v = ctx->input(2).data<T>();
  const T *mask = ctx->input(3).data<T>(), *y = ctx->input(4).data<T>(), *dy = ctx->input(5).data<T>();
  T *dq = dq_t->data<T>(), *dk = dk_t->data<T>(), *dv = dv_t->data<T>();
  const int64 group = g.hq / g.hkv;
  ParallelFor(g.b * g.hkv, group * g.sq * g.sk * (g.d + g.dv) * 4 + 1, [&](int64 lo, int64 hi) {
    std::vector<double> dqi(g.d), dkb, dvb;
    double s[kBlock];
    for (int64 t = lo; t < hi; ++t) {
      const int64 bb = t / g.hkv, kvh = t % g.hkv;  // t: flat (batch, key/value head)
      const T* kb = k + g.lk.at(bb, kvh, 0);
      const T* vb = v + g.lv.at(bb, kvh, 0);
      dkb.assign(g.sk * g.d, 0.0);
      dvb.assign(g.sk * g.dv, 0.0);
      for (int64 h = kvh * group; h < (kvh + 1) * group; ++h) {
        for (int64 i = 0; i < g.sq; ++i) {
          const T *qi = q + g.lq.at(bb, h, i), *yi = y + g.ly.at(bb, h, i), *gi = dy + g.ly.at(bb, h, i);
          const T* mrow = mask + bb * g.ms[0] + h * g.ms[1] + i * g.ms[2];
          const int64 limit = g.Limit(i);
          double m, l;
          RowStats(g, qi, kb, mrow, limit, &m, &l);
          std::fill(dqi.begin(), dqi.end(), 0.0);
          if (l > 0) {
            const double di = Dot(gi, yi, g.dv);
            for (int64 j0 = 0; j0 < limit; j0 += kBlock) {
              const int64 n = std::min(kBlock, limit - j0);
              Scores(g, qi, kb, mrow, j0, n, s);
              for (int64 j = 0; j < n; ++j) {
                const double p = std::exp(s[j] - m) / l;
                if (p == 0) continue;
                const int64 jj = j0 + j;
                const double ds = p * (Dot(gi, vb + jj * g.lv.s, g.dv) - di) * g.scale;
                const T* kj = kb + jj * g.lk.s;
                double* dkj = dkb.data() + jj * g.d;
                double* dvj = dvb.data() + jj * g.dv;
                for (int64 c = 0; c < g.d; ++c) {
                  dqi[c] += ds * static_cast<double>(kj[c]);
                  dkj[c] += ds * static_cast<double>(qi[c]);
                }
                for (int64 c = 0; c < g.dv; ++c) dvj[c] += p * static_cast<double>(gi[c]);
              }
            }
          }
          T* dqr = dq + g.lq.at(bb, h, i);
          for (int64 c = 0; c < g.d; ++c) dqr[c] = static_cast<T>(dqi[c]);
        }
      }
      for (int64 j = 0; j < g.sk; ++j) {
        T* dkj = dk + g.lk.at(bb, kvh, j);
        T* dvj = dv + g.lv.at(bb, kvh, j);
        for (int64 c = 0; c < g.d; ++c) dkj[c] = static_cast<T>(dkb[j * g.d + c]);
        for (int64 c = 0; c < g.dv; ++c) dvj[c] = static_cast<T>(dvb[j * g.dv + c]);
      }
    }
  });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("ScaledDotProductAttention", kCPU, DType::kFloat32, AttentionKernelF32);
REGISTER_KERNEL("ScaledDotProductAttention", kCPU, DType::kFloat64, AttentionKernel<double>);
// float16/bfloat16: widened to float32, the float32 kernel, the output rounded once.
REGISTER_KERNEL("ScaledDotProductAttention", kCPU, DType::kFloat16, HalfViaFloat32);
REGISTER_KERNEL("ScaledDotProductAttention", kCPU, DType::kBFloat16, HalfViaFloat32);
REGISTER_KERNEL("ScaledDotProductAttentionGrad", kCPU, DType::kFloat32, AttentionGradKernel<float>);
REGISTER_KERNEL("ScaledDotProductAttentionGrad", kCPU, DType::kFloat64, AttentionGradKernel<double>);

}  // namespace opforge
