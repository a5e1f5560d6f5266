// numpy's C API, shared by every binding file. Only py_module.cc imports it.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define PY_ARRAY_UNIQUE_SYMBOL OPFORGE_NUMPY_API
#ifndef OPFORGE_IMPORT_NUMPY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>
