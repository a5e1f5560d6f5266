// The 8-bit GEMM driver: the BLIS loop nest of cpp/kernels/gemm/sgemm.cc
// around the microkernels of qmicro_*.cc, with the operands converted to
// u8 x s8 while they are packed, and the zero points applied from row and
// column sums to each output tile after its last depth block (qgemm.h).
//
//   for jc (kNC columns)  for pc (kKC depths): pack B[kc x nc]
//     for ic (MC rows): pack A[mc x kc]   for jr, ir: microkernel
//
// Threads: C is cut into one slab per thread along its longer side (whole
// register tiles); each runs the nest on its slab with its own buffers.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../gemm/scratch.h"
#include "opforge/parallel.h"
#include "qgemm.h"
#include "qmicrokernel.h"
#include "quant_common.h"

namespace opforge {
namespace qgemm {
namespace {

constexpr int64_t kKC = 1024;      // depths per block: a 32-column B micro-panel is 32 KiB of bytes
constexpr int64_t kMCPanels = 16;  // A block: 16 * mr rows x kKC (192 KiB for mr = 12: in L2)
constexpr int64_t kNC = 3072;      // B block: kNC x kKC bytes (3 MiB: in L3)
// Below this many multiply-adds one thread is faster than waking another.
constexpr int64_t kMinParallelMacs = 128 * 128 * 128;
constexpr int kMaxNR = 64;  // the widest microkernel tile (qmicro_*.cc: 32)

const QKernels* Select() {
  int level = 0;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) level = 1;
  if (level == 1 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) {
    level = 2;
  }
#endif
  // The same cap as the float kernels (vector_math.h, gemm/sgemm.cc).
  if (const char* cap = std::getenv("OPFORGE_SIMD")) {
    if (std::strcmp(cap, "baseline") == 0) level = 0;
    else if (std::strcmp(cap, "avx2") == 0) level = std::min(level, 1);
  }
  if (level == 2 && VnniKernels() != nullptr) return VnniKernels();
  if (level >= 1 && Avx2Kernels() != nullptr) return Avx2Kernels();
  return GenericKernels();
}

const QKernels& Get() {
  static const QKernels* k = Select();
  return *k;
}

// Per-thread packing buffers (gemm/scratch.h): slot 0 for B, 1 for A, 2 and 3
// for sums, after the f32 GEMM's slots.
void* Scratch(int slot, int64_t bytes) { return gemm::ScratchBytes(gemm::kScratchQuant + slot, bytes); }

// The value an operand byte packs as: A as u8 (flip 0x80 when signed), B as
// s8 (flip 0x80 when unsigned).
inline uint8_t AByte(const Args& g, int64_t i, int64_t p, uint8_t flip) {
  return static_cast<const uint8_t*>(g.a)[i * g.rs_a + p * g.cs_a] ^ flip;
}
inline int8_t BByte(const Args& g, int64_t p, int64_t j, uint8_t flip) {
  return static_cast<int8_t>(static_cast<const uint8_t*>(g.b)[p * g.rs_b + j * g.cs_b] ^ flip);
}

// One A panel: rows i0..i0+m, depths p0..p0+kc, groups of kg, zero past kc.
template <typename T>
void PackA(const Args& g, int64_t i0, int m, int64_t p0, int64_t kc, int mr, int kg, uint8_t flip, T* dst) {
  const int64_t groups = (kc + kg - 1) / kg;
  if (sizeof(T) == 1 && kg == 4 && g.cs_a == 1) {  // rows of bytes: 4-byte words, flipped as words
    const uint32_t f = flip * 0x01010101u;
    for (int i = 0; i < m; ++i) {
      const uint8_t* row = static_cast<const uint8_t*>(g.a) + (i0 + i) * g.rs_a + p0;
      int64_t q = 0;
      for (; q < kc / 4; ++q) {
        uint32_t w;
        std::memcpy(&w, row + 4 * q, 4);
        w ^= f;
        std::memcpy(dst + (q * mr + i) * 4, &w, 4);
      }
      for (; q < groups; ++q) {
        for (int t = 0; t < 4; ++t) {
          const int64_t p = q * 4 + t;
          dst[(q * mr + i) * 4 + t] = p < kc ? static_cast<T>(row[p] ^ flip) : T(0);
        }
      }
    }
    return;
  }
  for (int i = 0; i < m; ++i) {
    const uint8_t* row = static_cast<const uint8_t*>(g.a) + (i0 + i) * g.rs_a + p0 * g.cs_a;
    for (int64_t q = 0; q < groups; ++q) {
      T* d = dst + (q * mr + i) * kg;
      for (int t = 0; t < kg; ++t) {
        const int64_t p = q * kg + t;
        d[t] = p < kc ? static_cast<T>(row[p * g.cs_a] ^ flip) : T(0);
      }
    }
  }
}

// Full groups of 4 depths x 16 columns of a row-major byte B: four rows
// interleaved into 16 columns of 4 bytes with two rounds of unpacks (SSE2,
// the x86-64 baseline). Returns the groups done.
int64_t PackB4Rows(const uint8_t* src, int64_t rs, int64_t groups, int nr, uint8_t flip, uint8_t* dst) {
#if defined(__SSE2__)
  const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
  for (int64_t q = 0; q < groups; ++q) {
    const uint8_t* s = src + q * 4 * rs;
    uint8_t* d = dst + q * nr * 4;
    for (int j = 0; j < nr; j += 16) {
      const __m128i r0 = _mm_xor_si128(f, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + j)));
      const __m128i r1 = _mm_xor_si128(f, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + rs + j)));
      const __m128i r2 = _mm_xor_si128(f, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * rs + j)));
      const __m128i r3 = _mm_xor_si128(f, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 3 * rs + j)));
      const __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
      const __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
      __m128i* o = reinterpret_cast<__m128i*>(d + j * 4);
      _mm_storeu_si128(o, _mm_unpacklo_epi16(t0, t2));
      _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(t0, t2));
      _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(t1, t3));
      _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(t1, t3));
    }
  }
  return groups;
