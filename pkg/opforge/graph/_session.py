"""Session: runs a graph's nodes on the C++ engine."""

import numpy as np

from opforge import _pywrap_internal as _pw
from opforge import errors as _errors
from opforge.graph._graph import Operation, SymbolicTensor, get_default_graph


class Session:
    """Runs the nodes of `graph` (default: the default graph) that fetches need.

    ``run`` plans once per (fetches, feeds) signature: prunes to what the
    fetches need, then the C++ engine runs independent nodes concurrently on
    up to `inter_op_threads` threads (default: the inter-op pool's size;
    a lone ready node stays on the calling thread), frees intermediates
    after their last reader, and holds no GIL while it runs. By default a
    graph whose nodes are mostly large (at least half write 64 KiB or more:
    a CNN's convolutions, which split over the intra-op threads themselves)
    runs in plan order with its static memory plan instead, as with
    ``inter_op_threads=1``; pass ``inter_op_threads`` to choose.

    State (variables, random ops' draw counters) lives in this Session's own
    resource manager, as in TensorFlow 1: two Sessions of one graph have
    separate variables; ``close()`` drops them.
    """

    def __init__(self, graph=None, inter_op_threads=None):
        self.graph = graph if graph is not None else get_default_graph()
        self._inter_op_threads = int(inter_op_threads or _pw.inter_op_threads())
        # Not given: the engine picks per plan (kAutoInterOp in graph.h).
        self._auto_inter_op = not inter_op_threads
        self._stats = None  # (nodes_run, max_concurrent, peak_bytes) of the last run
        self._closed = False
        self._resources = _pw.resources_new()  # this Session's state (cpp/include/opforge/resource.h)
        # Per feed_dict key, what run checks of it once (graph nodes never
        # change): (node, numpy dtype, placeholder shape to check or None).
        # A small graph runs in ~15 us, so per-run Python counts.
        self._feed_specs = {}

    @property
    def inter_op_threads(self):
        """The most nodes run at once (setting it turns off the default's per-plan choice)."""
        return self._inter_op_threads

    @inter_op_threads.setter
    def inter_op_threads(self, value):
        self._inter_op_threads = int(value)
        self._auto_inter_op = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._closed = True
        _pw.resources_clear(self._resources)

    def run(self, fetches, feed_dict=None):
        """Values of `fetches` (a tensor, or a list/tuple/dict of them, nested),
        as numpy arrays in the same structure."""
        if self._closed:
            raise _errors.InvalidArgumentError("Session.run: the session is closed")
        kind = type(fetches)
        if kind is SymbolicTensor and fetches.graph is self.graph:
            flat = (fetches,)
        elif (kind is list or kind is tuple) and _tensors_of(fetches, self.graph):
            flat = fetches  # the common cases, without the general walk below
        else:
            kind, flat = None, []
            structure = self._flatten(fetches, flat)
        feeds = []
        if feed_dict:
            specs = self._feed_specs
            for key, value in feed_dict.items():
                spec = specs.get(key)
                if spec is None:
                    spec = self._feed_spec(key)
                node, dtype, shape = spec
                if type(value) is np.ndarray and value.dtype == dtype:
                    tensor = _pw.to_tensor(value, None)  # the common case: no conversion to decide
                else:
                    try:
                        tensor = _feed_tensor(key, value)
                    except _errors.OpError as e:
                        raise type(e)(f"Session.run: the value fed to '{key.name}': {e}") from None
                if shape is not None:
                    _check_feed(key, shape, tensor.shape)
                feeds.append((node, tensor))
        refs = [t._ref() for t in flat] if kind is None else [(t._node, t.value_index) for t in flat]
        inter_op = -1 if self._auto_inter_op else self._inter_op_threads
        results, self._stats = _pw.graph_run(self.graph._handle, feeds, refs, inter_op, self._resources)
        if kind is SymbolicTensor:
            return results[0].numpy()
        if kind is list:
            return [r.numpy() for r in results]
        if kind is tuple:
            return tuple([r.numpy() for r in results])
        values = iter([None if isinstance(t, Operation) else r.numpy() for t, r in zip(flat, results)])
        return self._rebuild(structure, values)

    def profile(self, fetches, feed_dict=None, runs=1):
        """Runs `fetches` `runs` times on one inter-op thread (kernels keep
        their intra-op threads) with per-node timing on, and returns
        ``[(node name, op type, seconds), ...]`` in the order the nodes ran,
        each the median over the runs (wall time of the kernel call; what a
        run spends between kernels is the total minus their sum). Nodes whose
        value was computed when the graph was planned do not appear."""
        runs = int(runs)
        if runs < 1:
            raise _errors.InvalidArgumentError(f"Session.profile: argument 'runs' must be >= 1, got {runs}")
        threads, self.inter_op_threads = self.inter_op_threads, 1
        auto, self._auto_inter_op = self._auto_inter_op, False
        was = _pw.graph_profile(True)
        try:
            per_run = []
            for _ in range(runs):
                self.run(fetches, feed_dict)
                per_run.append(_pw.graph_profile_take())
        finally:
            _pw.graph_profile(was)
            self.inter_op_threads = threads
            self._auto_inter_op = auto
        first = per_run[0]
        if any(len(r) != len(first) for r in per_run):  # a plan rebuilt between runs: keep the last
            first, per_run = per_run[-1], per_run[-1:]
        return [(node, op, float(np.median([r[i][2] for r in per_run])) * 1e-9)
                for i, (node, op, _) in enumerate(first)]

    @property
    def last_run_stats(self):
        """nodes_run, max_concurrent and peak_bytes of the last successful run (None before one)."""
        st = self._stats
        return None if st is None else dict(zip(("nodes_run", "max_concurrent", "peak_bytes"), st))

    def _feed_spec(self, key):
        """Checks a feed_dict key once; what run needs of it after that."""
        if not isinstance(key, SymbolicTensor) or key.graph is not self.graph:
            raise _errors.InvalidArgumentError(f"Session.run: feed_dict key {key!r} is not a tensor of this graph")
        if key.value_index != 0:
            raise _errors.InvalidArgumentError(f"Session.run: cannot feed '{key.name}', an output other than 0")
        shape = key.shape
        check = key.op.type == "Placeholder" and shape is not None and any(d is None for d in shape)
        try:
            dtype = np.dtype(key.dtype.as_numpy_dtype)
        except Exception:  # noqa: BLE001 -- no numpy dtype (bfloat16 without ml_dtypes): _feed_tensor decides
            dtype = None
        spec = (key._node, dtype, tuple(shape) if check else None)
        if len(self._feed_specs) >= 1024:  # keys made afresh per run: keep the cache bounded
            self._feed_specs.clear()
        self._feed_specs[key] = spec
        return spec

    def _flatten(self, fetches, flat):
        if isinstance(fetches, Operation):  # run it (its output 0 is fetched), give None
            if fetches.graph is not self.graph:
                raise _errors.InvalidArgumentError(f"Session.run: operation '{fetches.name}' is not in this graph")
            flat.append(fetches)
            return None
        if isinstance(fetches, SymbolicTensor):
            if fetches.graph is not self.graph:
                raise _errors.InvalidArgumentError(f"Session.run: fetch '{fetches.name}' is not in this graph")
            flat.append(fetches)
            return None
        if isinstance(fetches, dict):
            return {k: self._flatten(v, flat) for k, v in fetches.items()}
        if isinstance(fetches, (list, tuple)):
            return type(fetches)(self._flatten(v, flat) for v in fetches)
        raise _errors.InvalidArgumentError(
            f"Session.run: fetches must be graph tensors, or lists, tuples or dicts of them, not {type(fetches).__name__}")

    def _rebuild(self, structure, values):
        if structure is None:
            return next(values)
        if isinstance(structure, dict):
            return {k: self._rebuild(v, values) for k, v in structure.items()}
        return type(structure)(self._rebuild(v, values) for v in structure)


