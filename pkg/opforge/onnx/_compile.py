"""Runs an imported model on opforge's C++ graph engine instead of node by node in Python.

`Program.run` compiles the model into an opforge Graph per signature of feed
shapes, the second time it sees the signature (a small LRU cache; the first
run of a signature is eager, so shapes that never repeat never pay a
compile). Every dim is fixed from the feeds, so shape subgraphs (Shape ->
Gather -> Concat -> Reshape, Range, ConstantOfShape, Expand of a computed
shape, ...) fold to constants at compile time and the graph holds only the
ops that compute on data; the engine's in-order runner then executes it
(well under a microsecond of overhead per node, against tens of
microseconds of Python per node in the eager loop).

The eager node loop stays the reference and the fallback:
- a model the graph cannot express for a signature (a converter needs the
  value of a tensor computed from the feeds, as a Reshape whose target is
  fed; random operators, which draw anew each run) runs eagerly for that
  signature, and the reason is kept (`Program.compiled_reasons()`);
- a run whose graph raises (an index out of range in the data, ...) is run
  again eagerly, so the error names the ONNX node exactly as before.

Not yet: one graph for all sizes (C++ Shape/Range/Expand ops taking shape
tensors); generation with a growing sequence runs eagerly (each length is
seen once).
"""

import bisect
import collections
import contextlib
import threading

import numpy as np

from opforge import errors

_CACHE_SIZE = 8
# Operators whose value must not be folded at import, nor frozen into a
# compiled graph: each run draws anew (none is mapped yet; a future
# converter of one stays eager). Dropout is the identity at inference.
_NEVER_FOLD = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                         "Multinomial", "Bernoulli"})


class Compiled:
    """One graph of a model for one signature of feed shapes."""

    __slots__ = ("session", "feeds", "fetches", "_handle", "_nodes", "_refs")

    def __init__(self, session, feeds, fetches):
        self.session, self.feeds, self.fetches = session, feeds, fetches
        # What Session.run resolves per call, resolved once: the feeds'
        # dtypes and shapes were checked by Program.check_feeds, and this
        # graph's placeholders have exactly those shapes (the cache key).
        self._handle = session.graph._handle
        self._nodes = [(name, ph._node) for name, ph in feeds]
        self._refs = [t._ref() for t in fetches]

    def run(self, fed):
        """The outputs as numpy arrays."""
        from opforge import _pywrap_internal as _pw
        feeds = [(node, _pw.to_tensor(fed[name], None)) for name, node in self._nodes]
        # One inter-op thread: the in-order runner with its static memory plan
        # (as onnxruntime's default sequential mode). Exported transformer
        # layers have little branch parallelism, and the DAG scheduler costs
        # more than it gains on them (llama, 127 nodes: 63 us in order, 77 us
        # on two inter-op threads); kernels still use the intra-op pool.
        results, _ = _pw.graph_run(self._handle, feeds, self._refs, 1, self.session._resources)
        return [r.numpy() for r in results]


class Owned:
    """The memory ranges of a model's weights: outputs that overlap one are copied.

    One bisect per output instead of np.may_share_memory against every
    initializer (tens of microseconds per run for a model with many).
    """

    def __init__(self, arrays):
        spans = sorted(_span(a) for a in arrays if a.nbytes)
        self._starts = [s for s, _ in spans]
        self._ends = [e for _, e in spans]
        # Running maximum of ends, so one bisect finds any overlap.
        top, self._reach = 0, []
        for e in self._ends:
            top = max(top, e)
            self._reach.append(top)

    def overlaps(self, a):
        if not a.nbytes:
            return False
        lo, hi = _span(a)
        i = bisect.bisect_left(self._starts, hi) - 1  # the last span starting before hi
        return i >= 0 and self._reach[i] > lo


def _span(a):
    """[first byte, one past the last) that array a may touch (numpy's own bounds)."""
    lo, hi = np.lib.array_utils.byte_bounds(a) if hasattr(np.lib, "array_utils") else np.byte_bounds(a)
    return lo, hi


class _Eager:
    """A signature that runs eagerly, and why."""

    __slots__ = ("reason",)

    def __init__(self, reason):
        self.reason = reason


def compile_for(prog, fed):
    """A Compiled graph for these feeds' shapes, or an _Eager saying why not."""
    import opforge as of
    from opforge.onnx import import_model
    if not hasattr(of, "Graph"):
        return _Eager("this build has no graph mode")
    random = sorted({ctx.node.op_type for ctx, _, _ in prog.steps if ctx.node.op_type in _NEVER_FOLD})
    if random:
        return _Eager(f"the model uses {random}, which draw anew each run")
    try:
        imported = import_model(prog, input_shapes={k: list(v.shape) for k, v in fed.items()})
    except Exception as e:  # noqa: BLE001 -- the eager loop is the reference: it runs, or raises its own error
        # Unimplemented: the graph cannot express it. Anything else is an
        # error of the model at these shapes (or of a converter in graph
        # mode), which the eager run raises as it always did.
        return _Eager(f"{type(e).__name__}: {e}" if not isinstance(e, errors.OpError) else str(e))
    fetches = [imported.outputs[name] for name in prog.outputs]
    return Compiled(of.Session(imported.graph), list(imported.inputs.items()), fetches)


class CompileCache:
    """Per Program: feed-shape signature -> Compiled or _Eager, least recently used dropped."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries = collections.OrderedDict()
        self._seen = collections.OrderedDict()  # signatures run once (eagerly), oldest first

    def get(self, prog, fed):
        """The entry of these feeds' shapes; None the first time a signature is
        seen (that run is eager: compiling costs a few eager runs, so shapes
        that never repeat, as in generation with a growing sequence, never
        pay it)."""
        key = tuple(v.shape for v in fed.values())
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry
            if key not in self._seen:
                self._seen[key] = True
                while len(self._seen) > 4 * _CACHE_SIZE:
                    self._seen.popitem(last=False)
                return None
        entry = compile_for(prog, fed)  # outside the lock: compiling takes a while
        with self._lock:
            self._entries[key] = entry
            while len(self._entries) > _CACHE_SIZE:
                self._entries.popitem(last=False)
        return entry

    def reasons(self):
        with self._lock:
            return {key: (None if isinstance(e, Compiled) else e.reason) for key, e in self._entries.items()}


def foldable(node, consts):
    """True when a node's value is known at import: all its inputs are, and it draws nothing."""
    return node.op_type not in _NEVER_FOLD and all(k in consts for k in node.input if k)


@contextlib.contextmanager
def eager():
    """Runs ops eagerly inside a graph build (constant folding)."""
    from opforge import _pywrap_internal as _pw
    _pw.mode_push("eager", None)
    try:
        yield
    finally:
        _pw.mode_pop("eager", None)


def to_numpy(result):
    """A converter's eager result (a value or a tuple of them) as read-only numpy arrays."""
    if isinstance(result, tuple):
        return tuple(to_numpy(r) for r in result)
    if not isinstance(result, np.ndarray) and not hasattr(result, "numpy"):
        return result  # None for an output the node does not make, a fused-away marker
    a = result if isinstance(result, np.ndarray) else np.asarray(result.numpy())
    a.flags.writeable = False  # shared by the graph's constants: never modified
    return a
