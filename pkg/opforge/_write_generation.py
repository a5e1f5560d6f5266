"""A process-wide count of the in-place writes opforge makes to tensors: the Tensor methods (``add_``,
``copy_``, ``+=``, ...), optimizer steps, ``Layer.load_state_dict``.

A cache derived from a tensor's values (``nn.Conv2d``'s packed filter in eval mode) stays valid while
``generation`` has not moved since it was made; any counted write, to any tensor, moves it. Writes that
bypass opforge (through a numpy view, ``t.numpy()[...] = v``) are not counted.
"""
import itertools

_next = itertools.count(1)
generation = 0


def bump():
    """Call after an in-place write has finished (next() on a count is atomic under the GIL)."""
    global generation
    generation = next(_next)
