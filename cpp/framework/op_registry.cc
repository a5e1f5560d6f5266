// The process-wide op and kernel registries.
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "opforge/registry.h"

namespace opforge {
namespace {

struct RegistryState {
  mutable std::shared_mutex mu;
  std::map<std::string, std::unique_ptr<OpDef>> ops;             // sorted by name
  std::map<std::string, std::unique_ptr<KernelTable>> kernels;   // by op name
  std::vector<std::string> errors;
};

// Constructed on first use, so static registrars in any translation unit
// may run before or after this file's initialisers; never destroyed, so
// registrations outlive every static that might still look them up.
RegistryState& State() {
  static RegistryState* state = new RegistryState();
  return *state;
}

KernelTable* TableLocked(RegistryState& s, const std::string& op) {
  auto& slot = s.kernels[op];
  if (!slot) slot = std::make_unique<KernelTable>();
  return slot.get();
}

}  // namespace

const char* DeviceName(int device) { return device == kCPU ? "cpu" : "unknown"; }

OpRegistry* OpRegistry::Global() {
  static OpRegistry* registry = new OpRegistry();
  return registry;
}

const OpDef* OpRegistry::Find(const std::string& name) const {
  RegistryState& s = State();
  std::shared_lock<std::shared_mutex> lock(s.mu);
  auto it = s.ops.find(name);
  return it == s.ops.end() ? nullptr : it->second.get();
}

std::vector<const OpDef*> OpRegistry::ListOps() const {
  RegistryState& s = State();
  std::shared_lock<std::shared_mutex> lock(s.mu);
  std::vector<const OpDef*> out;
  for (const auto& kv : s.ops) out.push_back(kv.second.get());
  return out;
}

Status OpRegistry::Register(const OpDefBuilder& builder) {
  auto def = std::make_unique<OpDef>();
  OF_RETURN_IF_ERROR(builder.Finalize(def.get()));
  RegistryState& s = State();
  std::unique_lock<std::shared_mutex> lock(s.mu);
  auto it = s.ops.find(def->name);
  if (it != s.ops.end()) {
    return errors::AlreadyExists("op '", def->name, "' at ", def->file, ":", def->line,
                                 " is already registered at ", it->second->file, ":", it->second->line);
  }
  def->kernels = TableLocked(s, def->name);
  const std::string name = def->name;
  s.ops.emplace(name, std::move(def));
  return Status::OK();
}

std::vector<std::string> OpRegistry::registration_errors() const {
  RegistryState& s = State();
  std::shared_lock<std::shared_mutex> lock(s.mu);
  return s.errors;
}

void OpRegistry::AddRegistrationError(std::string message) {
  RegistryState& s = State();
  std::unique_lock<std::shared_mutex> lock(s.mu);
  s.errors.push_back(std::move(message));
}

const KernelTable* OpRegistry::Kernels(const std::string& op) const {
  RegistryState& s = State();
  std::unique_lock<std::shared_mutex> lock(s.mu);
  return TableLocked(s, op);
}

Status OpRegistry::RegisterKernel(const std::string& op, int device, DType dtype, KernelFn fn) {
  if (device < 0 || device >= kNumDevices) return errors::InvalidArgument("kernel for op '", op, "': bad device");
  RegistryState& s = State();
  std::unique_lock<std::shared_mutex> lock(s.mu);
  KernelFn& slot = TableLocked(s, op)->fn[device][static_cast<int>(dtype)];
  if (slot != nullptr) {
    return errors::AlreadyExists("a ", DeviceName(device), " kernel for op '", op, "' and dtype ",
                                 DTypeName(dtype), " is already registered");
  }
  slot = fn;
  return Status::OK();
}

std::string OpRegistry::Fingerprint(const std::string& group) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (const OpDef* op : ListOps()) {
    if (op->group != group) continue;
    for (unsigned char c : OpDefToJson(*op, /*with_location_and_kernels=*/false)) {
      h ^= c;
      h *= 1099511628211ull;
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

OpRegistrar::OpRegistrar(const OpDefBuilder& builder) {
  Status s = OpRegistry::Global()->Register(builder);
  if (!s.ok()) OpRegistry::Global()->AddRegistrationError(s.message());
}

KernelRegistrar::KernelRegistrar(const char* op, int device, DType dtype, KernelFn fn, const char* file,
                                 int line) {
  Status s = OpRegistry::Global()->RegisterKernel(op, device, dtype, fn);
  if (!s.ok()) {
    OpRegistry::Global()->AddRegistrationError(s.message() + " (at " + file + ":" + std::to_string(line) + ")");
  }
}

}  // namespace opforge
