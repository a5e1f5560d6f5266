// Finds numpy's OpenBLAS and loads opforge's own for blas_loader.h.
#include "blas_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace opforge {
namespace blas {
namespace {

// cblas enums (cblas.h): row-major 101, no-transpose 111, transpose 112.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

template <typename Int>
using CblasSgemm = void (*)(int, int, int, Int, Int, Int, float, const float*, Int, const float*,
                            Int, float, float*, Int);
template <typename Int>
using CblasDgemm = void (*)(int, int, int, Int, Int, Int, double, const double*, Int,
                            const double*, Int, double, double*, Int);

// How a build names its symbols: numpy's wheels `scipy_cblas_sgemm64_`
// (ILP64), scipy-openblas32 `scipy_cblas_sgemm`, distributions' libopenblas
// `cblas_sgemm` or `cblas_sgemm64_`.
struct Naming {
  const char* prefix;
  const char* suffix;
  bool ilp64;
};
constexpr Naming kNamings[] = {
    {"scipy_", "64_", true}, {"", "64_", true}, {"scipy_", "", false}, {"", "", false}};

// The resolved entry points of one library; Library's plain function
// pointers reach them through the slot index.
struct Raw {
  void* sgemm = nullptr;
  void* dgemm = nullptr;
  int (*get_threads)() = nullptr;
  bool ilp64 = false;
  std::string path;
};
enum Slot { kShared = 0, kPrivate = 1 };
Raw raw[2];

template <int S>
void Sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float* c, int64_t ldc) {
  const int TA = ta ? kTrans : kNoTrans, TB = tb ? kTrans : kNoTrans;
  if (raw[S].ilp64) {
    reinterpret_cast<CblasSgemm<int64_t>>(raw[S].sgemm)(kRowMajor, TA, TB, m, n, k, 1.0f, a, lda,
                                                         b, ldb, 0.0f, c, ldc);
  } else {
    reinterpret_cast<CblasSgemm<int>>(raw[S].sgemm)(
        kRowMajor, TA, TB, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
        static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
  }
}
template <int S>
void Dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
           const double* b, int64_t ldb, double* c, int64_t ldc) {
  const int TA = ta ? kTrans : kNoTrans, TB = tb ? kTrans : kNoTrans;
  if (raw[S].ilp64) {
    reinterpret_cast<CblasDgemm<int64_t>>(raw[S].dgemm)(kRowMajor, TA, TB, m, n, k, 1.0, a, lda,
                                                         b, ldb, 0.0, c, ldc);
  } else {
    reinterpret_cast<CblasDgemm<int>>(raw[S].dgemm)(
        kRowMajor, TA, TB, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
        static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, c, static_cast<int>(ldc));
  }
}
template <int S>
int Threads() {
  return raw[S].get_threads != nullptr ? raw[S].get_threads() : 1;
}

std::string Sym(const Naming& nm, const char* name) {
  return std::string(nm.prefix) + name + nm.suffix;
}

// Binds `h` into a slot if it exports cblas s/dgemm under one of the namings;
// `set_one_thread` for the private copy. Returns the slot's Library or nullptr.
template <int S>
const Library* Bind(void* h, bool set_one_thread, bool ilp64_only = false) {
  for (const Naming& nm : kNamings) {
    if (ilp64_only && !nm.ilp64) continue;
    void* s = dlsym(h, Sym(nm, "cblas_sgemm").c_str());
    void* d = dlsym(h, Sym(nm, "cblas_dgemm").c_str());
    if (s == nullptr || d == nullptr) continue;
    Raw& r = raw[S];
    r.sgemm = s, r.dgemm = d, r.ilp64 = nm.ilp64;
    r.get_threads = reinterpret_cast<int (*)()>(dlsym(h, Sym(nm, "openblas_get_num_threads").c_str()));
    if (set_one_thread) {
      auto set = reinterpret_cast<void (*)(int)>(dlsym(h, Sym(nm, "openblas_set_num_threads").c_str()));
      if (set != nullptr) set(1);
    }
    Dl_info info;
    r.path = dladdr(s, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "?";
    static Library lib[2];
    lib[S] = Library{Sgemm<S>, Dgemm<S>,
                     nm.ilp64 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int>::max(),
                     Threads<S>, raw[S].path.c_str()};
    return &lib[S];
  }
  return nullptr;
}

enum class Mode { kAuto, kNumpy, kBundled, kNone, kPath };
Mode GetMode() {
  const char* env = std::getenv("OPFORGE_BLAS");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "auto") == 0) return Mode::kAuto;
  if (std::strcmp(env, "none") == 0 || std::strcmp(env, "0") == 0) return Mode::kNone;
  if (std::strcmp(env, "numpy") == 0) return Mode::kNumpy;
  if (std::strcmp(env, "bundled") == 0) return Mode::kBundled;
  return Mode::kPath;
}

