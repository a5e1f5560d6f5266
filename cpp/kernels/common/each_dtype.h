// Registering one kernel template for several dtypes at once:
//
//   OF_REGISTER_EACH_DTYPE("Transpose", TransposeKernel);          // every dtype
//   OF_REGISTER_DTYPES("Neg", NegKernel, DType::kFloat16, DType::kBFloat16);  // those
//
// The kernel is a function template `template <typename T> Status K(OpKernelContext*)`;
// T is the dtype table's C++ type (float16, bfloat16, int8_t, ...).
#pragma once

#include "opforge/dtype.h"
#include "opforge/kernel.h"

namespace opforge {
namespace each_dtype {

template <typename T>
struct Tag {
  using type = T;
};

template <DType D> struct CType;
#define OF_EACH_DTYPE_CTYPE(e, v, nm, np, ctype, ...) \
  template <> struct CType<DType::e> { using type = ctype; };
OPFORGE_DTYPES(OF_EACH_DTYPE_CTYPE)
#undef OF_EACH_DTYPE_CTYPE

// Registers make(Tag<T>{}) for each dtype in Ds (all of the table when empty).
template <DType... Ds>
struct Registrar {
  template <typename Make>
  Registrar(const char* op, Make make, const char* file, int line) {
    if constexpr (sizeof...(Ds) == 0) {
#define OF_EACH_DTYPE_REGISTER(e, v, nm, np, ctype, ...) \
  KernelRegistrar(op, kCPU, DType::e, make(Tag<ctype>{}), file, line);
      OPFORGE_DTYPES(OF_EACH_DTYPE_REGISTER)
#undef OF_EACH_DTYPE_REGISTER
    } else {
      (KernelRegistrar(op, kCPU, Ds, make(Tag<typename CType<Ds>::type>{}), file, line), ...);
    }
  }
};

}  // namespace each_dtype
}  // namespace opforge

#define OF_EACH_DTYPE_MAKER(kernel) \
  [](auto tag) -> ::opforge::KernelFn { return &kernel<typename decltype(tag)::type>; }

#define OF_REGISTER_EACH_DTYPE(op, kernel)                                                   \
  [[maybe_unused]] static const ::opforge::each_dtype::Registrar<> OF_CONCAT(of_each_dtype_, \
                                                                            __COUNTER__)(   \
      op, OF_EACH_DTYPE_MAKER(kernel), __FILE__, __LINE__)

// The dtypes are DType enumerators: OF_REGISTER_DTYPES("Neg", NegKernel, DType::kFloat16).
#define OF_REGISTER_DTYPES(op, kernel, ...)                                                      \
  [[maybe_unused]] static const ::opforge::each_dtype::Registrar<__VA_ARGS__>                  \
      OF_CONCAT(of_each_dtype_, __COUNTER__)(op, OF_EACH_DTYPE_MAKER(kernel), __FILE__, __LINE__)
