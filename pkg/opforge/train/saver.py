"""Saver: the values of graph variables in one Session, to and from a file."""

import numpy as np

from opforge import errors as _errors
from opforge.train import _safetensors


def _check_entry(path, name, arrays, want_dtype, want_shape):
    if name not in arrays:
        raise _errors.NotFoundError(f"restore: checkpoint '{path}' has no variable '{name}' "
                                    f"(it has: {', '.join(sorted(arrays)) or 'nothing'})")
    a = arrays[name]
    if a.dtype != want_dtype or tuple(a.shape) != tuple(want_shape):
        raise _errors.InvalidArgumentError(
            f"restore: variable '{name}' is {np.dtype(want_dtype).name} {list(want_shape)} but checkpoint "
            f"'{path}' holds {a.dtype.name} {list(a.shape)}")
    return a


class Saver:
    """Saves and restores graph variables (``tf.train.Saver``).

    `var_list`: variables, or {name in the file: variable}; default: every
    variable of the default graph when the Saver is made. The restore ops
    (a placeholder and an assign per variable) are added to the graph here.
    """

    def __init__(self, var_list=None):
        from opforge import variables as _v
        if var_list is None:
            var_list = _v.global_variables()
        items = list(var_list.items()) if isinstance(var_list, dict) else [(v.name, v) for v in var_list]
        if not items:
            raise _errors.InvalidArgumentError("Saver: there are no variables to save")
        for key, v in items:
            if not isinstance(v, _v._GraphVariable):
                raise _errors.InvalidArgumentError(
                    f"Saver: '{key}' is not a graph variable (use of.train.Checkpoint for eager variables)")
        names = [k for k, _ in items]
        if len(set(names)) != len(names):
            raise _errors.InvalidArgumentError("Saver: two variables have the same name")
        self._items = items
        self.graph = items[0][1].graph
        from opforge.graph._graph import placeholder
        self._feeds, ops = [], []
        with self.graph.as_default():
            for key, v in items:
                ph = placeholder(v.dtype, v.shape, name=f"save/{v.name}")
                self._feeds.append(ph)
                ops.append(v.assign(ph))
            self._restore_op = _v.group(*ops, name="save/restore_all")

    def save(self, sess, path):
        """Writes the variables' values in `sess` to `path`; returns `path`."""
        if sess.graph is not self.graph:
            raise _errors.InvalidArgumentError("Saver.save: the session runs another graph than the variables'")
        values = sess.run([v for _, v in self._items])
        _safetensors.save_file({k: val for (k, _), val in zip(self._items, values)}, path,
                               metadata={"format": "opforge.train.Saver"})
        return path

    def restore(self, sess, path):
        """Sets the variables in `sess` from `path` (every one must be there, of its dtype and shape)."""
        if sess.graph is not self.graph:
            raise _errors.InvalidArgumentError("Saver.restore: the session runs another graph than the variables'")
        arrays, _ = _safetensors.load_file(path)
        feed = {}
        for (key, v), ph in zip(self._items, self._feeds):
            feed[ph] = _check_entry(path, key, arrays, v.dtype.as_numpy_dtype, v.shape)
        sess.run(self._restore_op, feed_dict=feed)
