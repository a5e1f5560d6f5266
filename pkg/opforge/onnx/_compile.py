"""Runs an imported model on opforge's C++ graph engine instead of node by node in Python.

`Program.run` compiles the model once, on its second run, into one opforge
Graph for every size: the model's symbolic dims stay unknown (None) dims of
the placeholders, and the shape subgraphs that read them (Shape -> Gather ->
Concat -> Reshape, Range, ConstantOfShape, Expand of a computed shape, ...)
become graph ops (cpp/ops/shape_ops.cc). The engine computes those per
feed-shape signature before anything runs and keeps the memory plan of each
signature (graph_plan.h), so a repeated size costs nothing and a new one
(each step of a generation loop) costs a re-inference, not a compile. What
does not depend on the feeds still folds to constants at compile time. The
engine's in-order runner then executes the graph (well under a microsecond
of overhead per node, against tens of microseconds of Python per node in
the eager loop).

A signature run many times (_SPECIALIZE_AFTER) is then compiled with its
dims fixed as well, so the import-time fusions that need static dims apply
to the sizes a program keeps running; the graph for every size serves the
rest.

Where the model cannot import with unknown dims (a converter needs a dim's
size), it compiles per signature of feed shapes instead, with every dim
fixed from the feeds, the second time it sees the signature (a small LRU
cache; shapes that never repeat stay eager).

The eager node loop stays the reference and the fallback:
- a model the graph cannot express for a signature (a converter needs the
  value of a tensor computed from the feeds, as a Reshape whose target is
  fed; random operators, which draw anew each run) runs eagerly for that
  signature, and the reason is kept (`Program.compiled_reasons()`);
- a run whose graph raises (an index out of range in the data, ...) is run
  again eagerly, so the error names the ONNX node exactly as before.

"""

import bisect
import collections
import contextlib
import threading

import numpy as np

from opforge import errors

_CACHE_SIZE = 8
# Runs of one signature on the graph for every size before it is compiled
# with its dims fixed: import-time fusions that need static dims (attention
# into ScaledDotProductAttention, ...) then apply, and shape subgraphs fold
# (Llama [3, 24]: 0.27 against 0.33-0.40 ms a run). Compiling costs 15-25 ms
# there, so only a signature run this often gets its own graph; a generation
# loop (a new length every step) never does.
_SPECIALIZE_AFTER = 16
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
        # dtypes and shapes were checked by Program.check_feeds against the
        # model's dims, which this graph's placeholders have (symbolic ones
        # unknown) or which the signature fixed (the cache key).
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
    """A Compiled graph for these feeds' shapes (for every size where fed is None), or an _Eager saying why not."""
    import opforge as of
    from opforge.onnx import import_model
    if not hasattr(of, "Graph"):
        return _Eager("this build has no graph mode")
    random = sorted({ctx.node.op_type for ctx, _, _ in prog.steps if ctx.node.op_type in _NEVER_FOLD})
    if random:
        return _Eager(f"the model uses {random}, which draw anew each run")
    try:
        shapes = None if fed is None else {k: list(v.shape) for k, v in fed.items()}
        imported = import_model(prog, input_shapes=shapes)
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
        self._generic = None  # the graph for every size (Compiled), why there is none (_Eager), or not tried
        self._runs = 0
        self._generic_runs = {}  # signature -> runs on the generic graph (toward _SPECIALIZE_AFTER)

    def generic_reason(self):
        """None when one graph runs every size; else why not (or 'not compiled yet')."""
        g = self._generic
        return "not compiled yet" if g is None else (None if isinstance(g, Compiled) else g.reason)

    def _note(self, key, entry):
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > _CACHE_SIZE:
            self._entries.popitem(last=False)

    def get(self, prog, fed):
        """The entry of these feeds' shapes: the graph for every size from the
        Program's second run on (a signature run _SPECIALIZE_AFTER times on it
        gets its own graph with fixed dims); else (a model that needs static dims) the
        signature's own graph, None the first time a signature is seen (that
        run is eager: compiling costs a few eager runs, so shapes that never
        repeat never pay it)."""
        key = tuple(v.shape for v in fed.values())
        with self._lock:
            generic = self._generic
            if isinstance(generic, Compiled):
                entry = self._entries.get(key)
                if entry is not None and entry is not generic:
                    self._entries.move_to_end(key)
                    return entry  # this signature's own graph
                runs = self._generic_runs
                n = runs[key] = runs.get(key, 0) + 1
                if len(runs) > 32 * _CACHE_SIZE:
                    runs.clear()
                if n != _SPECIALIZE_AFTER:
                    self._note(key, generic)
                    return generic
        if isinstance(generic, Compiled):
            own = compile_for(prog, fed)  # outside the lock: compiling takes a while
            with self._lock:
                self._note(key, own if isinstance(own, Compiled) else generic)
            return own if isinstance(own, Compiled) else generic
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry
            try_generic = self._generic is None and self._runs > 0
            self._runs += 1
        if try_generic:
            generic = compile_for(prog, None)  # outside the lock: compiling takes a while
            with self._lock:
                self._generic = generic
                if isinstance(generic, Compiled):
                    self._note(key, generic)
                    return generic
        with self._lock:
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
