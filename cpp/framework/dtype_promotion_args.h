// Promotion of an op call's inputs (the binder's rule; the table itself is
// PromoteTypes in opforge/dtype.h, dtype_promotion.cc).
//
// Elementwise ops and contractions (category "elementwise"/"contraction")
// whose single-tensor inputs share a type attr bring those inputs to one
// dtype by the table, as the Array API's binary operators do: int32 + float32
// is float32, float16 + bfloat16 is float32, int8 + uint8 is int16. Weak
// values (Python scalars and lists) take no part: they take the promoted
// dtype of their strong partner afterwards. Every other op keeps the strict
// rule (inputs sharing a type attr must match).
#pragma once

#include "opforge/dtype.h"
#include "opforge/op.h"
#include "opforge/status.h"

namespace opforge {

// Whether `op` promotes its inputs (decided once per op).
bool PromotesInputs(const OpDef& op);

// dtypes: one per op input (kInvalid for a weak value, which is skipped).
// On OK, each strong input sharing a type attr with another of a different
// dtype is set to their common dtype, and *changed says whether any was.
// Fails, naming both arguments, where the table has no common dtype or the
// op has no kernel dtype for it.
Status PromoteInputDTypes(const OpDef& op, DType* dtypes, bool* changed);

}  // namespace opforge
