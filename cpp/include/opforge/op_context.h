// What shape functions and kernels see of one op call: inputs and attrs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "opforge/attr.h"
#include "opforge/op.h"
#include "opforge/status.h"

namespace opforge {

// The op and its attrs; InferenceContext adds the inputs' dtypes and shapes,
// OpKernelContext the input tensors.
class OpContext {
 public:
  OpContext(const OpDef& op, int num_inputs, const AttrValue* attrs)
      : op_(op), num_inputs_(num_inputs), attrs_(attrs) {}

  const OpDef& op() const { return op_; }
  // Inputs are flattened: a list arg "N * T" occupies N consecutive slots.
  int num_inputs() const { return num_inputs_; }
  // [begin, end) of the flattened slots of the input arg named `name`.
  std::pair<int, int> input_range(const std::string& name) const;

  // Attrs are complete (defaults and inferred values filled) and validated.
  // A name the op does not declare (here or in input_range) is a bug in the
  // shape function or kernel: the lookup gives an empty value and the
  // executor fails the call with an InternalError naming the op and the name.
  const AttrValue& attr(const std::string& name) const;
  int64_t attr_int(const std::string& name) const { return attr(name).i; }
  double attr_float(const std::string& name) const { return attr(name).f; }
  bool attr_bool(const std::string& name) const { return attr(name).b; }
  DType attr_type(const std::string& name) const { return attr(name).type; }
  const std::string& attr_string(const std::string& name) const { return attr(name).s; }
  const std::vector<int64_t>& attr_ints(const std::string& name) const { return attr(name).list_i; }
  const AttrValue* attr_values() const { return attrs_; }  // one per op().attrs

  // The first unknown name looked up (OK if none): checked by the executor.
  const Status& lookup_error() const { return lookup_error_; }

 private:
  void UnknownName(const char* what, const std::string& name) const;

  const OpDef& op_;
  int num_inputs_;
  const AttrValue* attrs_;
  mutable Status lookup_error_;
};

}  // namespace opforge
