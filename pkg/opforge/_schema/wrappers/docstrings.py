"""Docstring text of a generated Python wrapper, from its view (targets/python.py).

Returns plain text (no escaping, no indentation): the template's ``pydoc``
filter escapes and indents it.
"""
from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from .. import naming
from ..model import ArgDef, AttrType, OpDef

if TYPE_CHECKING:
    from .python import PyOp, PyParam

WIDTH = 72  # text width; the docstring sits 4 spaces deep

# How docstrings name a value of each attr type: the alternatives accepted.
ATTR_NOUNS = {
    AttrType.INT: ("an int",),
    AttrType.FLOAT: ("a float",),
    AttrType.BOOL: ("a bool",),
    AttrType.STRING: ("a string",),
    AttrType.TYPE: ("a dtype",),
    AttrType.SHAPE: ("a shape (a sequence of ints)", "an int"),
    AttrType.LIST_INT: ("a sequence of ints", "an int"),
    AttrType.LIST_FLOAT: ("a sequence of floats",),
    AttrType.LIST_TYPE: ("a sequence of dtypes",),
}


def _wrap(text: str, first: str, rest: str) -> list[str]:
    """Wraps each line of ``text``; the first gets ``first`` as prefix."""
    out: list[str] = []
    for i, line in enumerate(text.split("\n")):
        line = line.rstrip()
        if not line:
            out.append("")
            continue
        out += textwrap.wrap(line, width=WIDTH, initial_indent=first if i == 0 else rest,
                             subsequent_indent=rest, break_long_words=False,
                             break_on_hyphens=False)
    return out


def _wrap_prose(text: str) -> list[str]:
    """Wraps long unindented lines; keeps the author's line breaks and indented lines."""
    out: list[str] = []
    for line in text.split("\n"):
        line = line.rstrip()
        if len(line) <= WIDTH or line[:1].isspace():
            out.append(line)
        else:
            out += textwrap.wrap(line, width=WIDTH, break_long_words=False,
                                 break_on_hyphens=False)
    return out


def _entry(name: str | None, text: str, indent: int = 2) -> str:
    pad = " " * indent
    head = f"{name}: {text}" if name else text
    return "\n".join(_wrap(head, pad, pad + "  "))


def _sentence(*parts: str) -> str:
    return " ".join(p.strip() for p in parts if p.strip())


def _dtype_ref(op: OpDef, arg: ArgDef) -> str:
    if arg.type_attr is None:
        assert arg.fixed_type is not None  # an arg has a type attr or a fixed dtype
        return arg.fixed_type.name
    attr = op.find_attr(arg.type_attr)
    if attr is not None and not attr.inferred:  # a parameter: quote its Python name
        return f"`{naming.python_ident(attr.name)}`"
    return arg.type_attr


def _input_text(op: OpDef, arg: ArgDef) -> str:
    dtype = _dtype_ref(op, arg)
    if arg.number_attr is not None:
        n = op.find_attr(arg.number_attr)
        count = f"at least {n.minimum} " if n is not None and n.minimum else ""
        return _sentence(f"A sequence of {count}tensor-likes of dtype {dtype}.", arg.doc)
    return _sentence(f"A tensor-like of dtype {dtype}.", arg.doc)


def _attr_text(param: PyParam) -> str:
    attr = param.param.attr
    assert attr is not None  # called for attr parameters only
    nouns = list(ATTR_NOUNS[attr.type])
    if attr.minimum is not None:
        nouns[0] += f" >= {attr.minimum}"
    if attr.default_is_none:
        nouns.append("None")
    noun = nouns[0] if len(nouns) == 1 else (
        f"{nouns[0]} or {nouns[1]}" if len(nouns) == 2
        else ", ".join(nouns[:-1]) + f", or {nouns[-1]}")
    bits = [noun[0].upper() + noun[1:]]
    if attr.allowed:
        each = "each " if attr.type is AttrType.LIST_TYPE else ""
        bits.append(f"{each}one of {{{', '.join(t.name for t in attr.allowed)}}}")
    if param.default is not None:
        bits.append(f"default {param.default}")
    return _sentence(", ".join(bits) + ".", attr.doc)


def _output_text(op: OpDef, arg: ArgDef, named: bool) -> str:
    what = f"A list of {arg.number_attr} Tensors" if arg.is_list else "A Tensor"
    if named:
        what += f" `{arg.name}`"
    return _sentence(f"{what} of dtype {_dtype_ref(op, arg)}.", arg.doc)


def _returns(op: OpDef) -> str:
    if not op.outputs:
        return "  None."
    if len(op.outputs) == 1:
        return _entry(None, _output_text(op, op.outputs[0], named=True))
    names = ", ".join(o.name for o in op.outputs)
    lines = [f"  A tuple `({names})`:"]
    lines += [_entry(o.name, _output_text(op, o, named=False), indent=4) for o in op.outputs]
    return "\n".join(lines)


def _type_attrs(op: OpDef) -> list[str]:
    lines = []
    for attr in op.attrs:
        if attr.type is AttrType.TYPE and attr.inferred:
            dtypes = (f"in {{{', '.join(t.name for t in attr.allowed)}}}" if attr.allowed
                      else ": any dtype")
            lines.append(f"  {attr.name} {dtypes}, inferred from the inputs.".replace(" :", ":"))
    return lines


def _kernels(op: OpDef) -> str:
    devices = [f"{k.device} ({', '.join(t.name for t in k.dtypes)})"
               for k in sorted(op.kernels, key=lambda k: k.device) if k.dtypes]
    return "Kernels: " + ("; ".join(devices) if devices else "none registered") + "."


def op_docstring(view: PyOp) -> str:
    op = view.op
    sections = [op.summary.strip() or f"The {op.name} op."]
    description = "\n".join(_wrap_prose(op.description.strip("\n")))
    if description.strip():
        sections.append(description)
    if view.params:
        entries = [_entry(p.py_name, _input_text(op, p.param.input) if p.param.input is not None
                          else _attr_text(p))
                   for p in view.params]
        sections.append("Args:\n" + "\n".join(entries))
    sections.append("Returns:\n" + _returns(op))
    type_attrs = _type_attrs(op)
    if type_attrs:
        sections.append("Type attrs:\n" + "\n".join(type_attrs))
    sections.append(_kernels(op))
    sections.append(f"Declared at {op.source} (op {op.name}).")
    return "\n\n".join(sections)
