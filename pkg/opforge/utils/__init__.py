"""opforge.utils: data loading (opforge.utils.data)."""

from opforge.utils import data

__all__ = ["data"]
