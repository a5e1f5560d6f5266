// Resources: state that outlives one op call (a variable's value, a sparse
// table, a random op's draw counter), kept by name in a ResourceMgr.
//
// An op that touches state is declared stateful and names its resources
// with `resource` attrs (see op.h):
//
//   REGISTER_OP("TablePull")
//       .Attr("table: resource")     // the resource's name, a string
//       .Input("ids: int64")
//       .Output("rows: float32")
//       .SetIsStateful()
//       ...
//
// Its kernel reaches the state through the kernel context:
//
//   struct Table : ResourceBase { std::unordered_map<int64_t, ...> rows; ... };
//   std::shared_ptr<Table> t;
//   OF_RETURN_IF_ERROR(ctx->LookupOrCreateResource<Table>("table", &t,
//       [](std::shared_ptr<Table>* out) { *out = std::make_shared<Table>(); return Status::OK(); }));
//   std::lock_guard<std::mutex> lock(t->mu());
//
// Where the state lives: in graph mode, in the resource manager of the
// Session that runs the graph (each Session has its own, as in TensorFlow
// 1); in eager mode, in one manager of the process. The graph engine runs
// the stateful ops that name one resource in the order they were added to
// the graph, and never merges or drops them (graph.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "opforge/status.h"

namespace opforge {

class ResourceBase {
 public:
  virtual ~ResourceBase() = default;
  // What it is, for messages and listings ("Variable float32 [3, 4]").
  virtual std::string DebugString() const = 0;
  // Kernels hold this while they read or write the state.
  std::mutex& mu() const { return mu_; }

 private:
  mutable std::mutex mu_;
};

class ResourceMgr {
 public:
  ResourceMgr() = default;
  ResourceMgr(const ResourceMgr&) = delete;
  ResourceMgr& operator=(const ResourceMgr&) = delete;

  // The resource named `name`, if it has type T. NotFound when there is none,
  // InvalidArgument when it has another type.
  template <typename T>
  Status Lookup(const std::string& name, std::shared_ptr<T>* out) const {
    std::shared_ptr<ResourceBase> base;
    OF_RETURN_IF_ERROR(LookupBase(name, &base));
    return Cast(name, std::move(base), out);
  }

  // The resource named `name`; `create` makes it on first use (atomically:
  // two callers racing get the same one).
  template <typename T>
  Status LookupOrCreate(const std::string& name, std::shared_ptr<T>* out,
                        const std::function<Status(std::shared_ptr<T>*)>& create) {
    std::shared_ptr<ResourceBase> base;
    OF_RETURN_IF_ERROR(LookupOrCreateBase(
        name, &base, [&create](std::shared_ptr<ResourceBase>* made) {
          std::shared_ptr<T> t;
          OF_RETURN_IF_ERROR(create(&t));
          if (!t) return errors::Internal("the create function made no resource");
          *made = std::move(t);
          return Status::OK();
        }));
    return Cast(name, std::move(base), out);
  }

  // Adds `r` as `name`; AlreadyExists if the name is taken.
  Status Create(const std::string& name, std::shared_ptr<ResourceBase> r);
  // Removes `name` (kernels that still hold it keep it alive). NotFound if absent.
  Status Delete(const std::string& name);
  void Clear();
  // Every name, sorted, with its resource's DebugString.
  std::vector<std::pair<std::string, std::string>> List() const;

  Status LookupBase(const std::string& name, std::shared_ptr<ResourceBase>* out) const;
  Status LookupOrCreateBase(const std::string& name, std::shared_ptr<ResourceBase>* out,
                            const std::function<Status(std::shared_ptr<ResourceBase>*)>& create);

 private:
  template <typename T>
  static Status Cast(const std::string& name, std::shared_ptr<ResourceBase> base, std::shared_ptr<T>* out) {
    std::shared_ptr<T> t = std::dynamic_pointer_cast<T>(base);
    if (!t) {
      return errors::InvalidArgument("resource '", name, "' is a ", base->DebugString(),
                                     ", not the kind this op uses");
    }
    *out = std::move(t);
    return Status::OK();
  }

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<ResourceBase>> resources_;
};

// The process's manager: eager-mode state (opforge.Variable outside graphs).
ResourceMgr* EagerResourceMgr();

}  // namespace opforge
