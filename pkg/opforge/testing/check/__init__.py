"""The op-library checker behind ``python -m opforge check LIB.so``.

Everything it runs is derived from the library's registry entries: no test
code from the library's author. Imports hypothesis (the input generators)
only when a check runs.
"""
from opforge.testing.check.checker import Report, Result, check_library, format_table

__all__ = ["Report", "Result", "check_library", "format_table"]
