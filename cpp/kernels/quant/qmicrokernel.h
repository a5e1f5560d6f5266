// The 8-bit microkernel table shared by the per-ISA files and the driver.
// Internal to cpp/kernels/quant/.
//
// Packed formats (written by the driver, qgemm.cc): K is cut into groups of
// `kgroup` depths; for group q an A panel holds, per row i < mr, the kgroup
// values of A(i, 4q..) and a B panel, per column j < nr, those of B(.., j):
//   a[(q * mr + i) * kgroup + t],  b[(q * nr + j) * kgroup + t]
// as bytes (u8 A, s8 B) when !wide, or int16 when wide (AVX2: vpmaddwd is
// exact where vpmaddubsw would saturate). Depths past K and columns past n
// are zero.
#pragma once

#include <cstdint>

#include "qgemm.h"

namespace opforge {
namespace qgemm {

// C[i, j] (+)= sum over kq groups of the panels' dot products, for i < m
// (the function's row count) and j < n <= nr. `accumulate`: add to C
// (later depth blocks) rather than overwrite it.
using QMicroFn = void (*)(int64_t kq, const void* a, const void* b, int32_t* c, int64_t ldc, int n,
                          bool accumulate);

// The same tile reading A unpacked (bytes, u8): row i at a + i * lda, its
// group q at + 4q; each row readable to a multiple of kgroup depths. Used
// when A needs no conversion (an unsigned A): a batch of a few dozen rows
// then skips packing A, which costs as much as the GEMM's small last layer.
// `ep` (may be null): the FloatEpilogue (qgemm.h) of this tile, its
// pointers at the tile's first column, applied before the store.
using QMicroRowsFn = void (*)(int64_t kq, const void* a, int64_t lda, const void* b, int32_t* c, int64_t ldc,
                              int n, bool accumulate, const FloatEpilogue* ep);

constexpr int kMaxMR = 16;

struct QKernels {
  const char* name;
  int mr, nr, kgroup;
  bool wide;
  QMicroFn micro[kMaxMR];      // micro[m - 1] computes m rows
  QMicroRowsFn rows[kMaxMR];  // the unpacked-A variants, or all nullptr
};

const QKernels* VnniKernels();  // nullptr when not compiled for x86
const QKernels* Avx2Kernels();
const QKernels* GenericKernels();

}  // namespace qgemm
}  // namespace opforge
