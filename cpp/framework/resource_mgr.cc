// ResourceMgr (resource.h): named state, one manager per Session and one
// for eager mode; and the kernel context's way to it (run_state.h).
#include <utility>

#include "opforge/kernel.h"
#include "opforge/resource.h"
#include "run_state.h"

namespace opforge {

Status ResourceMgr::LookupBase(const std::string& name, std::shared_ptr<ResourceBase>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = resources_.find(name);
  if (it == resources_.end()) return errors::NotFound("resource '", name, "' does not exist");
  *out = it->second;
  return Status::OK();
}

Status ResourceMgr::LookupOrCreateBase(const std::string& name, std::shared_ptr<ResourceBase>* out,
                                       const std::function<Status(std::shared_ptr<ResourceBase>*)>& create) {
  // Created under the lock: two kernels racing on a new name get one resource.
  std::lock_guard<std::mutex> lock(mu_);
  auto it = resources_.find(name);
  if (it != resources_.end()) {
    *out = it->second;
    return Status::OK();
  }
  std::shared_ptr<ResourceBase> made;
  OF_RETURN_IF_ERROR(create(&made));
  resources_.emplace(name, made);
  *out = std::move(made);
  return Status::OK();
}

Status ResourceMgr::Create(const std::string& name, std::shared_ptr<ResourceBase> r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!resources_.emplace(name, std::move(r)).second) {
    return errors::AlreadyExists("resource '", name, "' already exists");
  }
  return Status::OK();
}

Status ResourceMgr::Delete(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (resources_.erase(name) == 0) return errors::NotFound("resource '", name, "' does not exist");
  return Status::OK();
}

void ResourceMgr::Clear() {
  std::map<std::string, std::shared_ptr<ResourceBase>> dead;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dead.swap(resources_);
  }  // destroyed outside the lock
}

std::vector<std::pair<std::string, std::string>> ResourceMgr::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, r] : resources_) out.emplace_back(name, r->DebugString());
  return out;
}

ResourceMgr* EagerResourceMgr() {
  static ResourceMgr* mgr = new ResourceMgr();  // never destroyed: kernels may run at exit
  return mgr;
}

RunState& CurrentRunState() {
  thread_local RunState state;
  return state;
}

ResourceMgr* OpKernelContext::resource_manager() const {
  ResourceMgr* r = CurrentRunState().resources;
  return r ? r : EagerResourceMgr();
}

const std::string& OpKernelContext::node_name() const {
  static const std::string kEager;
  const std::string* n = CurrentRunState().node;
  return n ? *n : kEager;
}

}  // namespace opforge
