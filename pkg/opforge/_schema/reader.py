"""The registry JSON -> a Registry (model.py): the one reader of the serialized registry.

``read(text, origin)`` checks that the document is UTF-8 JSON of the format
this opforge reads (``model.FORMAT``), then parses it into frozen
dataclasses. Errors are SchemaError naming ``origin`` (a file, the dump
tool, a library being loaded) and, past the JSON level, the op's file:line.
"""
from __future__ import annotations

import json
from typing import Any

from .errors import SchemaError
from .model import FORMAT, Registry

__all__ = ["FORMAT", "loads", "read"]


def loads(data: bytes | str, origin: str) -> Any:
    """The JSON document; SchemaError if it is not UTF-8 JSON."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as e:
        raise SchemaError(f"{origin}: not UTF-8 (byte {e.start}): {e.reason}") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"{origin}:{e.lineno}: not valid JSON: {e.msg}") from e
    except RecursionError as e:  # nesting deeper than the interpreter's stack
        raise SchemaError(f"{origin}: JSON nested too deeply") from e


def read(data: bytes | str, origin: str) -> Registry:
    """The parsed registry (its format checked first, then every op)."""
    return Registry.parse(loads(data, origin))