#else
  (void)src, (void)rs, (void)groups, (void)nr, (void)flip, (void)dst;
  return 0;
#endif
}

// One B panel: columns j0..j0+n (zero up to nr), depths p0..p0+kc.
template <typename T>
void PackB(const Args& g, int64_t j0, int n, int64_t p0, int64_t kc, int nr, int kg, uint8_t flip, T* dst) {
  const int64_t groups = (kc + kg - 1) / kg;
  int64_t q = 0;
  if (sizeof(T) == 1 && kg == 4 && g.cs_b == 1 && n == nr && nr % 16 == 0) {
    q = PackB4Rows(static_cast<const uint8_t*>(g.b) + p0 * g.rs_b + j0, g.rs_b, kc / 4, nr, flip,
                   reinterpret_cast<uint8_t*>(dst));
  }
  for (; q < groups; ++q) {
    T* d = dst + q * nr * kg;
    const int tk = static_cast<int>(std::min<int64_t>(kg, kc - q * kg));
    for (int j = 0; j < n; ++j) {
      const uint8_t* col = static_cast<const uint8_t*>(g.b) + (p0 + q * kg) * g.rs_b + (j0 + j) * g.cs_b;
      for (int t = 0; t < tk; ++t) d[j * kg + t] = static_cast<T>(static_cast<int8_t>(col[t * g.rs_b] ^ flip));
      for (int t = tk; t < kg; ++t) d[j * kg + t] = T(0);
    }
    std::memset(d + n * kg, 0, sizeof(T) * (nr - n) * kg);
  }
}

// What the zero points need: the effective (shifted) zero points and the
// sums of the packed operands over K (wrapping, as uint32).
struct Zero {
  const uint32_t* rowsum = nullptr;  // of A, rows i0.. (null when every zb' is 0)
  const uint32_t* colsum = nullptr;  // of B, columns j0..
  int64_t i0 = 0, j0 = 0;
  bool any = false;
};

inline uint32_t ZaEff(const Args& g, int64_t i) {
  const int32_t z = g.a_zero == nullptr ? 0 : g.a_zero[g.a_zero_per_row ? i : 0];
  return static_cast<uint32_t>(z) + (g.a_signed ? 128u : 0u);
}
inline uint32_t ZbEff(const Args& g, int64_t j) {
  if (g.b_packed != nullptr) return static_cast<uint32_t>(g.b_zero_eff[j]);
  const int32_t z = g.b_zero == nullptr ? 0 : g.b_zero[g.b_zero_per_col ? j : 0];
  return static_cast<uint32_t>(z) - (g.b_signed ? 0u : 128u);
}

