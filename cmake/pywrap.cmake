# The Python extension: SWIG (-builtin) over swig/pywrap_internal.i, which
# %includes the generated per-group .i files; linked with the whole core.
find_package(Python 3.10 REQUIRED COMPONENTS Interpreter Development.Module NumPy)
find_package(SWIG 4.5 REQUIRED COMPONENTS python)
include(UseSWIG)

# Wrappers are regenerated into the build tree from the registry of the very
# core being linked (the dump tool), so the build cannot compile stale ones.
# The committed generated/ is for review; the build only warns when it lags
# (`python -m codegen` updates it, `python -m codegen --check` fails CI).
execute_process(COMMAND ${Python_EXECUTABLE} -c "import jinja2"
  RESULT_VARIABLE _opforge_jinja2 OUTPUT_QUIET ERROR_QUIET)
if(NOT _opforge_jinja2 EQUAL 0)
  message(FATAL_ERROR "opforge: the build runs codegen, which needs jinja2 for ${Python_EXECUTABLE}: pip install jinja2")
endif()
set(OPFORGE_GEN_DIR ${CMAKE_BINARY_DIR}/generated)
# codegen, and the package's schema reader and wrapper templates it renders with.
file(GLOB_RECURSE OPFORGE_CODEGEN_SOURCES CONFIGURE_DEPENDS codegen/*.py codegen/*.j2
  pkg/opforge/_schema/*.py pkg/opforge/_schema/*.j2)
# Which files codegen writes is codegen's to say: it lists them in
# files.cmake (this build's, once codegen has run here; else the committed
# one). A changed list re-runs this configure step.
set(OPFORGE_GENERATED_FILES registry.json swig/gen_ops.i python/__init__.py files.cmake)
if(EXISTS ${OPFORGE_GEN_DIR}/files.cmake)
  include(${OPFORGE_GEN_DIR}/files.cmake)
else()
  include(${CMAKE_SOURCE_DIR}/generated/files.cmake OPTIONAL)
endif()
list(TRANSFORM OPFORGE_GENERATED_FILES PREPEND ${OPFORGE_GEN_DIR}/ OUTPUT_VARIABLE OPFORGE_GEN_FILES)
add_custom_command(
  OUTPUT ${OPFORGE_GEN_DIR}/codegen.stamp
  # Unchanged files keep their mtime (restat), so SWIG reruns only when an
  # op declaration really changed, not on every kernel edit.
  BYPRODUCTS ${OPFORGE_GEN_FILES}
  COMMAND ${Python_EXECUTABLE} -m codegen --dump-tool $<TARGET_FILE:opforge_dump_registry>
          --out ${OPFORGE_GEN_DIR} --quiet --warn-if-stale generated
  COMMAND ${CMAKE_COMMAND} -E touch ${OPFORGE_GEN_DIR}/codegen.stamp
  DEPENDS opforge_dump_registry ${OPFORGE_CODEGEN_SOURCES}
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
  COMMENT "codegen: wrappers from the registry of this build"
  VERBATIM)
add_custom_target(opforge_codegen DEPENDS ${OPFORGE_GEN_DIR}/codegen.stamp)

# Where the build interpreter has scipy-openblas32 (development trees): a
# fallback for MatMul's dlopen after the installed wheel's own location.
execute_process(COMMAND ${Python_EXECUTABLE} -c "import scipy_openblas32 as s; print(s.get_lib_dir(), end='')"
  OUTPUT_VARIABLE _opforge_openblas_dir RESULT_VARIABLE _opforge_openblas_rc ERROR_QUIET)
if(_opforge_openblas_rc EQUAL 0 AND _opforge_openblas_dir)
  set_property(SOURCE ${CMAKE_SOURCE_DIR}/cpp/kernels/blas_loader.cc APPEND PROPERTY
    COMPILE_DEFINITIONS "OPFORGE_OPENBLAS_HINT=\"${_opforge_openblas_dir}\"")
endif()

set(OPFORGE_SWIG_MODULE ${CMAKE_SOURCE_DIR}/swig/pywrap_internal.i)
set_property(SOURCE ${OPFORGE_SWIG_MODULE} PROPERTY CPLUSPLUS ON)
set_property(SOURCE ${OPFORGE_SWIG_MODULE} PROPERTY USE_SWIG_DEPENDENCIES TRUE)
set_property(SOURCE ${OPFORGE_SWIG_MODULE} PROPERTY SWIG_FLAGS -builtin -O -Werror)
set_property(SOURCE ${OPFORGE_SWIG_MODULE} PROPERTY INCLUDE_DIRECTORIES
  ${CMAKE_SOURCE_DIR}/swig ${OPFORGE_GEN_DIR}/swig ${CMAKE_SOURCE_DIR}/cpp/include
  ${CMAKE_BINARY_DIR}/include)

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
target_include_directories(pywrap_internal PRIVATE swig cpp/framework)
add_dependencies(pywrap_internal opforge_codegen)
# Custom op libraries link against this module (DT_NEEDED by soname, which
# matches the copy Python already loaded) and use the opforge:: API it
# exports; -Bsymbolic keeps opforge's own calls bound inside it.
set(OPFORGE_PYWRAP_FILE "_pywrap_internal.${Python_SOABI}${CMAKE_SHARED_MODULE_SUFFIX}")
target_link_options(pywrap_internal PRIVATE "LINKER:-soname,${OPFORGE_PYWRAP_FILE}"
  "LINKER:--version-script=${CMAKE_SOURCE_DIR}/cmake/pywrap_exports.map" "LINKER:-Bsymbolic")
set_property(TARGET pywrap_internal APPEND PROPERTY LINK_DEPENDS ${CMAKE_SOURCE_DIR}/cmake/pywrap_exports.map)
target_compile_definitions(pywrap_internal PRIVATE NPY_NO_DEPRECATED_API=NPY_2_0_API_VERSION)
target_link_libraries(pywrap_internal PRIVATE
  Python::Module Python::NumPy "$<LINK_LIBRARY:WHOLE_ARCHIVE,opforge_core>")

install(TARGETS pywrap_internal LIBRARY DESTINATION opforge)
install(DIRECTORY ${OPFORGE_GEN_DIR}/python/ DESTINATION opforge/ops FILES_MATCHING PATTERN "*.py" PATTERN "*.pyi")
include(cmake/sdk.cmake)
