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

  // Loading an op library (opforge.load_op_library): between BeginStaging()
  // and CommitStaging()/AbortStaging(), registrations (the library's static
  // initialisers, run by dlopen) are held aside, invisible to lookups.
  // CheckStaging() checks them against the registry (no duplicate op,
  // kernel or group; every staged op has a kernel; no registration error)
  // and gives the staged ops as registry JSON; CommitStaging() checks again
  // and adds all of them or none; on success `added_ops` gets the new ops'
  // names, sorted. One library at a time: BeginStaging fails otherwise.
  Status BeginStaging();
  Status CheckStaging(std::string* staged_json) const;
  Status CommitStaging(std::vector<std::string>* added_ops);
  void AbortStaging();

 private:
  OpRegistry() = default;
};

// Runs `op` eagerly. `inputs` are flattened (a list arg takes N slots);
// `attrs` has one entry per op.attrs, kUnset where not given: it is completed
// in place (inferred type and list-length attrs, defaults) and validated.
// `outputs` has one slot per op.outputs. Every error message starts with
// the op's name.
Status Execute(const OpDef& op, const Tensor* inputs, int num_inputs, AttrValue* attrs, Tensor* outputs,
               int device = kCPU);

// The registry as JSON, keys sorted, ops by name: {"format": 1, "groups":
// [...], "ops": [...]}. What the dump tool prints and codegen reads.
std::string RegistryToJson();

// One op's declaration as JSON. Without location and kernels it holds just
// what generated wrappers depend on: the input of the group fingerprints.
std::string OpDefToJson(const OpDef& op, bool with_location_and_kernels);

// Declared output dtype of output `i` given completed attrs.
DType OutputDType(const OpDef& op, int i, const AttrValue* attrs);

}  // namespace opforge
