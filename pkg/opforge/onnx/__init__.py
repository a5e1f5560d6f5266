"""Runs ONNX models with opforge's ops (needs the optional `onnx` package).

    >>> import opforge.onnx
    >>> outputs = opforge.onnx.run("model.onnx", {"x": batch})   # list of numpy arrays

The model is checked before anything runs (parse errors, cycles, dangling
names, unsupported element types or operators, initializer sizes) and each
node becomes calls of opforge op wrappers. `import_model` builds an opforge
Graph from it instead, when graph mode is available. `opforge.onnx.backend`
implements `onnx.backend.base.Backend`.
"""

from collections import namedtuple

from opforge.onnx._importer import Program
from opforge.onnx._node import CONVERTERS

__all__ = ["load", "run", "import_model", "supported_operators", "ImportedModel"]

ImportedModel = namedtuple("ImportedModel", ["graph", "inputs", "outputs"])


def load(model_or_path):
    """Checks and maps a model (ModelProto, bytes or path); returns a Program with `.run(feeds)`."""
    return Program(model_or_path)


def run(model_or_path, inputs):
    """Runs a model once, eagerly. inputs: dict name -> array, or a list in input order.

    Returns the outputs as a list of numpy arrays in the model's output order.
    """
    prog = model_or_path if isinstance(model_or_path, Program) else Program(model_or_path)
    return prog.run(inputs)


def supported_operators():
    """The ONNX operators (default domain) opforge maps, with the schema versions of each."""
    return {name: sorted(c.versions) for name, c in sorted(CONVERTERS.items())}


def import_model(model_or_path):
    """Builds an opforge Graph from a model: initializers become constants, inputs placeholders.

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
    with graph.as_default():
        # Initializers stay numpy arrays in the walk, so shape-like inputs are
        # static; ops that take them turn them into graph constants.
        env = dict(prog.initializers)
        inputs = {}
        for name, (dtype, dims) in prog.inputs.items():
            inputs[name] = env[name] = of.placeholder(
                dtype, shape=None if dims is None else [-1 if d is None else d for d in dims], name=name)
        prog.evaluate(env)
        outputs = {}
        for name in prog.outputs:
            v = env[name]
            outputs[name] = of.constant(v, name=name) if isinstance(v, np.ndarray) else v
    return ImportedModel(graph, inputs, outputs)
