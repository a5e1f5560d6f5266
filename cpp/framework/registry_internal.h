// Registry internals the runtime uses but custom op libraries never see
// (framework-internal, so changing them does not change the public headers'
// hash that op libraries are stamped with).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "opforge/registry.h"

namespace opforge {

// The registry JSON's "format" (pkg/opforge/_schema/model.py's FORMAT, which
// its one reader checks): 2 has "params" per op and the "dtypes" and
// "attr_types" tables.
inline constexpr int kRegistryFormat = 2;

// Loading an op library (opforge.load_op_library): between BeginStaging()
// and CommitStaging()/AbortStaging(), registrations (the library's static
// initialisers, run by dlopen) are held aside, invisible to lookups.
// CheckStaging() checks them against the registry (no duplicate op,
// kernel or group; every staged op has a kernel; no registration error)
// and gives the staged ops as registry JSON; CommitStaging() checks again
// and adds all of them or none; on success `added_ops` gets the new ops'
// names, sorted. One library at a time: BeginStaging fails otherwise.
Status BeginStaging();
Status CheckStaging(std::string* staged_json);
Status CommitStaging(std::vector<std::string>* added_ops);
void AbortStaging();

// The registry as JSON, keys sorted, ops by name: {"attr_types": [...],
// "dtypes": [...], "format": 2, "groups": [...], "ops": [...]}. What the
// dump tool prints and codegen reads.
std::string RegistryToJson();

// The one writer of that document, for any set of ops (the registry's, or a
// library's staged ones), each group's fingerprint given by `fingerprint`.
std::string RegistryDocumentJson(const std::vector<const OpDef*>& ops,
                                 const std::function<std::string(const std::string& group)>& fingerprint);

// One op's declaration as JSON. Without location and kernels it holds just
// what generated wrappers depend on: the input of the group fingerprints.
std::string OpDefToJson(const OpDef& op, bool with_location_and_kernels);

}  // namespace opforge
