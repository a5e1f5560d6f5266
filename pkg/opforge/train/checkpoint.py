"""Checkpoint: eager variables, tensors and of.nn models, to and from a file."""

from opforge import errors as _errors
from opforge.train import _safetensors
from opforge.train.saver import _check_entry


class Checkpoint:
    """``tf.train.Checkpoint(**objects)`` for eager state.

    Each keyword names an eager ``of.Variable``, a Tensor (restored in
    place), or an ``of.nn`` model (its parameters and buffers, as
    ``name/dotted.path``). ``save(path)`` writes them; ``restore(path)``
    writes them back in place, so optimizers keep their references.
    """

    def __init__(self, **objects):
        if not objects:
            raise _errors.InvalidArgumentError("Checkpoint: give the objects to save as keywords")
        self._objects = objects

    def _targets(self):
        from opforge import variables as _v
        from opforge.tensor import Tensor
        out = {}
        for key, obj in self._objects.items():
            if isinstance(obj, _v._EagerVariable):
                out[key] = obj
            elif isinstance(obj, Tensor):
                out[key] = obj
            elif hasattr(obj, "named_weights") and hasattr(obj, "named_buffers"):
                for n, w in list(obj.named_weights()) + list(obj.named_buffers()):
                    out[f"{key}/{n}"] = w
            else:
                raise _errors.InvalidArgumentError(
                    f"Checkpoint: '{key}' is a {type(obj).__name__}; expected an eager Variable, a Tensor "
                    "or an of.nn model (graph variables: of.train.Saver)")
        return out

    def save(self, path):
        """Writes every object's values to `path`; returns `path`."""
        _safetensors.save_file({k: t.numpy() for k, t in self._targets().items()}, path,
                               metadata={"format": "opforge.train.Checkpoint"})
        return path

    def restore(self, path):
        """Reads `path` back into the objects in place (all checked before any is written)."""
        from opforge import variables as _v
        arrays, _ = _safetensors.load_file(path)
        targets = self._targets()
        checked = {k: _check_entry(path, k, arrays, t.dtype.as_numpy_dtype, t.shape) for k, t in targets.items()}
        for k, t in targets.items():
            if isinstance(t, _v._EagerVariable):
                t.assign(checked[k])
            else:
                view = t.numpy()
                if not view.flags.writeable:
                    raise _errors.InvalidArgumentError(f"Checkpoint.restore: '{k}' is read-only")
                view[...] = checked[k]
        return self
