"""Fuzz targets for everything opforge parses from outside (tests/fuzz.py
runs them under atheris; tests/test_fuzz.py runs a short profile and replays
tests/fuzz_corpus/, where every finding is kept).

Each target takes bytes and either returns or raises the parser's own error
class; any other exception (or a crash) is a finding.
"""
from __future__ import annotations

import copy
import json
import pathlib
import struct
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # codegen/ from the source tree


# --- REGISTER_OP specs through OpDefBuilder (C++, via _validate_declaration)

# Pieces of the DSL, so that most inputs get past the first token.
DSL = ["x", "y", "T", "N", "*", ":", ": ", "=", ">=", "{", "}", ",", "[", "]", "(", ")", "'", " ", "-", "1",
       "0", "1e-6", "9999999999999999999999", "float32", "int64", "bool", "type", "int", "float", "string",
       "shape", "list(int)", "list(type)", "numbertype", "None", "true", "\n", "dy", "dx", "Mul", "Add",
       "Select", "Greater", "[i]", "values", "\\", "\u00e9", "\t"]
KINDS = ["input", "output", "attr", "doc", "gradient", "no_gradient"]


def _dsl_text(fdp, n):
    parts = []
    for _ in range(fdp.ConsumeIntInRange(0, n)):
        if fdp.ConsumeBool():
            parts.append(DSL[fdp.ConsumeIntInRange(0, len(DSL) - 1)])
        else:
            parts.append(fdp.ConsumeUnicodeNoSurrogates(4))
    return "".join(parts).replace("\0", "")  # C strings: a NUL ends the spec anyway


# The C++ parser is not instrumented; its error messages stand in for its
# branches: one Python branch per kind of message (from op_def_builder.cc,
# attr.cc, gradient.cc) gives libFuzzer a coverage signal per kind.
MESSAGES = ["lacks ':'", "is not an identifier", "bad minimum", "unterminated '{'", "unknown dtype",
            "empty set of dtypes", "unknown attr type", "'>=' applies only", "bad default", "is below the minimum",
            "is not an allowed dtype", "list outputs are not supported", "has the name of an attr",
            "CamelCase", "declared twice", "at least one output", "documents", "follows a parameter",
            "must be a declared int attr", "no summary", "gradient", "already has a gradient rule", "calls",
            "passes attr", "unknown name", "expected", "list", "type attr", "number attr", "default"]


def _message_branches():
    src = "def kind(msg):\n" + "".join(f"    if {m!r} in msg:\n        return {i}\n"
                                       for i, m in enumerate(MESSAGES)) + "    return -1\n"
    namespace: dict = {}
    exec(compile(src, "<opdef message kinds>", "exec"), namespace)
    return namespace["kind"]


_kind = None


def opdef(data: bytes) -> None:
    import atheris
    from opforge import _pywrap_internal as pw, errors
    global _kind
    if _kind is None:
        _kind = atheris.instrument_func(_message_branches())
    fdp = atheris.FuzzedDataProvider(data)
    name = _dsl_text(fdp, 3) if fdp.ConsumeBool() else "Fuzzed"
    specs = [(KINDS[fdp.ConsumeIntInRange(0, len(KINDS) - 1)], _dsl_text(fdp, 12))
             for _ in range(fdp.ConsumeIntInRange(0, 6))]
    try:
        pw._validate_declaration(name, specs)
    except errors.InvalidArgumentError as e:
        _kind(str(e))


# --- the ELF stamp reader (opforge/_elf.py)

def tiny_elf(elf_class=2, order="<", stamp=b"opforge-stamp version=0 abi=x\0", machine=62):
    """A minimal shared object: null, .opforge_stamp and .shstrtab sections."""
    names = b"\0.opforge_stamp\0.shstrtab\0"
    ehsize = 64 if elf_class == 2 else 52
    shfmt = order + ("IIQQQQIIQQ" if elf_class == 2 else "IIIIIIIIII")
    stamp_off = ehsize
    names_off = stamp_off + len(stamp)
    shoff = names_off + len(names)
    sections = [(0,) * 10, (1, 1, 0, 0, stamp_off, len(stamp), 0, 0, 1, 0),
                (16, 3, 0, 0, names_off, len(names), 0, 0, 1, 0)]
    shentsize = struct.calcsize(shfmt)
    ident = b"\x7fELF" + bytes([elf_class, 1 if order == "<" else 2, 1]) + b"\0" * 9
    hfmt = order + ("16sHHIQQQIHHHHHH" if elf_class == 2 else "16sHHIIIIIHHHHHH")
    header = struct.pack(hfmt, ident, 3, machine, 1, 0, 0, shoff, 0, ehsize, 0, 0, shentsize, len(sections), 2)
    return header + stamp + names + b"".join(struct.pack(shfmt, *s) for s in sections)


