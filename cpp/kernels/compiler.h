// Compiler hints shared by the kernels.
#pragma once

// Promises the compiler that pointers do not alias, so loops vectorize.
#if defined(__GNUC__) || defined(__clang__)
#define OF_RESTRICT __restrict__
#elif defined(_MSC_VER)
#define OF_RESTRICT __restrict
#else
#define OF_RESTRICT
#endif

// Keeps GCC from unrolling a loop it would otherwise fail to vectorize
// (NaN-aware max/min).
#if defined(__GNUC__) && !defined(__clang__)
#define OF_NO_UNROLL _Pragma("GCC unroll 1")
#else
#define OF_NO_UNROLL
#endif
