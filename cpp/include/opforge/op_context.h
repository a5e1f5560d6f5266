// What shape functions and kernels see of one op call: inputs and attrs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "opforge/attr.h"
#include "opforge/op.h"
#include "opforge/tensor.h"

namespace opforge {

class OpContext {
 public:
  OpContext(const OpDef& op, const Tensor* inputs, int num_inputs, const AttrValue* attrs)
      : op_(op), inputs_(inputs), num_inputs_(num_inputs), attrs_(attrs) {}

  const OpDef& op() const { return op_; }
  // Inputs are flattened: a list arg "N * T" occupies N consecutive slots.
  int num_inputs() const { return num_inputs_; }
  const Tensor& input(int i) const { return inputs_[i]; }
  // [begin, end) of the flattened slots of the input arg named `name`.
  std::pair<int, int> input_range(const std::string& name) const;

  // Attrs are complete (defaults and inferred values filled) and validated.
  const AttrValue& attr(const std::string& name) const;
  int64_t attr_int(const std::string& name) const { return attr(name).i; }
  double attr_float(const std::string& name) const { return attr(name).f; }
  bool attr_bool(const std::string& name) const { return attr(name).b; }
  DType attr_type(const std::string& name) const { return attr(name).type; }
  const std::vector<int64_t>& attr_ints(const std::string& name) const { return attr(name).list_i; }
  const AttrValue* attr_values() const { return attrs_; }  // one per op().attrs

 private:
  const OpDef& op_;
  const Tensor* inputs_;
  int num_inputs_;
  const AttrValue* attrs_;
};

}  // namespace opforge