def _tensors_of(fetches, graph):
    """True if fetches (a list or tuple) holds only tensors of graph."""
    for f in fetches:
        if type(f) is not SymbolicTensor or f.graph is not graph:
            return False
    return True


def _feed_tensor(key, value):
    """`value` as a Tensor of the fed tensor's dtype: converted when no value
    changes in the conversion (float64 data into float32, as TensorFlow 1
    does; narrower ints whose values fit; ints or bools into floats), else
    refused naming the tensor."""
    want = key.dtype
    if isinstance(value, _pw_tensor()):
        if value.dtype == want:
            return value
        value = value.numpy()
    if not isinstance(value, (np.ndarray, np.generic)):
        return _pw.to_tensor(value, want)  # Python values: the usual conversion, checked in C++
    have, target = value.dtype, np.dtype(want.as_numpy_dtype)
    if have == target:
        return _pw.to_tensor(value, None)
    why = _unsafe_cast(value, target)
    if why:
        raise _errors.InvalidArgumentError(
            f"{have} data cannot become {want.name}, the dtype of {key.op.type.lower()} '{key.op.name}': {why}; "
            f"convert it yourself (value.astype(...)) if that is what you mean")
    with np.errstate(over="ignore", invalid="ignore"):
        return _pw.to_tensor(np.asarray(value).astype(target), None)


def _unsafe_cast(value, target):
    """Why casting `value` to `target` would change it, or None when it is safe."""
    have = value.dtype
    if have.kind not in "biuf":
        return f"{have} is not a numeric dtype"
    if target.kind == "b":
        return "only bool data feeds a bool tensor"
    if have.kind == "f" and target.kind in "iu":
        return "float data would be truncated"
    if have.kind in "iu" and target.kind in "iu" and not np.can_cast(have, target):
        info = np.iinfo(target)
        if value.size and (value.min() < info.min or value.max() > info.max):
            return f"values outside the range of {target}"
    if have.kind == "f" and target.kind == "f" and have.itemsize > target.itemsize and value.size:
        flat = np.asarray(value).ravel()
        finite = np.abs(flat[np.isfinite(flat)])
        if finite.size and finite.max() > np.finfo(target).max:
            return f"values beyond the range of {target} would become inf"
    return None


def _check_feed(placeholder, want, shape):
    # Unknown dims take any size; the known ones and the rank must match
    # (shapes are then re-inferred from the feed before any kernel runs).
    if len(shape) != len(want) or any(w is not None and w != d for w, d in zip(want, shape)):
        spec = "[" + ", ".join("None" if w is None else str(w) for w in want) + "]"
        raise _errors.InvalidArgumentError(
            f"Session.run: the value fed to placeholder '{placeholder.name}' has shape {list(shape)}, "
            f"which does not fit {spec}")


def _pw_tensor():
    from opforge.tensor import Tensor
    return Tensor
