// The op and kernel registries.
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

}  // namespace opforge