// C[i, j] += K za' zb' - za' colsum[j] - zb' rowsum[i] over one tile,
// written as zb'[j] (K za' - rowsum[i]) - za' colsum[j]: per-column arrays
// first, so the row loop is plain vector arithmetic.
void Correct(const Args& g, const Zero& z, int64_t i0, int m, int64_t j0, int n) {
  const uint32_t k = static_cast<uint32_t>(g.k);
  uint32_t zb[kMaxNR], cs[kMaxNR], t[kMaxMR], za[kMaxMR];
  for (int j = 0; j < n; ++j) {
    zb[j] = ZbEff(g, j0 + j);
    cs[j] = z.colsum != nullptr ? z.colsum[j0 + j - z.j0] : 0u;
  }
  static const quant::CorrectFn fast = quant::Avx512Correct();
  if (fast != nullptr && m <= kMaxMR) {
    for (int i = 0; i < m; ++i) {
      za[i] = ZaEff(g, i0 + i);
      t[i] = k * za[i] - (z.rowsum != nullptr ? z.rowsum[i0 + i - z.i0] : 0u);
    }
    fast(reinterpret_cast<uint32_t*>(g.c + i0 * g.ldc + j0), g.ldc, m, n, zb, cs, t, za);
    return;
  }
  for (int i = 0; i < m; ++i) {
    const uint32_t za = ZaEff(g, i0 + i);
    const uint32_t t = k * za - (z.rowsum != nullptr ? z.rowsum[i0 + i - z.i0] : 0u);
    uint32_t* c = reinterpret_cast<uint32_t*>(g.c + (i0 + i) * g.ldc + j0);
    for (int j = 0; j < n; ++j) c[j] += zb[j] * t - za * cs[j];
  }
}

FloatEpilogue ShiftEpilogue(const FloatEpilogue& e, int64_t j0) {
  FloatEpilogue s = e;
  s.scale += j0;
  if (s.bias != nullptr) s.bias += j0;
  if (s.off != nullptr) s.off += j0;
  return s;
}

// FloatEpilogue over an m x n tile of C, in place.
void ApplyEpilogue(const FloatEpilogue& e, int32_t* c, int64_t ldc, int m, int n) {
  static const quant::RescaleFn fast = quant::Avx512Rescale();
  if (fast != nullptr) return fast(c, ldc, m, n, e.scale, e.bias, e.off, e.relu);
  for (int i = 0; i < m; ++i) {
    int32_t* ci = c + i * ldc;
    for (int j = 0; j < n; ++j) {
      const int32_t acc = static_cast<int32_t>(static_cast<uint32_t>(ci[j]) + (e.off != nullptr ? e.off[j] : 0u));
      const float v = static_cast<float>(acc) * e.scale[j] + (e.bias != nullptr ? e.bias[j] : 0.0f);
      const float y = e.relu && v < 0.0f ? 0.0f : v;
      std::memcpy(ci + j, &y, sizeof(y));  // y's bytes over the int32 product they replace
    }
  }
}

Zero Sums(const Args& g, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  Zero z;
  z.i0 = i0, z.j0 = j0;
  bool need_row = false, need_col = false;
  for (int64_t j = j0; j < j1 && !need_row; ++j) need_row = ZbEff(g, j) != 0;
  for (int64_t i = i0; i < i1 && !need_col; ++i) need_col = ZaEff(g, i) != 0;
  z.any = need_row || need_col;
  const uint8_t fa = g.a_signed ? 0x80 : 0, fb = g.b_signed ? 0 : 0x80;
  if (need_row) {
    uint32_t* r = static_cast<uint32_t*>(Scratch(2, (i1 - i0) * 4));
    for (int64_t i = i0; i < i1; ++i) {
      uint32_t s = 0;
      if (g.cs_a == 1) {  // contiguous rows: a loop that vectorizes
        const uint8_t* row = static_cast<const uint8_t*>(g.a) + i * g.rs_a;
        for (int64_t p = 0; p < g.k; ++p) s += static_cast<uint8_t>(row[p] ^ fa);
      } else {
        for (int64_t p = 0; p < g.k; ++p) s += AByte(g, i, p, fa);
      }
      r[i - i0] = s;
    }
    z.rowsum = r;
  }
  if (need_col && g.b_packed != nullptr) {
    z.colsum = g.b_colsum + j0;
  } else if (need_col) {
    uint32_t* c = static_cast<uint32_t*>(Scratch(3, (j1 - j0) * 4));
    std::fill(c, c + (j1 - j0), 0u);
    const int64_t n = j1 - j0;
    for (int64_t p = 0; p < g.k; ++p) {
      if (g.cs_b == 1) {  // contiguous rows: a loop that vectorizes
        const uint8_t* row = static_cast<const uint8_t*>(g.b) + p * g.rs_b + j0;
        for (int64_t j = 0; j < n; ++j) c[j] += static_cast<uint32_t>(static_cast<int8_t>(row[j] ^ fb));
      } else {
        for (int64_t j = 0; j < n; ++j) c[j] += static_cast<uint32_t>(static_cast<int32_t>(BByte(g, p, j0 + j, fb)));
      }
    }
    z.colsum = c;
  }
  return z;
}

