// The binder: the one place a call's arguments meet an op's declaration.
//
// Every mode (eager, tape recording, graph building, async) and every
// caller (generated wrappers, load_op_library ops, Dask's meta inference,
// `python -m opforge describe`) binds through Bind(), so each fact below is
// stated once:
//   - which input is which (a list arg `N * T` takes N slots and sets N),
//   - the partner-dtype rule: a "weak" value (a Python scalar or nested list)
//     takes the dtype of a strong input sharing its type attr, else the
//     arg's fixed dtype, else the attr's given value, else its own,
//   - dtype promotion of strong inputs sharing a type attr (PromoteTypes,
//     one table, next to the dtype table),
//   - attr defaults and constraints, inferred type and length attrs,
//   - output dtypes, and output shapes from the op's shape fn, with unknown
//     dims (-1) kept unknown.
//
// Python stays out: the extension turns PyObjects into BindInputs
// (borrowing numpy memory, no copy) and wraps what the mode returns.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "opforge/attr.h"
#include "opforge/inlined_vector.h"
#include "opforge/op.h"
#include "opforge/status.h"
#include "opforge/tensor.h"

namespace opforge {

// A value still being computed (async mode). Its holder knows the dtype and
// shape already; Wait() blocks until the value is there (called without
// the GIL).
class PendingValue {
 public:
  virtual ~PendingValue() = default;
  virtual Status Wait(Tensor* out) = 0;
};

// A shape whose dims may be unknown (-1), or whose rank is unknown. Graph
// placeholders and symbolic tensors carry these; concrete tensors never do.
// Inline storage (a TensorShape holding -1 where unknown): binding allocates
// nothing for ordinary ops.
struct PartialShape {
  static constexpr int64_t kUnknownDim = -1;
  bool known_rank = true;
  TensorShape dims;  // kUnknownDim where not known; rank 0 if !known_rank

  PartialShape() = default;
  explicit PartialShape(const TensorShape& s) : dims(s) {}
  static PartialShape UnknownRank() {
    PartialShape p;
    p.known_rank = false;
    return p;
  }
  int rank() const { return known_rank ? dims.rank() : -1; }
  int64_t dim(int i) const { return dims.dim(i); }
  bool fully_defined() const {
    if (!known_rank) return false;
    for (int i = 0; i < dims.rank(); ++i) {
      if (dims.dim(i) < 0) return false;
    }
    return true;
  }
};

// One input as the caller has it. A list arg (`N * T`) is one kList input
// whose `items` are the elements.
struct BindInput {
  enum Kind : uint8_t {
    kTensor,    // a concrete value (an opforge Tensor or a borrowed array)
    kWeak,      // a Python scalar or nested list, converted at its natural
                // dtype (bool, int64, float64): takes its partner's dtype
    kSymbolic,  // a graph node's output: dtype and partial shape, no value
    kPending,   // an async op's output: dtype and shape, value later
    kList,      // the elements of a list arg
  };
  Kind kind = kTensor;
  Tensor tensor;                           // kTensor, kWeak: the value;
                                           // kPending: a shell (dtype, shape)
  DType dtype = DType::kInvalid;           // kSymbolic
  PartialShape shape;                      // kSymbolic
  int node = -1, output = 0;               // kSymbolic: which graph node output
  std::shared_ptr<PendingValue> pending;   // kPending
  std::vector<BindInput> items;            // kList
  int8_t weak_kind = 0;                    // kWeak: 0 bool, 1 int, 2 float
                                           // (an int past int64 is held as
                                           // float64 with weak_kind 1)
  bool autograd = false;                   // a Tensor the tape tracks

  static BindInput Concrete(Tensor t) {
    BindInput b;
    b.tensor = std::move(t);
    return b;
  }
  static BindInput Weak(Tensor natural) {
    BindInput b;
    b.kind = kWeak;
    b.weak_kind = natural.dtype() == DType::kBool ? 0 : IsInteger(natural.dtype()) ? 1 : 2;
    b.tensor = std::move(natural);
    return b;
  }
  static BindInput Symbolic(int node, int output, DType dtype, PartialShape shape) {
    BindInput b;
    b.kind = kSymbolic;
    b.node = node;
    b.output = output;
    b.dtype = dtype;
    b.shape = std::move(shape);
    return b;
  }
  static BindInput Pending(Tensor shell, std::shared_ptr<PendingValue> value) {
    BindInput b;
    b.kind = kPending;
    b.tensor = std::move(shell);
    b.pending = std::move(value);
    return b;
  }
};

// A bound call: what every mode needs, and nothing it must recompute.
struct BoundCall {
  const OpDef* op = nullptr;
  // Flattened (a list arg takes one slot per element). `values` holds each
  // slot's value at its final dtype (weak values converted), contiguous as
  // the executor takes them: a pending slot's shell, nothing for a
  // symbolic one. `slots` holds the rest of each slot (kind kTensor,
  // kSymbolic or kPending; its own `tensor` empty), or is empty when every
  // slot is kTensor (BindValues).
  InlinedVector<Tensor, 4> values;
  InlinedVector<BindInput, 4> slots;
  // One per op->attrs, completed: inferred type and list-length attrs set,
  // defaults filled, constraints checked.
  InlinedVector<AttrValue, 4> attrs;
  InlinedVector<DType, 2> output_dtypes;
  // Exact when every input's shape is known; unknown dims stay -1.
  InlinedVector<PartialShape, 2> output_shapes;
  bool symbolic = false;  // some input is kSymbolic
  bool pending = false;   // some input is kPending
  bool autograd = false;  // some input is tracked by the tape
};

// Binds `inputs` (one per op.inputs, kList for list args) and `attrs` (one
// per op.attrs, unset where the caller gave none; moved from) into *out.
// Errors (InvalidArgument naming the op and the argument) are the ones the
// eager executor would raise for the same call, so every mode raises them
// at the call site.
Status Bind(const OpDef& op, BindInput* inputs, AttrValue* attrs, BoundCall* out);

// Bind for a call whose inputs are all concrete values of their own dtype
// and whose op has no list args (the eager fast path): out->values holds
// one Tensor per input (out->slots stays empty: every slot is kTensor).
// The same checks, attrs, dtypes and shapes as Bind.
Status BindValues(const OpDef& op, AttrValue* attrs, BoundCall* out);

// The flattened label of input slot `k` of list arg `arg` ("values[2]"), or
// the arg's name.
std::string InputLabel(const ArgDef& arg, int64_t k, bool is_list_element);

// Converts a kWeak input to `target` (kInvalid: keeps its natural dtype) by
// the promotion table, or fails naming `label` and `partner` (where target
// came from: "argument 'x'", "attr 'T'"). On success the input is kTensor.
Status ResolveWeak(BindInput* in, DType target, const std::string& label, const std::string& partner);

}  // namespace opforge
