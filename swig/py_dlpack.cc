// DLPack export and import (py_dlpack.h). The structs are DLPack 1.0's
// (dlpack.h, Apache-2.0), written out: the header is not a dependency.
#include "py_dlpack.h"

#include <cstring>
#include <vector>

#include "py_errors.h"
#include "py_tensor.h"

namespace opforge {
namespace py {
namespace {

struct DLDevice { int32_t device_type; int32_t device_id; };
struct DLDataType { uint8_t code; uint8_t bits; uint16_t lanes; };
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion { uint32_t major; uint32_t minor; };
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};
constexpr int32_t kDLCPU = 1;
enum : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };
constexpr uint64_t kReadOnly = 1;

bool ToDLDataType(DType t, DLDataType* out) {
  const uint8_t bits = static_cast<uint8_t>(DTypeSize(t) * 8);
  uint8_t code;
  if (t == DType::kBFloat16) code = kDLBfloat;
  else if (t == DType::kBool) code = kDLBool;
  else if (IsFloating(t)) code = kDLFloat;
  else if (IsUnsigned(t)) code = kDLUInt;
  else if (IsInteger(t)) code = kDLInt;
  else return false;
  *out = DLDataType{code, bits, 1};
  return true;
}

bool FromDLDataType(DLDataType d, DType* out) {
  if (d.lanes != 1) return false;
  for (int i = 1; i < kNumDTypes; ++i) {
    DLDataType mine;
    if (ToDLDataType(static_cast<DType>(i), &mine) && mine.code == d.code && mine.bits == d.bits) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

// What an exported capsule owns: the tensor (its buffer's reference) and the shape.
struct ExportCtx {
  Tensor tensor;
  std::vector<int64_t> shape;
};

void FillDLTensor(ExportCtx* ctx, DLTensor* dl) {
  const Tensor& t = ctx->tensor;
  ctx->shape.resize(static_cast<size_t>(t.rank()));
  for (int i = 0; i < t.rank(); ++i) ctx->shape[static_cast<size_t>(i)] = t.dim(i);
  dl->data = t.raw_data();
  dl->device = DLDevice{kDLCPU, 0};
  dl->ndim = t.rank();
  ToDLDataType(t.dtype(), &dl->dtype);
  dl->shape = ctx->shape.empty() ? nullptr : ctx->shape.data();
  dl->strides = nullptr;  // compact row-major
  dl->byte_offset = 0;
}

void DeleteVersioned(DLManagedTensorVersioned* m) {
  delete static_cast<ExportCtx*>(m->manager_ctx);
  delete m;
}
void DeleteLegacy(DLManagedTensor* m) {
  delete static_cast<ExportCtx*>(m->manager_ctx);
  delete m;
}

// A capsule nobody consumed still owns its tensor.
void VersionedCapsuleGone(PyObject* cap) {
  if (!PyCapsule_IsValid(cap, "dltensor_versioned")) return;
  auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, "dltensor_versioned"));
  if (m && m->deleter) m->deleter(m);
}
void LegacyCapsuleGone(PyObject* cap) {
  if (!PyCapsule_IsValid(cap, "dltensor")) return;
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
  if (m && m->deleter) m->deleter(m);
}

// An imported tensor's storage: calls the producer's deleter when the last
// tensor using it goes (on any thread; producers' deleters take the GIL
// themselves where they need it, as DLPack asks).
class DLPackBuffer final : public TensorBuffer {
 public:
  DLPackBuffer(void* data, size_t size, void* managed, bool versioned, bool writable)
      : TensorBuffer(data, size), managed_(managed), versioned_(versioned), writable_(writable) {}
  bool writable() const override { return writable_; }

 private:
  ~DLPackBuffer() override {
    if (versioned_) {
      auto* m = static_cast<DLManagedTensorVersioned*>(managed_);
      if (m->deleter) m->deleter(m);
    } else {
      auto* m = static_cast<DLManagedTensor*>(managed_);
      if (m->deleter) m->deleter(m);
    }
  }
  void* managed_;
  bool versioned_;
  bool writable_;
};

PyObject* BufferError(const std::string& msg) {
  PyErr_SetString(PyExc_BufferError, ("from_dlpack: " + msg).c_str());
  return nullptr;
}

}  // namespace

PyObject* DLPackExport(PyObject* tensor, int versioned) {
  if (!IsTensor(tensor)) {
    PyErr_SetString(PyExc_TypeError, "dlpack_export: expected an opforge Tensor");
    return nullptr;
  }
  if (!ResolvePending(tensor)) return nullptr;
  auto* ctx = new ExportCtx{TensorOf(tensor), {}};
  DLDataType dt;
  if (!ToDLDataType(ctx->tensor.dtype(), &dt)) {
    delete ctx;
    return BufferError(std::string("dtype ") + DTypeName(TensorOf(tensor).dtype()) + " has no DLPack type");
  }
  PyObject* cap;
  if (versioned) {
    auto* m = new DLManagedTensorVersioned{};
    m->version = DLPackVersion{1, 0};
    m->manager_ctx = ctx;
    m->deleter = &DeleteVersioned;
    const TensorBuffer* buf = ctx->tensor.buffer();
    m->flags = (buf != nullptr && !buf->writable()) ? kReadOnly : 0;
    FillDLTensor(ctx, &m->dl_tensor);
    cap = PyCapsule_New(m, "dltensor_versioned", &VersionedCapsuleGone);
    if (!cap) DeleteVersioned(m);
  } else {
    auto* m = new DLManagedTensor{};
    m->manager_ctx = ctx;
    m->deleter = &DeleteLegacy;
    FillDLTensor(ctx, &m->dl_tensor);
    cap = PyCapsule_New(m, "dltensor", &LegacyCapsuleGone);
    if (!cap) DeleteLegacy(m);
  }
  return cap;
}

