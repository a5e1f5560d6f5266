"""The libraries under comparison: opforge and numpy always, torch when importable."""
import importlib.util

import numpy as np

import opforge


def load_torch():
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        import torch
    except Exception:  # a broken install must not stop the bench
        return None
    return torch


def as_numpy(result):
    """opforge.Tensor and torch.Tensor both expose .numpy(); numpy scalars pass through;
    a tuple (a multi-output op) is compared as its outputs flattened and joined."""
    if isinstance(result, tuple):
        return np.concatenate([as_numpy(r).ravel() for r in result])
    if hasattr(result, "numpy"):
        return np.asarray(result.numpy())
    return np.asarray(result)


def versions(torch):
    import os
    info = {"numpy": np.__version__, "opforge": getattr(opforge, "__version__", "?"),
            "opforge_path": os.path.dirname(opforge.__file__),
            "torch": torch.__version__ if torch else None}
    if torch:
        info["torch_threads"] = torch.get_num_threads()
    return info