template <typename T>
void Slab(const Args& g, const QKernels& kr, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  if (i1 <= i0 || j1 <= j0) return;
  const int mr = kr.mr, nr = kr.nr, kg = kr.kgroup;
  const uint8_t fa = g.a_signed ? 0x80 : 0, fb = g.b_signed ? 0 : 0x80;
  const Zero z = Sums(g, i0, i1, j0, j1);
  const int64_t MC = kMCPanels * mr;
  const int64_t kc_max = (std::min(g.k, kKC) + kg - 1) / kg * kg;
  const int64_t nc_max = (std::min(kNC, j1 - j0) + nr - 1) / nr * nr;
  // A prepacked B: depth blocks of kKC one after another, each holding the
  // panels of all N (PackPanels); slabs start at whole panels.
  const T* pre = static_cast<const T*>(g.b_packed);
  const int64_t panels_all = (g.n + nr - 1) / nr;
  T* bpack = pre != nullptr ? nullptr : static_cast<T*>(Scratch(0, sizeof(T) * nc_max * kc_max));
  // A read in place (no packing) when the microkernel can and A needs no
  // conversion: unsigned bytes, contiguous rows, whole groups of depths.
  const bool a_rows = kr.rows[0] != nullptr && sizeof(T) == 1 && fa == 0 && g.cs_a == 1 && g.k % kg == 0;
  T* apack = a_rows ? nullptr : static_cast<T*>(Scratch(1, sizeof(T) * MC * kc_max));
  for (int64_t jc = j0; jc < j1; jc += kNC) {
    const int64_t nc = std::min(kNC, j1 - jc);
    const int64_t npanels = (nc + nr - 1) / nr;
    for (int64_t pc = 0; pc < g.k; pc += kKC) {
      const int64_t kc = std::min(kKC, g.k - pc);
      const int64_t kq = (kc + kg - 1) / kg;
      const bool last = pc + kc >= g.k;
      const T* bblock = pre == nullptr ? bpack : pre + (pc / kKC) * panels_all * kKC * nr + (jc / nr) * kq * kg * nr;
      for (int64_t q = 0; pre == nullptr && q < npanels; ++q) {
        const int64_t j = jc + q * nr;
        PackB<T>(g, j, static_cast<int>(std::min<int64_t>(nr, jc + nc - j)), pc, kc, nr, kg, fb,
                 bpack + q * kq * kg * nr);
      }
      for (int64_t ic = i0; ic < i1; ic += MC) {
        const int64_t mc = std::min(MC, i1 - ic);
        for (int64_t ir = 0; !a_rows && ir < mc; ir += mr) {
          PackA<T>(g, ic + ir, static_cast<int>(std::min<int64_t>(mr, mc - ir)), pc, kc, mr, kg, fa,
                   apack + ir * kq * kg);
        }
        for (int64_t q = 0; q < npanels; ++q) {
          const int64_t jr = jc + q * nr;
          const int n = static_cast<int>(std::min<int64_t>(nr, jc + nc - jr));
          const T* bp = bblock + q * kq * kg * nr;
          for (int64_t ir = 0; ir < mc; ir += mr) {
            const int m = static_cast<int>(std::min<int64_t>(mr, mc - ir));
            int32_t* c = g.c + (ic + ir) * g.ldc + jr;
            // The epilogue rides in the microkernel when nothing comes between.
            const bool fused = last && g.epilogue != nullptr && !z.any && a_rows;
            FloatEpilogue ep;
            if (fused) ep = ShiftEpilogue(*g.epilogue, jr);
            if (a_rows) {
              kr.rows[m - 1](kq, static_cast<const uint8_t*>(g.a) + (ic + ir) * g.rs_a + pc, g.rs_a, bp, c, g.ldc, n,
                             pc > 0, fused ? &ep : nullptr);
            } else {
              kr.micro[m - 1](kq, apack + ir * kq * kg, bp, c, g.ldc, n, pc > 0);
            }
            if (last && z.any) Correct(g, z, ic + ir, m, jr, n);
            if (last && g.epilogue != nullptr && !fused) ApplyEpilogue(ShiftEpilogue(*g.epilogue, jr), c, g.ldc, m, n);
            if (last && g.finish != nullptr) g.finish(g.finish_ctx, c, g.ldc, ic + ir, m, jr, n);
          }
        }
      }
    }
  }
}

}  // namespace

