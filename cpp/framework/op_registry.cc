// The process-wide op and kernel registries.
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>

#include "gradient.h"
#include "registry_internal.h"

namespace opforge {
namespace {

// Registrations made while an op library loads: committed all at once or dropped.
struct Stage {
  struct Kernel { std::string op; int device; DType dtype; KernelFn fn; };
  std::map<std::string, std::unique_ptr<OpDef>> ops;
  std::vector<Kernel> kernels;
  std::vector<std::string> errors;
  std::map<std::string, KernelTable> tables;  // built by the check
};

struct RegistryState {
  mutable std::shared_mutex mu;
  std::map<std::string, std::unique_ptr<OpDef>> ops;             // sorted by name
  std::map<std::string, std::unique_ptr<KernelTable>> kernels;   // by op name
  std::vector<std::string> errors;
  std::unique_ptr<Stage> stage;  // non-null while a library loads
  bool gradients_checked = false;
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
  if (s.stage) {  // duplicates of registered ops are reported by CommitStaging
    auto [staged, inserted] = s.stage->ops.emplace(def->name, nullptr);
    if (!inserted) {
      return errors::AlreadyExists("op '", def->name, "' at ", def->file, ":", def->line,
                                   " is declared twice in the library (also at ", staged->second->file, ":",
                                   staged->second->line, ")");
    }
    staged->second = std::move(def);
    return Status::OK();
  }
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
  std::unique_lock<std::shared_mutex> lock(s.mu);
  // Gradient rules call other ops, which may register after them: check
  // them the first time anyone asks, when static initialisation is over.
  if (!s.gradients_checked) {
    s.gradients_checked = true;
    auto find = [&](const std::string& name) -> const OpDef* {
      auto it = s.ops.find(name);
      return it == s.ops.end() ? nullptr : it->second.get();
    };
    for (const auto& kv : s.ops) {
      Status g = CheckGradient(*kv.second, find);
      if (!g.ok()) s.errors.push_back(g.message());
    }
  }
  return s.errors;
}

void OpRegistry::AddRegistrationError(std::string message) {
  RegistryState& s = State();
  std::unique_lock<std::shared_mutex> lock(s.mu);
  (s.stage ? s.stage->errors : s.errors).push_back(std::move(message));
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
  if (s.stage) {
    s.stage->kernels.push_back({op, device, dtype, fn});
    return Status::OK();
  }
  KernelFn& slot = TableLocked(s, op)->fn[device][static_cast<int>(dtype)];
  if (slot != nullptr) {
    return errors::AlreadyExists("a ", DeviceName(device), " kernel for op '", op, "' and dtype ",
                                 DTypeName(dtype), " is already registered");
  }
  slot = fn;
  return Status::OK();
}

Status BeginStaging() {
  RegistryState& s = State();
  std::unique_lock<std::shared_mutex> lock(s.mu);
  if (s.stage) return errors::Internal("an op library is already being loaded");
  s.stage = std::make_unique<Stage>();
  return Status::OK();
}

void AbortStaging() {
  RegistryState& s = State();
  std::unique_lock<std::shared_mutex> lock(s.mu);
  s.stage.reset();
}

namespace {

// FNV-1a 64 over the declarations (as in OpRegistry::Fingerprint).
std::string FingerprintOf(const std::vector<const OpDef*>& ops, const std::string& group) {
  uint64_t h = 1469598103934665603ull;
  for (const OpDef* op : ops) {
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

// Checks a stage against the registry without changing the registry, and
// builds the staged ops' kernel tables (stage->tables; each staged OpDef's
// `kernels` points into them until the commit).
Status CheckStageLocked(const RegistryState& s, Stage* stage) {
  if (!stage->errors.empty()) {
    std::string all;
    for (const auto& e : stage->errors) all += (all.empty() ? "" : "; ") + e;
    const bool dup = all.find("declared twice") != std::string::npos;
    return Status(dup ? Code::kAlreadyExists : Code::kInvalidArgument, "invalid registrations: " + all);
  }
  std::map<std::string, std::string> groups;  // registered group -> an op in it
  for (const auto& kv : s.ops) groups.emplace(kv.second->group, kv.first);
  for (const auto& kv : stage->ops) {
    const OpDef& op = *kv.second;
    auto it = s.ops.find(op.name);
    if (it != s.ops.end()) {
      return errors::AlreadyExists("op '", op.name, "' (declared at ", op.file, ":", op.line,
                                   ") is already registered (declared at ", it->second->file, ":",
                                   it->second->line, ")");
    }
    auto g = groups.find(op.group);
    if (g != groups.end()) {
      return errors::AlreadyExists("op '", op.name, "' (declared at ", op.file, ":", op.line, ") is in group '",
                                   op.group, "', which is already registered (op '", g->second,
                                   "'); name its file differently (<group>_ops.cc)");
    }
  }
  auto find = [&](const std::string& name) -> const OpDef* {
    auto it = stage->ops.find(name);
    if (it != stage->ops.end()) return it->second.get();
    auto r = s.ops.find(name);
    return r == s.ops.end() ? nullptr : r->second.get();
  };
  for (const auto& kv : stage->ops) OF_RETURN_IF_ERROR(CheckGradient(*kv.second, find));
  stage->tables.clear();
  for (const Stage::Kernel& k : stage->kernels) {
    if (stage->ops.count(k.op) == 0 && s.ops.count(k.op) == 0) {
      return errors::NotFound("a ", DeviceName(k.device), " kernel (dtype ", DTypeName(k.dtype),
                              ") is registered for op '", k.op, "', which is not registered");
    }
    const int t = static_cast<int>(k.dtype);
    auto existing = s.kernels.find(k.op);
    KernelFn& slot = stage->tables[k.op].fn[k.device][t];
    if (slot != nullptr || (existing != s.kernels.end() && existing->second->fn[k.device][t] != nullptr)) {
      return errors::AlreadyExists("a ", DeviceName(k.device), " kernel for op '", k.op, "' and dtype ",
                                   DTypeName(k.dtype), " is already registered");
    }
    slot = k.fn;
  }
  for (const auto& kv : stage->ops) {
    auto t = stage->tables.find(kv.first);
    if (t == stage->tables.end()) {
      return errors::NotFound("op '", kv.first, "' (declared at ", kv.second->file, ":", kv.second->line,
                              ") has no kernel: register one with REGISTER_KERNEL in the library");
    }
    kv.second->kernels = &t->second;
  }
  return Status::OK();
}

}  // namespace

Status CheckStaging(std::string* staged_json) {
  RegistryState& s = State();
  std::unique_lock<std::shared_mutex> lock(s.mu);
  if (!s.stage) return errors::Internal("CheckStaging without BeginStaging");
  OF_RETURN_IF_ERROR(CheckStageLocked(s, s.stage.get()));
  std::vector<const OpDef*> ops;
  for (const auto& kv : s.stage->ops) ops.push_back(kv.second.get());
  *staged_json = RegistryDocumentJson(ops, [&ops](const std::string& g) { return FingerprintOf(ops, g); });
  return Status::OK();
}

Status CommitStaging(std::vector<std::string>* added_ops) {
  RegistryState& s = State();
  std::unique_lock<std::shared_mutex> lock(s.mu);
  if (!s.stage) return errors::Internal("CommitStaging without BeginStaging");
  std::unique_ptr<Stage> stage = std::move(s.stage);
  OF_RETURN_IF_ERROR(CheckStageLocked(s, stage.get()));  // nothing is added unless all of it can be

  // Kernels first, so an op is never visible without its kernels.
  for (const auto& kv : stage->tables) {
    KernelTable* table = TableLocked(s, kv.first);
    for (int d = 0; d < kNumDevices; ++d) {
      for (int t = 0; t < kNumDTypes; ++t) {
        if (kv.second.fn[d][t]) table->fn[d][t] = kv.second.fn[d][t];
      }
    }
  }
  added_ops->clear();
  for (auto& kv : stage->ops) {
    kv.second->kernels = TableLocked(s, kv.first);
    added_ops->push_back(kv.first);
    s.ops.emplace(kv.first, std::move(kv.second));
  }
  return Status::OK();
}

std::string OpRegistry::Fingerprint(const std::string& group) const {
  return FingerprintOf(ListOps(), group);
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
