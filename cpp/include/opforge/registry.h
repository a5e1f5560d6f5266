// The op and kernel registries, and eager execution of one op.
#pragma once

#include <string>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/op.h"

namespace opforge {

class OpRegistry {
 public:
  static OpRegistry* Global();

  // Thread-safe. Returned pointers stay valid for the process lifetime.
  const OpDef* Find(const std::string& name) const;
  std::vector<const OpDef*> ListOps() const;  // sorted by name
  Status Register(const OpDefBuilder& builder);
  // Declarations that failed validation at static-init time.
  std::vector<std::string> registration_errors() const;
  void AddRegistrationError(std::string message);

  // A stable 16-hex-digit hash of the declarations of one group (not of their
  // source lines or kernels): the generated wrappers carry it.
  std::string Fingerprint(const std::string& group) const;

  // The kernel table of an op (created empty if needed; pointer is stable).
  const KernelTable* Kernels(const std::string& op) const;
  Status RegisterKernel(const std::string& op, int device, DType dtype, KernelFn fn);

 private:
  OpRegistry() = default;
};

// Runs `op` eagerly. `inputs` are flattened (a list arg takes N slots);
// `attrs` has one entry per op.attrs, kUnset where not given: it is completed
// in place (inferred type and list-length attrs, defaults) and validated.
// Every error message starts with the op's name.
Status Execute(const OpDef& op, const Tensor* inputs, int num_inputs, AttrValue* attrs,
               std::vector<Tensor>* outputs, int device = kCPU);

// The registry as JSON, keys sorted, ops by name: {"format": 1, "groups":
// [...], "ops": [...]}. What the dump tool prints and codegen reads.
std::string RegistryToJson();

// One op's declaration as JSON. Without location and kernels it holds just
// what generated wrappers depend on: the input of the group fingerprints.
std::string OpDefToJson(const OpDef& op, bool with_location_and_kernels);

// Declared output dtype of output `i` given completed attrs.
DType OutputDType(const OpDef& op, int i, const AttrValue* attrs);

}  // namespace opforge
