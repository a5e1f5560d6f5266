"""The per-thread hook point graph building and async mode install on.

``installed(hook)`` pushes ``hook`` on this thread's stack of the wrappers'
one hook point (opforge._hooks); the hook receives an ``OpCall``.
"""

from opforge._hooks import installed  # noqa: F401
