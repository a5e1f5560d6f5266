// Finds and loads libscipy_openblas.so for blas_loader.h.
#include "blas_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace opforge {
namespace blas {
namespace {

// cblas enums (cblas.h): row-major 101, no-transpose 111, transpose 112.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
using CblasDgemm = void (*)(int, int, int, int, int, int, double, const double*, int,
                            const double*, int, double, double*, int);
CblasSgemm cblas_sgemm = nullptr;
CblasDgemm cblas_dgemm = nullptr;

void Sgemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
           float* c, int ldc) {
  cblas_sgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, m, n, k, 1.0f, a, lda, b,
              ldb, 0.0f, c, ldc);
}
void Dgemm(bool ta, bool tb, int m, int n, int k, const double* a, int lda, const double* b,
           int ldb, double* c, int ldc) {
  cblas_dgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, m, n, k, 1.0, a, lda, b,
              ldb, 0.0, c, ldc);
}

constexpr const char* kLibName = "libscipy_openblas.so";

// The directory holding this extension module (where pip put opforge/).
std::string OwnDir() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&OwnDir), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string p = info.dli_fname;
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

void* OpenFirst() {
  const char* env = std::getenv("OPFORGE_BLAS");
  if (env != nullptr && *env != '\0') {
    if (std::strcmp(env, "none") == 0 || std::strcmp(env, "0") == 0) return nullptr;
    return dlopen(env, RTLD_NOW | RTLD_LOCAL);
  }
  const std::string wheel = OwnDir() + "/../scipy_openblas32/lib/" + kLibName;
  if (void* h = dlopen(wheel.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
#ifdef OPFORGE_OPENBLAS_HINT  // the build interpreter's copy (development trees)
  const std::string hint = std::string(OPFORGE_OPENBLAS_HINT) + "/" + kLibName;
  if (void* h = dlopen(hint.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
#endif
  return dlopen(kLibName, RTLD_NOW | RTLD_LOCAL);
}

Library* Load() {
  void* h = OpenFirst();
  if (h == nullptr) return nullptr;
  cblas_sgemm = reinterpret_cast<CblasSgemm>(dlsym(h, "scipy_cblas_sgemm"));
  cblas_dgemm = reinterpret_cast<CblasDgemm>(dlsym(h, "scipy_cblas_dgemm"));
  auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(h, "scipy_openblas_set_num_threads"));
  if (cblas_sgemm == nullptr || cblas_dgemm == nullptr) {
    dlclose(h);
    return nullptr;
  }
  if (set_threads != nullptr) set_threads(1);
  static Library lib;
  lib.sgemm = Sgemm;
  lib.dgemm = Dgemm;
  static std::string path;
  Dl_info info;
  path = dladdr(reinterpret_cast<void*>(cblas_sgemm), &info) != 0 && info.dli_fname ? info.dli_fname : kLibName;
  lib.path = path.c_str();
  return &lib;
}

}  // namespace

const Library* Get() {
  static const Library* lib = Load();
  return lib;
}

}  // namespace blas
}  // namespace opforge
