"""Runs ONNX models with opforge's ops (needs the optional `onnx` package).

    >>> import opforge.onnx
    >>> outputs = opforge.onnx.run("model.onnx", {"x": batch})   # list of numpy arrays

The model is checked before anything runs (parse errors, cycles, dangling
names, unsupported element types or operators, initializer sizes) and each
node becomes calls of opforge op wrappers; exported decompositions (GELU,
LayerNorm, RMSNorm, attention) are rewritten into opforge's fused ops.
`Program.run` runs a compiled opforge Graph on the C++ engine from the second
run of a feed-shape signature on (docs/onnx_graph.md), the eager node loop
otherwise. `import_model` builds an opforge Graph from a model, when graph
mode is available. `opforge.onnx.backend` implements
`onnx.backend.base.Backend`.
"""

from collections import namedtuple

from opforge.onnx._importer import Program
from opforge.onnx._node import CONVERTERS

__all__ = ["load", "run", "import_model", "supported_operators", "ImportedModel"]

ImportedModel = namedtuple("ImportedModel", ["graph", "inputs", "outputs"])


def load(model_or_path):
    """Checks and maps a model (ModelProto, bytes or path); returns a Program with `.run(feeds)`.

    Keep the Program to run a model many times: each feed-shape signature
    compiles into a graph on its second run.
    """
    return Program(model_or_path)


def run(model_or_path, inputs):
    """Runs a model once, eagerly (to run one many times, keep `load`'s Program).
    inputs: dict name -> array, or a list in input order.

    Returns the outputs as a list of numpy arrays in the model's output order.
    """
    prog = model_or_path if isinstance(model_or_path, Program) else Program(model_or_path)
    return prog.run(inputs)


def supported_operators():
    """The ONNX operators (default domain) opforge maps, with the schema versions of each."""
    return {name: sorted(c.versions) for name, c in sorted(CONVERTERS.items())}


def import_model(model_or_path, input_shapes=None):
    """Builds an opforge Graph from a model: initializers become constants, inputs placeholders.

    input_shapes: dict name -> shape, to fix symbolic dims (e.g. a batch dim
    "N"); without it they are unknown (None) dims of the placeholder, and
    Session.run checks and re-infers shapes from each feed. A node whose
    conversion needs the size of an unknown dim raises UnimplementedError
    naming it (give input_shapes then).
    Returns ImportedModel(graph, inputs, outputs), the latter two dicts name -> tensor.
    """
    from opforge import errors
    import opforge as of
    if not hasattr(of, "Graph"):
        raise errors.UnimplementedError(
            "onnx: import_model needs opforge's graph mode, which this build lacks; use opforge.onnx.run")
    import numpy as np
    prog = model_or_path if isinstance(model_or_path, Program) else Program(model_or_path)
    graph = of.Graph()
    input_shapes = dict(input_shapes or {})
    unknown = set(input_shapes) - set(prog.inputs)
    if unknown:
        raise errors.InvalidArgumentError(f"onnx: input_shapes names {sorted(unknown)}, which are not model inputs")
    with graph.as_default():
        # One constant per initializer; its numpy value stays known, so
        # shape-like inputs (Reshape's shape, ...) are static.
        env = {name: of.constant(value, name=name) for name, value in prog.initializers.items()}
        inputs = {}
        for name, (dtype, dims) in prog.inputs.items():
            shape = input_shapes.get(name, dims)
            if shape is None:
                raise errors.InvalidArgumentError(
                    f"onnx: input {name!r} has no shape (not even a rank): give its shape in input_shapes")
            # Symbolic dims (dim_param) stay unknown (None) unless input_shapes fixes them.
            shape = [None if d is None else int(d) for d in shape]
            if dims is not None and (len(shape) != len(dims) or any(
                    d is not None and d != s for d, s in zip(dims, shape))):
                raise errors.InvalidArgumentError(
                    f"onnx: input_shapes[{name!r}] = {shape} does not fit the model's {list(dims)}")
            inputs[name] = env[name] = of.placeholder(dtype, shape=shape, name=name)
        # Nodes whose inputs are all known (initializers, Shape of static
        # dims, ...) are folded into constants (consts gains their values).
        prog.evaluate(env, consts=dict(prog.initializers))
        outputs = {}
        for name in prog.outputs:
            v = env[name]
            outputs[name] = of.constant(v, name=name) if isinstance(v, np.ndarray) else v
    return ImportedModel(graph, inputs, outputs)
