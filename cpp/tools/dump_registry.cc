// Prints the op registry (every op linked into this binary) as JSON: the
// input of `python -m codegen`. Exits 1 if any declaration was invalid.
#include <cstdio>

#include "registry_internal.h"

int main() {
  const auto errors = opforge::OpRegistry::Global()->registration_errors();
  if (!errors.empty()) {
    for (const auto& e : errors) std::fprintf(stderr, "opforge registry error: %s\n", e.c_str());
    return 1;
  }
  const std::string json = opforge::RegistryToJson();
  std::fwrite(json.data(), 1, json.size(), stdout);
  return 0;
}
