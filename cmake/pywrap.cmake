# The Python extension: SWIG (-builtin) over swig/pywrap_internal.i, which
# %includes the generated per-group .i files; linked with the whole core.
find_package(Python 3.10 REQUIRED COMPONENTS Interpreter Development.Module NumPy)
find_package(SWIG 4.5 REQUIRED COMPONENTS python)
include(UseSWIG)

set(OPFORGE_SWIG_MODULE ${CMAKE_SOURCE_DIR}/swig/pywrap_internal.i)
set_property(SOURCE ${OPFORGE_SWIG_MODULE} PROPERTY CPLUSPLUS ON)
set_property(SOURCE ${OPFORGE_SWIG_MODULE} PROPERTY USE_SWIG_DEPENDENCIES TRUE)
set_property(SOURCE ${OPFORGE_SWIG_MODULE} PROPERTY SWIG_FLAGS -builtin -O -Werror)
set_property(SOURCE ${OPFORGE_SWIG_MODULE} PROPERTY INCLUDE_DIRECTORIES
  ${CMAKE_SOURCE_DIR}/swig ${CMAKE_SOURCE_DIR}/generated/swig ${CMAKE_SOURCE_DIR}/cpp/include)

file(GLOB OPFORGE_BINDING_SOURCES CONFIGURE_DEPENDS swig/*.cc)
swig_add_library(pywrap_internal
  TYPE MODULE
  LANGUAGE python
  OUTPUT_DIR ${CMAKE_BINARY_DIR}/swig_py
  OUTFILE_DIR ${CMAKE_BINARY_DIR}/swig_cxx
  SOURCES ${OPFORGE_SWIG_MODULE} ${OPFORGE_BINDING_SOURCES})
set_target_properties(pywrap_internal PROPERTIES
  PREFIX "_"
  SUFFIX ".${Python_SOABI}${CMAKE_SHARED_MODULE_SUFFIX}"
  CXX_VISIBILITY_PRESET hidden
  SWIG_USE_TARGET_INCLUDE_DIRECTORIES TRUE)
target_include_directories(pywrap_internal PRIVATE swig)
target_compile_definitions(pywrap_internal PRIVATE NPY_NO_DEPRECATED_API=NPY_2_0_API_VERSION)
target_link_libraries(pywrap_internal PRIVATE
  Python::Module Python::NumPy "$<LINK_LIBRARY:WHOLE_ARCHIVE,opforge_core>")

install(TARGETS pywrap_internal LIBRARY DESTINATION opforge)
install(DIRECTORY generated/python/ DESTINATION opforge/ops FILES_MATCHING PATTERN "*.py" PATTERN "*.pyi")