SEEDS = [tiny_elf(c, o) for c in (1, 2) for o in ("<", ">")]


def elf(data: bytes) -> None:
    """Raw bytes, or a valid tiny ELF with fuzzed header and section fields
    (offsets and sizes past the end, wrong class and byte order)."""
    import atheris

    from opforge import _elf
    fdp = atheris.FuzzedDataProvider(data)
    if fdp.ConsumeBool():
        blob = fdp.ConsumeBytes(fdp.remaining_bytes())
    else:
        blob = bytearray(SEEDS[fdp.ConsumeIntInRange(0, len(SEEDS) - 1)])
        for _ in range(fdp.ConsumeIntInRange(1, 4)):
            width = [1, 2, 4, 8][fdp.ConsumeIntInRange(0, 3)]
            at = fdp.ConsumeIntInRange(0, len(blob) - 1)
            blob[at:at + width] = fdp.ConsumeBytes(width)
        if fdp.ConsumeBool():
            blob = blob[:fdp.ConsumeIntInRange(0, len(blob))]
        blob = bytes(blob)
    try:
        info, section = _elf.parse_section(blob, ".opforge_stamp")
    except _elf.NotElfError:
        return
    assert info.elf_class in (1, 2) and info.byte_order in "<>"
    assert section is None or isinstance(section, bytes)


# --- the registry JSON that codegen reads

def _small_registry():
    full = json.loads((ROOT / "generated" / "registry.json").read_text())
    keep = {"Abs", "Concat", "MatMul", "Cast"}  # type attrs, a list input, attrs, gradients
    return {**full, "ops": [op for op in full["ops"] if op["name"] in keep]}


BASE_REGISTRY = None
VALUES = [None, True, False, 0, -1, 1, 2**63, -2**63 - 1, 0.5, float("nan"), float("inf"), "", "x", "float32",
          "int", "T", "list(type)", [], {}, [None], ["x"], {"x": 1}, [[]], "\u00e9", 255, 1e308]


def _paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for k in node:
            yield from _paths(node[k], path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, path + (i,))


def registry(data: bytes) -> None:
    """Raw bytes as the registry file, or the real registry (four ops) with
    fuzzed values put in, keys dropped or renamed."""
    import atheris

    from codegen import emit, registry_source, validate
    from codegen.errors import CodegenError
    from codegen.model import Registry
    global BASE_REGISTRY
    if BASE_REGISTRY is None:
        BASE_REGISTRY = _small_registry()
    fdp = atheris.FuzzedDataProvider(data)
    render = fdp.ConsumeIntInRange(0, 15) == 0  # rendering costs ~50 parses: one input in 16
    try:
        if fdp.ConsumeBool():
            doc = registry_source.loads(fdp.ConsumeBytes(fdp.remaining_bytes()), "<fuzz>")
        else:
            doc = copy.deepcopy(BASE_REGISTRY)
            paths = list(_paths(doc))
            for _ in range(fdp.ConsumeIntInRange(1, 3)):
                path = paths[fdp.ConsumeIntInRange(1, len(paths) - 1)]
                parent = doc
                try:
                    for k in path[:-1]:
                        parent = parent[k]
                    key = path[-1]
                    action = fdp.ConsumeIntInRange(0, 3)
                    if action == 0 and isinstance(parent, dict):
                        del parent[key]
                    elif action == 1 and isinstance(parent, dict):
                        parent[fdp.ConsumeUnicodeNoSurrogates(6)] = parent.pop(key)
                    elif action == 2:
                        parent[key] = fdp.ConsumeUnicodeNoSurrogates(8)
                    else:
                        parent[key] = copy.deepcopy(VALUES[fdp.ConsumeIntInRange(0, len(VALUES) - 1)])
                except (KeyError, IndexError, TypeError):
                    pass  # an earlier mutation moved this path
        reg = validate.check(Registry.parse(doc))
        if render:
            emit.render(reg)
    except CodegenError:
        pass


TARGETS = {"opdef": opdef, "elf": elf, "registry": registry}
