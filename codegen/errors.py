"""The one exception type codegen raises for bad input: the schema reader's (messages carry file:line)."""
from opforge._schema.errors import SchemaError as CodegenError

__all__ = ["CodegenError"]
