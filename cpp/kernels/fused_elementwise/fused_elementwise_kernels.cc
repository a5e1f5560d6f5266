// The FusedElementwise kernel: runs the op's program (opforge/fused_elementwise.h)
// block by block, so every intermediate lives in a small cached buffer and
// the data is read and written once. Each instruction runs over a block
// with the same loops as the op it replaces (vector_math.h's dispatched
// SIMD loops for arithmetic and transcendentals, the same scalar formulas
// for the rest), so results equal the unfused ops' bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "../elementwise.h"
#include "../vector_math.h"
#include "opforge/fused_elementwise.h"
#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace {

using namespace fused;  // NOLINT(build/namespaces)

// Elements per block: a register is 4 KiB (float32) or 8 KiB (float64).
// Registers lie kStride elements apart, not a multiple of 4 KiB, so loads
// of one and stores to another do not alias in the cache's address check.
constexpr int64_t kBlock = 1024;
constexpr int64_t kStride = kBlock + 48;

// How one input reaches the output shape.
template <typename T>
struct Source {
  const T* data;
  int64_t period;  // 0: the whole output's size; 1: one value; else the repeat of trailing dims
};

// x ** c as the Pow kernel computes it for one constant exponent
// (binary_kernels.cc, PowConstant): the same formulas, so the same bits.
template <typename T>
void PowConst(const T* x, T* y, int64_t n, T c) {
  const T kInf = std::numeric_limits<T>::infinity();
  if (c == T(0.5)) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
  } else if (c == T(-0.5)) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] == -kInf ? T(0) : T(1) / (std::sqrt(x[i]) + T(0));
  } else if (c == std::nearbyint(c) && std::fabs(c) <= 16) {
    const int k = static_cast<int>(std::fabs(c));
    const bool inv = c < 0;
    switch (k) {
      case 0: std::fill(y, y + n, T(1)); break;
      case 1: for (int64_t i = 0; i < n; ++i) y[i] = inv ? T(1) / x[i] : x[i]; break;
      case 2: for (int64_t i = 0; i < n; ++i) y[i] = inv ? T(1) / (x[i] * x[i]) : x[i] * x[i]; break;
      case 3:
        for (int64_t i = 0; i < n; ++i) y[i] = inv ? T(1) / (x[i] * x[i] * x[i]) : x[i] * x[i] * x[i];
        break;
      default:
        for (int64_t i = 0; i < n; ++i) {
          T r = 1, b = x[i];
          for (int e = k; e != 0; e >>= 1) {
            if (e & 1) r *= b;
            b *= b;
          }
          y[i] = inv ? T(1) / r : r;
        }
    }
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = std::pow(x[i], c);
  }
}

template <typename T>
void RunUnary(int64_t op, const T* x, T* y, int64_t n) {
  using vmath::UnaryFn;
  switch (op) {
    case kNeg: for (int64_t i = 0; i < n; ++i) y[i] = -x[i]; break;
    case kAbs: for (int64_t i = 0; i < n; ++i) y[i] = std::fabs(x[i]); break;
    case kSquare: for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i]; break;
    case kRelu:  // like np.maximum(x, 0): NaN stays NaN
      for (int64_t i = 0; i < n; ++i) y[i] = (x[i] >= T(0) || x[i] != x[i]) ? x[i] : T(0);
      break;
    case kExp: vmath::Unary(UnaryFn::kExp, x, y, n, false); break;
    case kLog: vmath::Unary(UnaryFn::kLog, x, y, n, false); break;
    case kSqrt: vmath::Unary(UnaryFn::kSqrt, x, y, n, false); break;
    case kTanh: vmath::Unary(UnaryFn::kTanh, x, y, n, false); break;
    case kSigmoid: vmath::Unary(UnaryFn::kSigmoid, x, y, n, false); break;
    case kGelu: vmath::Unary(UnaryFn::kGelu, x, y, n, false); break;
    case kSin: for (int64_t i = 0; i < n; ++i) y[i] = std::sin(x[i]); break;
    default: for (int64_t i = 0; i < n; ++i) y[i] = std::cos(x[i]); break;
  }
}

template <typename T>
void RunBinary(int64_t op, const T* a, const T* b, T* y, int64_t n) {
  using vmath::BinaryFn;
  switch (op) {
    case kAdd: vmath::Binary(BinaryFn::kAdd, a, b, y, n, false); break;
    case kSub: vmath::Binary(BinaryFn::kSub, a, b, y, n, false); break;
    case kMul: vmath::Binary(BinaryFn::kMul, a, b, y, n, false); break;
    case kDiv: vmath::Binary(BinaryFn::kDiv, a, b, y, n, false); break;
    case kMaximum:  // a NaN in either operand wins, like np.maximum
      for (int64_t i = 0; i < n; ++i) y[i] = (a[i] >= b[i] || a[i] != a[i]) ? a[i] : b[i];
      break;
    default:
      for (int64_t i = 0; i < n; ++i) y[i] = (a[i] <= b[i] || a[i] != a[i]) ? a[i] : b[i];
      break;
  }
}

