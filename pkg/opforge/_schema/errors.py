"""The one exception type the schema reader (and codegen) raise for bad input; messages carry file:line."""
from __future__ import annotations


class SchemaError(Exception):
    """One or more problems, each a line like ``cpp/ops/math_ops.cc:12: op Add: ...``."""

    def __init__(self, messages: list[str] | str):
        self.messages = [messages] if isinstance(messages, str) else list(messages)
        super().__init__("\n".join(self.messages))
