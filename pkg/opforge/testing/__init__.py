"""Tools for testing ops: the gradient checker (``compute_gradient``,
``check_gradients``)."""

from opforge.testing.gradient_checker import check_gradients, compute_gradient

__all__ = ["check_gradients", "compute_gradient"]