// Cost per element for ParallelFor, summed over the instructions.
int64_t ProgramCost(const std::vector<int64_t>& prog) {
  int64_t cost = 0;
  for (size_t i = 0; i < prog.size(); i += kInstrLen) {
    const int64_t op = prog[i];
    if (op == kExp || op == kLog || op == kTanh || op == kSigmoid || op == kGelu || op == kSin || op == kCos ||
        op == kPowConst) {
      cost += elementwise::kTranscendentalCost;
    } else if (op == kDiv || op == kSqrt) {
      cost += elementwise::kDivCost;
    } else {
      cost += elementwise::kCheapCost;
    }
  }
  return std::max<int64_t>(cost, 1);
}

template <typename T>
Status FusedElementwiseKernel(OpKernelContext* ctx) {
  const std::vector<int64_t>& prog = ctx->attr_ints("program");
  const std::vector<double>& consts_d = ctx->attr("constants").list_f;
  std::vector<T> consts(consts_d.begin(), consts_d.end());
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const TensorShape& os = out->shape();
  const int64_t n = os.num_elements();
  if (n == 0) return Status::OK();

  // Each input as the whole output, one value, or a repeat of the output's
  // trailing dims (a bias row); anything else is broadcast once up front.
  const int num_in = ctx->num_inputs();
  std::vector<Source<T>> src(num_in);
  std::vector<std::vector<T>> expanded;
  expanded.reserve(num_in);
  for (int i = 0; i < num_in; ++i) {
    const Tensor& x = ctx->input(i);
    const TensorShape& xs = x.shape();
    const int64_t xn = xs.num_elements();
    src[i].data = x.data<T>();
    if (xn == n) {
      src[i].period = 0;
      continue;
    }
    if (xn == 1) {
      src[i].period = 1;
      continue;
    }
    int lead = 0;
    while (lead < xs.rank() && xs.dim(lead) == 1) ++lead;
    bool suffix = xs.rank() - lead <= os.rank();
    for (int d = lead; suffix && d < xs.rank(); ++d) {
      suffix = xs.dim(d) == os.dim(os.rank() - xs.rank() + d);
    }
    if (suffix) {
      src[i].period = xn;
      continue;
    }
    expanded.emplace_back(n);
    const T zero = 0;
    elementwise::BinaryLoop(x.data<T>(), xs, &zero, TensorShape(), expanded.back().data(), os,
                            [](T a, T) { return a; });
    src[i] = {expanded.back().data(), 0};
  }

  int num_regs = 0;
  for (size_t i = 0; i < prog.size(); i += kInstrLen) num_regs = std::max<int>(num_regs, prog[i + 1] + 1);
  const int64_t result = prog[prog.size() - kInstrLen + 1];
  T* y = out->data<T>();

  // Loads of one value into a register no other instruction writes are
  // done once per chunk, not per block (constants, one-element inputs).
  std::vector<int> writes(num_regs, 0);
  for (size_t i = 0; i < prog.size(); i += kInstrLen) ++writes[prog[i + 1]];
  std::vector<char> hoisted(prog.size() / kInstrLen, 0);
  for (size_t i = 0; i < prog.size(); i += kInstrLen) {
    const bool splat = prog[i] == kConst || (prog[i] == kInput && src[prog[i + 2]].period == 1);
    hoisted[i / kInstrLen] = splat && writes[prog[i + 1]] == 1 && i + kInstrLen < prog.size();
  }

  ParallelFor(n, ProgramCost(prog), [&](int64_t begin, int64_t end) {
    std::vector<T> buf(static_cast<size_t>(num_regs) * kStride);
    std::vector<const T*> rd(num_regs, nullptr);  // where each register's block is read
    auto reg = [&](int64_t r) { return buf.data() + r * kStride; };
    for (int64_t pos = begin; pos < end; pos += kBlock) {
      const int64_t cnt = std::min(kBlock, end - pos);
      for (size_t i = 0; i < prog.size(); i += kInstrLen) {
        const int64_t op = prog[i], dst = prog[i + 1], a = prog[i + 2], b = prog[i + 3];
        if (hoisted[i / kInstrLen] && pos != begin) continue;  // still in its register
        T* w = dst == result && i + kInstrLen == prog.size() ? y + pos : reg(dst);
        switch (op) {
          case kInput: {
            const Source<T>& s = src[a];
            if (s.period == 0) {
              rd[dst] = s.data + pos;  // read in place, no copy
              continue;
            }
            if (s.period == 1) {
              std::fill(w, w + kBlock, s.data[0]);
            } else {
              for (int64_t j = 0, k = pos % s.period; j < cnt; ++j) {
                w[j] = s.data[k];
                if (++k == s.period) k = 0;
              }
            }
            break;
          }
          case kConst: std::fill(w, w + kBlock, consts[a]); break;
          case kPowConst: PowConst<T>(rd[a], w, cnt, consts[b]); break;
          default:
            if (IsUnary(op)) RunUnary<T>(op, rd[a], w, cnt);
            else RunBinary<T>(op, rd[a], rd[b], w, cnt);
        }
        rd[dst] = w;
      }
    }
  });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("FusedElementwise", kCPU, DType::kFloat32, FusedElementwiseKernel<float>);
REGISTER_KERNEL("FusedElementwise", kCPU, DType::kFloat64, FusedElementwiseKernel<double>);

}  // namespace opforge