void QGemm(const Args& g, bool parallel) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k <= 0) {  // an empty sum
    for (int64_t i = 0; i < g.m; ++i) std::fill(g.c + i * g.ldc, g.c + i * g.ldc + g.n, 0);
    return;
  }
  const QKernels& kr = Get();
  auto slab = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    if (kr.wide) {
      Slab<int16_t>(g, kr, i0, i1, j0, j1);
    } else {  // bytes: u8 A, s8 B (stored through uint8_t, the same bits)
      Slab<uint8_t>(g, kr, i0, i1, j0, j1);
    }
  };
  int64_t threads = parallel ? NumIntraOpThreads() : 1;
  if (g.m * g.n * g.k < kMinParallelMacs) threads = 1;
  const bool split_n = g.m <= 2 * kr.mr || g.n >= g.m;
  const int64_t unit = split_n ? kr.nr : kr.mr;
  const int64_t units = ((split_n ? g.n : g.m) + unit - 1) / unit;
  threads = std::min(threads, units);
  if (threads <= 1) {
    slab(0, g.m, 0, g.n);
    return;
  }
  auto run = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t u0 = units * t / threads, u1 = units * (t + 1) / threads;
      if (split_n) {
        slab(0, g.m, u0 * unit, std::min(g.n, u1 * unit));
      } else {
        slab(u0 * unit, std::min(g.m, u1 * unit), 0, g.n);
      }
    }
  };
  ParallelFor(threads, kMinParallelCost, run);
}

const char* QGemmIsa() { return Get().name; }

Layout CurrentLayout() {
  const QKernels& kr = Get();
  return Layout{kr.name, kr.mr, kr.nr, kr.kgroup, kr.wide};
}

int64_t PackedPanelBytes(int64_t k, int64_t n) {
  const QKernels& kr = Get();
  const int64_t kpad = (k + kr.kgroup - 1) / kr.kgroup * kr.kgroup;
  return ((n + kr.nr - 1) / kr.nr) * kr.nr * kpad * (kr.wide ? 2 : 1);
}

namespace {
template <typename T>
void PackAll(const Args& g, const QKernels& kr, T* dst) {
  const int nr = kr.nr, kg = kr.kgroup;
  const uint8_t fb = g.b_signed ? 0 : 0x80;
  for (int64_t pc = 0; pc < g.k; pc += kKC) {
    const int64_t kc = std::min(kKC, g.k - pc);
    const int64_t kq = (kc + kg - 1) / kg;
    for (int64_t j = 0; j < g.n; j += nr) {
      PackB<T>(g, j, static_cast<int>(std::min<int64_t>(nr, g.n - j)), pc, kc, nr, kg, fb, dst);
      dst += kq * kg * nr;
    }
  }
}
}  // namespace

void PackPanels(const Args& g, void* panels, int32_t* zb_eff, uint32_t* colsum) {
  const QKernels& kr = Get();
  if (kr.wide) {
    PackAll<int16_t>(g, kr, static_cast<int16_t*>(panels));
  } else {
    PackAll<uint8_t>(g, kr, static_cast<uint8_t*>(panels));
  }
  const uint8_t fb = g.b_signed ? 0 : 0x80;
  for (int64_t j = 0; j < g.n; ++j) {
    zb_eff[j] = static_cast<int32_t>(ZbEff(g, j));
    colsum[j] = 0;
  }
  for (int64_t p = 0; p < g.k; ++p) {
    for (int64_t j = 0; j < g.n; ++j) colsum[j] += static_cast<uint32_t>(static_cast<int32_t>(BByte(g, p, j, fb)));
  }
}

}  // namespace qgemm
}  // namespace opforge
