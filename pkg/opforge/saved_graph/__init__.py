"""Saved graphs: an opforge graph with its weights and signature, as one ONNX file.

    import opforge as of
    of.saved_graph.save("model.onnx", graph, inputs={"x": x}, outputs={"y": y})
    ...                                     # another process, no model code:
    saved = of.saved_graph.load("model.onnx")
    saved.run({"x": batch})                  # {"y": array}

ONNX is the format so that the tools users have read it: Netron draws it,
``onnx.checker`` checks it, and a graph whose ops all have ONNX
equivalents runs in onnxruntime unchanged. Ops without one are written in
the ``opforge`` domain, and ops of a library loaded with load_op_library in
the library's own domain (``opforge.lib.<group>``). ``python -m opforge
graph show PATH`` prints the nodes; ``--dot`` writes Graphviz DOT.

Needs the optional ``onnx`` package (``pip install opforge[onnx]``);
``import opforge`` does not import it.
"""

from opforge import errors as _errors

__all__ = ["save", "load", "to_onnx", "SavedGraph"]


def _need_onnx():
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise _errors.UnimplementedError(
            "opforge.saved_graph needs the onnx package: pip install 'opforge[onnx]'") from None


def _graph_of(sess_or_graph):
    from opforge.graph import Graph, Session
    if isinstance(sess_or_graph, Session):
        return sess_or_graph.graph, sess_or_graph
    if isinstance(sess_or_graph, Graph):
        return sess_or_graph, None
    raise _errors.InvalidArgumentError(
        f"saved_graph.save: expected an opforge.Session or opforge.Graph, not {type(sess_or_graph).__name__}")


def _variables(graph, sess):
    """A function node id -> (name, value, trainable) for the graph's variable
    reads (ReadVariable nodes): their values in `sess`."""
    def read(node_id):
        op = graph._op(node_id)
        name = op.get_attr("var")
        if sess is None:
            raise _errors.InvalidArgumentError(
                f"saved_graph.save: the graph reads variable '{name}': pass the Session holding its value")
        state = graph.__dict__.get("_state") or {}
        trainable = next((bool(v.trainable) for v in state.get("variables", ()) if v.name == name), True)
        return name, sess.run(op.outputs[0]), trainable
    return read


def to_onnx(sess_or_graph, inputs, outputs):
    """The onnx.ModelProto that `save` writes (checked with onnx.checker)."""
    _need_onnx()
    from opforge.saved_graph import _export
    graph, sess = _graph_of(sess_or_graph)
    return _export.to_model(graph, inputs, outputs, _variables(graph, sess))


def save(path, sess_or_graph, inputs, outputs):
    """Writes the part of a graph that `outputs` need to `path` (an ONNX file).

    sess_or_graph: a Session (its variables' current values are written) or
    a Graph. inputs: {name: placeholder} (or a list: named after the
    placeholders); outputs: {name: tensor} (or a list). The names are the
    ONNX model's input and output names. Returns the ModelProto written.
    """
    import os
    model = to_onnx(sess_or_graph, inputs, outputs)
    path = os.fspath(path)
    data = model.SerializeToString()
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)  # a reader never sees half a file
    return model


class SavedGraph:
    """A loaded saved graph: ``graph``, ``inputs`` and ``outputs`` ({name:
    tensor}), ``variables`` ({name: Variable}); ``run(feeds)`` computes the
    outputs (all, or those named in `fetch`) in a Session of its own."""

    def __init__(self, graph, inputs, outputs, variables, model, init_ops=None):
        self.graph, self.inputs, self.outputs, self.variables = graph, inputs, outputs, variables
        self.model = model
        # What a new session runs first: the variables' initializers.
        self._init_ops = list(init_ops) if init_ops is not None else [v.initializer for v in variables.values()]
        self._session = None

    def session(self):
        """The Session `run` uses (variables initialized from the file)."""
        if self._session is None:
            from opforge.graph import Session
            self._session = Session(self.graph)
            if self._init_ops:
                self._session.run(list(self._init_ops))
        return self._session

    def run(self, feeds=None, fetch=None):
        """{output name: array}. feeds: {input name (or placeholder): value}."""
        feed_dict = {}
        for key, value in (feeds or {}).items():
            if isinstance(key, str):
                if key not in self.inputs:
                    raise _errors.InvalidArgumentError(
                        f"SavedGraph.run: no input named {key!r}; inputs: {sorted(self.inputs)}")
                key = self.inputs[key]
            feed_dict[key] = value
        names = list(self.outputs) if fetch is None else [fetch] if isinstance(fetch, str) else list(fetch)
        for n in names:
            if n not in self.outputs:
                raise _errors.InvalidArgumentError(f"SavedGraph.run: no output named {n!r}; outputs: {list(self.outputs)}")
        return self.session().run({n: self.outputs[n] for n in names}, feed_dict)

    def replace(self, match, replacement, inputs=None, attrs=None):
        """A new SavedGraph with `match` replaced by op `replacement` (opforge.graph_util.replace)."""
        from opforge import graph_util
        return graph_util.replace(self, match, replacement, inputs, attrs)

    def save(self, path):
        """Writes this graph (its variables' values in its session) to `path`; returns the ModelProto."""
        return save(path, self._session if self._session is not None else self.graph, self.inputs, self.outputs)

    def __repr__(self):
        return f"<opforge.SavedGraph inputs={list(self.inputs)} outputs={list(self.outputs)}>"


def load(path):
    """Rebuilds a saved graph (a path, bytes or onnx.ModelProto) in this process.

    Ops of plugin domains need their library loaded first (load_op_library).
    Returns a SavedGraph."""
    _need_onnx()
    from opforge.saved_graph import _load
    model = _load.read_model(path)
    graph, inputs, outputs, variables = _load.build(model)
    return SavedGraph(graph, inputs, outputs, variables, model)