bool TensorFromDLPackCapsule(PyObject* capsule, Tensor* out) {
  const bool versioned = PyCapsule_IsValid(capsule, "dltensor_versioned");
  if (!versioned && !PyCapsule_IsValid(capsule, "dltensor")) {
    BufferError("expected an unconsumed DLPack capsule ('dltensor' or 'dltensor_versioned')");
    return false;
  }
  void* managed = PyCapsule_GetPointer(capsule, versioned ? "dltensor_versioned" : "dltensor");
  DLTensor* dl;
  bool writable = true;
  if (versioned) {
    auto* m = static_cast<DLManagedTensorVersioned*>(managed);
    if (m->version.major != 1) {
      BufferError("DLPack version " + std::to_string(m->version.major) + "." + std::to_string(m->version.minor) +
                  " is newer than this importer's 1.x");
      return false;
    }
    dl = &m->dl_tensor;
    writable = (m->flags & kReadOnly) == 0;
  } else {
    dl = &static_cast<DLManagedTensor*>(managed)->dl_tensor;
  }
  if (dl->device.device_type != kDLCPU) {
    BufferError("the tensor is on device type " + std::to_string(dl->device.device_type) +
                "; opforge takes CPU memory only");
    return false;
  }
  DType dtype;
  if (!FromDLDataType(dl->dtype, &dtype)) {
    BufferError("DLPack dtype (code " + std::to_string(dl->dtype.code) + ", bits " + std::to_string(dl->dtype.bits) +
                ", lanes " + std::to_string(dl->dtype.lanes) + ") is not an opforge dtype");
    return false;
  }
  if (dl->ndim < 0 || dl->ndim > kMaxRank) {
    BufferError("rank " + std::to_string(dl->ndim) + " is more than opforge's " + std::to_string(kMaxRank));
    return false;
  }
  TensorShape shape;
  int64_t n = 1;
  for (int i = 0; i < dl->ndim; ++i) {
    if (dl->shape[i] < 0) {
      BufferError("dimension " + std::to_string(i) + " is " + std::to_string(dl->shape[i]));
      return false;
    }
    shape.AddDim(dl->shape[i]);
    n *= dl->shape[i];
  }
  const int64_t esize = static_cast<int64_t>(DTypeSize(dtype));
  char* base = static_cast<char*>(dl->data) + dl->byte_offset;
  bool compact = true;
  if (dl->strides != nullptr && n > 1) {
    int64_t expect = 1;
    for (int i = dl->ndim - 1; i >= 0; --i) {
      if (dl->shape[i] != 1 && dl->strides[i] != expect) compact = false;
      expect *= dl->shape[i];
    }
  }
  // Consumed from here: the capsule no longer owns the managed tensor.
  if (PyCapsule_SetName(capsule, versioned ? "used_dltensor_versioned" : "used_dltensor") != 0) return false;
  if (compact) {
    auto* buf = new DLPackBuffer(base, static_cast<size_t>(n * esize), managed, versioned, writable);
    *out = Tensor::Adopt(dtype, shape, buf);
    return true;
  }
  // Strided: one copy, row-major, then the producer's memory goes back.
  Status s = Tensor::Allocate(dtype, shape, out);
  if (s.ok()) {
    char* dst = static_cast<char*>(out->raw_data());
    std::vector<int64_t> idx(static_cast<size_t>(dl->ndim), 0);
    for (int64_t e = 0; e < n; ++e) {
      int64_t off = 0;
      for (int i = 0; i < dl->ndim; ++i) off += idx[static_cast<size_t>(i)] * dl->strides[i];
      std::memcpy(dst + e * esize, base + off * esize, static_cast<size_t>(esize));
      for (int i = dl->ndim - 1; i >= 0; --i) {
        if (++idx[static_cast<size_t>(i)] < dl->shape[i]) break;
        idx[static_cast<size_t>(i)] = 0;
      }
    }
  }
  if (versioned) {
    auto* m = static_cast<DLManagedTensorVersioned*>(managed);
    if (m->deleter) m->deleter(m);
  } else {
    auto* m = static_cast<DLManagedTensor*>(managed);
    if (m->deleter) m->deleter(m);
  }
  if (!s.ok()) {
    SetError(s);
    return false;
  }
  return true;
}

PyObject* DLPackImport(PyObject* capsule) {
  Tensor t;
  if (!TensorFromDLPackCapsule(capsule, &t)) return nullptr;
  return WrapTensor(std::move(t));
}

}  // namespace py
}  // namespace opforge
