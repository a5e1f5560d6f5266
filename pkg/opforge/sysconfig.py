"""Where opforge's C++ SDK is, and the flags to build a custom op library.

    g++ -shared -fPIC my_ops.cc -o libmy_ops.so \\
        $(python -c 'import opforge.sysconfig as s; print(*s.get_compile_flags())') \\
        $(python -c 'import opforge.sysconfig as s; print(*s.get_link_flags())')

or, with CMake, ``find_package(opforge)`` with ``CMAKE_PREFIX_PATH`` set to
``get_cmake_dir()`` (gives ``opforge::opforge`` and ``opforge_add_op_library``).
The flags carry everything that must match opforge's own build (C++17, the
std::string ABI, the headers, the library exporting the opforge:: API), so
nothing is set by hand; load_op_library checks the stamp they produce.
"""
from __future__ import annotations

import os
import re

def _pywrap():
    from opforge import _pywrap_internal
    return _pywrap_internal


def _pkg() -> str:
    # The folder of the extension, where include/ and share/ are installed
    # beside it. Not this file's: in an editable install (docs/install.md) this
    # file is in the source tree and the SDK in the build's install tree.
    return os.path.dirname(os.path.abspath(_pywrap().__file__))


def get_include() -> str:
    """The folder holding ``opforge/opforge.h`` (and the other public headers)."""
    return os.path.join(_pkg(), "include")


def get_lib() -> str:
    """The folder holding the library custom op libraries link against."""
    return _pkg()


def get_library_file() -> str:
    """The file name of that library: opforge's extension module, which
    exports the opforge:: C++ API (and has it as its soname)."""
    return os.path.basename(_pywrap().__file__)


def get_cmake_dir() -> str:
    """Put this on ``CMAKE_PREFIX_PATH`` for ``find_package(opforge)``."""
    return os.path.join(_pkg(), "share", "cmake", "opforge")


def get_stamp() -> str:
    """This build's stamp: ``opforge-stamp version=X abi=Y`` (see opforge/stamp.h)."""
    return _pywrap().stamp()


def get_abi_tag() -> str:
    m = re.search(r"abi=(\S+)", get_stamp())
    if m is None:  # the extension and this file disagree: a broken install
        raise RuntimeError(f"opforge: unreadable build stamp {get_stamp()!r}; reinstall opforge")
    return m.group(1)


def get_compile_flags() -> list[str]:
    """-I, -std and the std::string ABI define that opforge itself was built with."""
    flags = [f"-I{get_include()}", "-std=c++17", "-fPIC"]
    m = re.match(r"libstdc\+\+-cxx11abi(\d)", get_abi_tag())
    if m:
        flags.append(f"-D_GLIBCXX_USE_CXX11_ABI={m.group(1)}")
    return flags


def get_link_flags() -> list[str]:
    """-L, -l and an rpath for the library that exports the opforge:: API."""
    lib = get_lib()
    return [f"-L{lib}", f"-l:{get_library_file()}", f"-Wl,-rpath,{lib}"]
