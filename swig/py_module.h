#pragma once

namespace opforge {
namespace py {
// Imports numpy's C API. Returns false with a Python error set on failure.
bool InitModule();
}  // namespace py
}  // namespace opforge
