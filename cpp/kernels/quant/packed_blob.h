// The opaque "packed weight" tensors made by PackMatMulIntegerWeight and
// PackHalfMatMulWeight (cpp/ops/packed_weight_ops.cc): a constant weight
// packed once into the panel layout a GEMM microkernel reads, behind a
// 128-byte header that the consuming op validates before it reads a byte of
// the payload. A blob is data, not a pointer: one that is truncated, edited,
// packed for another ISA or another op gives an InvalidArgumentError naming
// the op's argument, never a read out of bounds.
//
// Header (little-endian, the first 128 bytes of the uint8 tensor):
//   magic 'OFPK', version, format (1: int8 qgemm panels, 2: float16 weight
//   as float32 panels, 3: float32 sgemm panels), header bytes (128), layout name (16 chars: the ISA
//   the panels were packed for), mr, nr, kgroup, wide, k, n, payload bytes,
//   flags, FNV-1a checksum of the bytes before it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "opforge/kernel.h"

namespace opforge {
namespace packed {

constexpr uint32_t kMagic = 0x4b50464f;  // "OFPK"
constexpr uint32_t kVersion = 1;
constexpr int64_t kHeaderBytes = 128;
constexpr uint32_t kFormatInt8 = 1, kFormatHalf = 2, kFormatFloat = 3;
// k and n above this are refused: sizes computed from them stay far from overflow.
constexpr int64_t kMaxDim = int64_t{1} << 30;

struct Header {
  uint32_t magic, version, format, header_bytes;
  char layout[16];
  int32_t mr, nr, kgroup, wide;
  int64_t k, n;
  uint64_t payload_bytes;
  uint32_t flags, checksum;
};
static_assert(sizeof(Header) == 80, "the header's bytes are its fields");

inline uint32_t Fnv1a(const void* p, size_t bytes) {
  const unsigned char* s = static_cast<const unsigned char*>(p);
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ s[i]) * 16777619u;
  return h;
}

inline int64_t Round64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// Writes `h` (checksum filled in) into the first kHeaderBytes of `dst`,
// zeroing the rest of the header.
inline void WriteHeader(Header h, uint8_t* dst) {
  h.magic = kMagic, h.version = kVersion, h.header_bytes = kHeaderBytes;
  h.checksum = Fnv1a(&h, offsetof(Header, checksum));
  std::memset(dst, 0, kHeaderBytes);
  std::memcpy(dst, &h, sizeof(h));
}

inline void SetLayout(Header* h, const char* name) {
  std::memset(h->layout, 0, sizeof(h->layout));
  std::strncpy(h->layout, name, sizeof(h->layout) - 1);
}

// The header of `blob` (argument `arg`), checked for everything that does not
// depend on the format's layout: rank 1, size, magic, version, format,
// checksum, k and n in range, payload within the tensor.
inline Status ReadHeader(const Tensor& blob, const char* arg, uint32_t format, Header* h) {
  auto bad = [&](const std::string& why) {
    return errors::InvalidArgument("argument '", arg, "' is not a packed weight of this op: ", why);
  };
  if (blob.dtype() != DType::kUInt8 || blob.rank() != 1) return bad("it must be a 1-D uint8 tensor");
  if (blob.NumElements() < kHeaderBytes) return bad("it is shorter than the 128-byte header");
  std::memcpy(h, blob.raw_data(), sizeof(*h));
  if (h->magic != kMagic) return bad("wrong magic (not made by a Pack*Weight op)");
  if (h->version != kVersion) return bad("format version " + std::to_string(h->version) + ", this build reads 1");
  if (h->header_bytes != kHeaderBytes || h->checksum != Fnv1a(h, offsetof(Header, checksum))) {
    return bad("its header is corrupt (checksum mismatch)");
  }
  if (h->format != format) {
    return bad(h->format == kFormatInt8 ? "it holds int8 weights (use MatMulIntegerPacked)"
               : h->format == kFormatHalf ? "it holds float16 weights (use HalfMatMulPacked)"
               : h->format == kFormatFloat ? "it holds float32 weights (use FusedMatMulPacked)"
                                          : "unknown format " + std::to_string(h->format));
  }
  if (h->k < 1 || h->n < 1 || h->k > kMaxDim || h->n > kMaxDim) return bad("k or n out of range");
  if (h->payload_bytes > static_cast<uint64_t>(blob.NumElements() - kHeaderBytes)) {
    return bad("it is truncated (" + std::to_string(blob.NumElements()) + " bytes for a payload of " +
               std::to_string(h->payload_bytes) + ")");
  }
  return Status::OK();
}

// The payload of `blob`, 64-byte aligned: in place when the tensor is, else
// copied into `copy` (a blob fed from an arbitrary numpy buffer).
inline const uint8_t* Payload(const Tensor& blob, const Header& h, std::vector<uint8_t>* copy) {
  const uint8_t* p = static_cast<const uint8_t*>(blob.raw_data()) + kHeaderBytes;
  if (reinterpret_cast<uintptr_t>(p) % 64 == 0) return p;
  copy->resize(h.payload_bytes + 64);
  uint8_t* q = copy->data() + (64 - reinterpret_cast<uintptr_t>(copy->data()) % 64) % 64;
  std::memcpy(q, p, h.payload_bytes);
  return q;
}

}  // namespace packed
}  // namespace opforge