int CollectOpenblas(dl_phdr_info* info, size_t, void* out) {
  if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "openblas") != nullptr) {
    static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name);
  }
  return 0;
}

// An OpenBLAS that is already in the process (RTLD_NOLOAD: never loads one),
// an ILP64 build (numpy's) first.
const Library* FindShared() {
  const Mode mode = GetMode();
  if (mode == Mode::kNone || mode == Mode::kBundled) return nullptr;
  if (mode == Mode::kPath) {
    void* h = dlopen(std::getenv("OPFORGE_BLAS"), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    return h != nullptr ? Bind<kShared>(h, false) : nullptr;
  }
  std::vector<std::string> names;
  dl_iterate_phdr(CollectOpenblas, &names);
  for (bool ilp64_only : {true, false}) {
    for (const std::string& name : names) {
      void* h = dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
      if (h == nullptr) continue;
      if (const Library* lib = Bind<kShared>(h, false, ilp64_only)) return lib;
      dlclose(h);
    }
  }
  return nullptr;
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

// Opens `path` only if nobody in the process has it open: a library another
// module loaded (scipy's copy of scipy-openblas32) is theirs, and setting it
// to one thread would slow them down.
void* OpenUnshared(const char* path) {
  if (void* h = dlopen(path, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD)) {
    dlclose(h);
    return nullptr;
  }
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

const Library* LoadPrivate() {
  const Mode mode = GetMode();
  if (mode == Mode::kNone || mode == Mode::kNumpy) return nullptr;
  void* h = nullptr;
  if (mode == Mode::kPath) {
    h = Shared() == nullptr ? OpenUnshared(std::getenv("OPFORGE_BLAS")) : nullptr;
  } else {
    const std::string wheel = OwnDir() + "/../scipy_openblas32/lib/" + kLibName;
    h = OpenUnshared(wheel.c_str());
#ifdef OPFORGE_OPENBLAS_HINT  // the build interpreter's copy (development trees)
    if (h == nullptr) h = OpenUnshared((std::string(OPFORGE_OPENBLAS_HINT) + "/" + kLibName).c_str());
#endif
    if (h == nullptr) h = OpenUnshared(kLibName);
  }
  if (h == nullptr) return nullptr;
  const Library* lib = Bind<kPrivate>(h, true);
  if (lib == nullptr) dlclose(h);
  return lib;
}

}  // namespace

const Library* Shared() {
  static const Library* lib = FindShared();
  return lib;
}

const Library* Private() {
  Shared();  // scan first, so opforge's own copy is never mistaken for numpy's
  static const Library* lib = LoadPrivate();
  return lib;
}

const char* SharedPath() { return Shared() ? Shared()->path : nullptr; }
const char* PrivatePath() { return Private() ? Private()->path : nullptr; }
int SharedThreads() { return Shared() ? Shared()->num_threads() : 0; }

}  // namespace blas
}  // namespace opforge
