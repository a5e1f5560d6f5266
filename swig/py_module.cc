#define OPFORGE_IMPORT_NUMPY
#include "numpy_api.h"
#include "py_module.h"

namespace opforge {
namespace py {

bool InitModule() {
  import_array1(false);
  return true;
}

}  // namespace py
}  // namespace opforge
