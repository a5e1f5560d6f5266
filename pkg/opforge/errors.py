"""Exceptions raised by opforge ops: one class per C++ status code.

Each also derives from the builtin a Python caller would expect, so
``except ValueError`` catches bad arguments.
"""


class OpError(Exception):
    """Base class of every error an opforge op raises."""


class InvalidArgumentError(OpError, ValueError):
    """An argument or attr is invalid: wrong dtype, shape, value or type."""


class NotFoundError(OpError, LookupError):
    """Something is not registered, e.g. no kernel for the requested dtype."""


class UnimplementedError(OpError, NotImplementedError):
    """The operation is declared but not implemented for these inputs."""


class ResourceExhaustedError(OpError, MemoryError):
    """Memory (or another resource) could not be obtained."""


class InternalError(OpError):
    """A bug in opforge: please report it."""


class AlreadyExistsError(OpError):
    """Something (an op, a kernel) is already registered under this name."""


class FailedPreconditionError(OpError):
    """The state an op needs is not ready, e.g. reading a variable before it is initialized."""


# Indexed by the C++ opforge::Code value (0, OK, maps to the base class).
_BY_CODE = (OpError, InvalidArgumentError, NotFoundError, UnimplementedError,
            ResourceExhaustedError, InternalError, AlreadyExistsError, FailedPreconditionError)

__all__ = ["OpError", "InvalidArgumentError", "NotFoundError", "UnimplementedError",
           "ResourceExhaustedError", "InternalError", "AlreadyExistsError",
           "FailedPreconditionError"]
