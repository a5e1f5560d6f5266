// Loading a custom op library: dlopen with the registry staged, then an
// all-or-nothing commit, so a refused library leaves the registry exactly as
// it was and the process running.
#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "registry_internal.h"
#include "opforge/stamp.h"
#include "py_errors.h"
#include "py_op_library.h"

namespace opforge {
namespace py {
namespace {

std::string Demangle(const std::string& symbol) {
  int status = 0;
  char* out = abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return symbol;
  std::string s = out;
  std::free(out);
  return s;
}

// Turns dlopen's message into an opforge status with a way out.
Status DlopenError(const std::string& path, const std::string& why) {
  const std::string prefix = "cannot load op library '" + path + "': ";
  const std::string undefined = "undefined symbol: ";
  const size_t u = why.find(undefined);
  if (u != std::string::npos) {
    std::string sym = why.substr(u + undefined.size());
    const size_t end = sym.find_first_of(" \t,(");
    if (end != std::string::npos && sym.rfind("_Z", 0) == 0) sym = sym.substr(0, end);
    const std::string readable = Demangle(sym);
    return errors::NotFound(prefix, "it uses the symbol `", readable, "`", readable == sym ? "" : " (" + sym + ")",
                            ", which neither it nor opforge ", OPFORGE_VERSION,
                            " defines. Is a source file (a kernel?) missing from the library, or was it "
                            "built against another opforge? Build it with opforge_add_op_library(), which "
                            "reports undefined symbols at link time.");
  }
  if (why.find("cannot open shared object file") != std::string::npos) {
    return errors::NotFound(prefix, why);
  }
  return errors::InvalidArgument(prefix, "not a loadable shared library: ", why);
}

}  // namespace

PyObject* LoadLibrary(const char* path, PyObject* accept) {
  Status s = BeginStaging();
  if (!s.ok()) return SetError(s);
  // RTLD_NOW: every symbol is resolved before any static initialiser runs,
  // so a missing one fails here with nothing registered, not mid-call later.
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    AbortStaging();
    return SetError(DlopenError(path, why ? why : "unknown dlopen error"));
  }
  auto refuse = [&](const Status& st) -> PyObject* {
    AbortStaging();
    dlclose(handle);  // nothing of it was kept
    return st.ok() ? nullptr : SetError(Status(st.code(), "refused op library '" + std::string(path) + "': " +
                                                              st.message()));
  };
  std::string staged;
  s = CheckStaging(&staged);
  if (!s.ok()) return refuse(s);
  // The caller renders the wrappers now, while refusing is still free.
  PyObject* ok = PyObject_CallFunction(accept, "s#", staged.data(), static_cast<Py_ssize_t>(staged.size()));
  if (ok == nullptr) return refuse(Status::OK());  // its exception stays set
  Py_DECREF(ok);
  std::vector<std::string> added;
  s = CommitStaging(&added);
  if (!s.ok()) {
    dlclose(handle);
    return SetError(Status(s.code(), "refused op library '" + std::string(path) + "': " + s.message()));
  }
  // The handle stays open for the process lifetime: its kernels are registered.
  PyObject* list = PyList_New(0);
  if (list == nullptr) return nullptr;
  for (const std::string& name : added) {
    PyObject* item = PyUnicode_FromString(name.c_str());
    if (item == nullptr || PyList_Append(list, item) != 0) {
      Py_XDECREF(item);
      Py_DECREF(list);
      return nullptr;
    }
    Py_DECREF(item);
  }
  return list;
}

PyObject* Stamp() { return PyUnicode_FromString(OPFORGE_STAMP); }

}  // namespace py
}  // namespace opforge
