"""What the generator needs of a parsed Registry: the package's checks
(opforge._schema.validate: names usable in Python, summaries, groups) plus
parameter names that stay distinct in C++ (the SWIG entry points).
Every message starts with file:line.

``validate(registry)`` returns the list of problems (empty when fine);
``check(registry)`` raises CodegenError with all of them.
"""
from __future__ import annotations

from opforge._schema import validate as _schema

from .model import Registry
from .targets import swig

SPELLINGS = {"C++": swig.cpp_ident}


def validate(registry: Registry) -> list[str]:
    return _schema.validate(registry, SPELLINGS)


def check(registry: Registry) -> Registry:
    return _schema.check(registry, SPELLINGS)
