# What the wheel ships for custom op libraries (opforge.sysconfig points here):
#   opforge/include/opforge/*.h            the public C++ API (+ generated version.h)
#   opforge/share/cmake/opforge/           find_package(opforge): opforge::opforge,
#                                          opforge_add_op_library()
# (load_op_library renders a library's wrappers with the package's own
# opforge/_schema/, which wheel.packages ships: codegen/ is not installed.)
include(CheckCXXSourceCompiles)
include(CMakePackageConfigHelpers)

# The std::string ABI opforge was built with: custom libraries must match it.
check_cxx_source_compiles("#include <cstddef>
#if !defined(_GLIBCXX_RELEASE)
#error not libstdc++
#endif
int main() { return 0; }" OPFORGE_LIBSTDCXX)
check_cxx_source_compiles("#include <cstddef>
#if !_GLIBCXX_USE_CXX11_ABI
#error old ABI
#endif
int main() { return 0; }" OPFORGE_CXX11_ABI)
set(OPFORGE_ABI_DEFINES "")
if(OPFORGE_LIBSTDCXX)
  if(OPFORGE_CXX11_ABI)
    set(OPFORGE_ABI_DEFINES "_GLIBCXX_USE_CXX11_ABI=1")
  else()
    set(OPFORGE_ABI_DEFINES "_GLIBCXX_USE_CXX11_ABI=0")
  endif()
endif()

set(OPFORGE_CMAKE_DIR ${CMAKE_BINARY_DIR}/share/cmake/opforge)
configure_file(cmake/opforgeConfig.cmake.in ${OPFORGE_CMAKE_DIR}/opforgeConfig.cmake @ONLY)
write_basic_package_version_file(${OPFORGE_CMAKE_DIR}/opforgeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ExactVersion)

install(DIRECTORY cpp/include/opforge DESTINATION opforge/include FILES_MATCHING PATTERN "*.h")
install(FILES ${OPFORGE_VERSION_HEADER} DESTINATION opforge/include/opforge)
install(FILES ${OPFORGE_CMAKE_DIR}/opforgeConfig.cmake ${OPFORGE_CMAKE_DIR}/opforgeConfigVersion.cmake
  DESTINATION opforge/share/cmake/opforge)
