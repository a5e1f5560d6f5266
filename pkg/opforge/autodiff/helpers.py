"""Small helpers the generated gradient functions call."""


def inverse_perm(perm):
    """The permutation that undoes `perm` (None, the reversal, undoes itself)."""
    if perm is None:
        return None
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p % len(perm)] = i
    return inverse
