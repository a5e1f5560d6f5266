"""A saved graph's ONNX file back into an opforge Graph, with no model code.

The file is hostile until checked: it is parsed and checked (opforge.onnx's
checks: sizes, dangling names, cycles; then onnx.checker) before any node
is built, and every node is read against the registry's declaration of its
op: an unknown operator or domain, an attribute the op does not declare,
or a wrong input or output count raises an opforge error naming the node.
Ops of a plugin domain need their library loaded first (load_op_library):
a saved file never makes opforge load code.
"""

import json
import os

import numpy as np

from opforge import errors
from opforge.graph import _nodes
from opforge.saved_graph import _export, _onnx_ops


def _fail(what, node=None):
    where = f" node {node.name!r} ({node.op_type}, domain {node.domain or 'ai.onnx'!r})" if node is not None else ""
    return errors.InvalidArgumentError(f"saved_graph.load:{where}: {what}" if where else f"saved_graph.load: {what}")


def _check_text(model):
    """Every name is text: protobuf hands undecodable strings back as bytes."""
    g = model.graph
    names = [(vi.name, "a graph input or output name") for vi in list(g.input) + list(g.output)]
    names += [(t.name, "an initializer name") for t in g.initializer]
    names += [(p.key, "a metadata key") for p in model.metadata_props]
    names += [(p.value, "a metadata value") for p in model.metadata_props]
    names += [(o.domain, "an opset domain") for o in model.opset_import]
    for n in g.node:
        names += [(x, "a node's name, type, domain, input or output")
                  for x in [n.name, n.op_type, n.domain, *n.input, *n.output]]
        names += [(a.name, "an attribute name") for a in n.attribute]
    for text, what in names:
        if not isinstance(text, str):
            raise _fail(f"{what} is not valid UTF-8: {bytes(text)[:40]!r}")


def read_model(path):
    """The checked ModelProto at `path` (or bytes, or a ModelProto)."""
    import onnx
    import onnx.checker
    from opforge.onnx import _validate
    try:
        model = _validate.load(path)
    except errors.OpError as e:
        raise type(e)(f"saved_graph.load: {str(e).removeprefix('onnx: ')}") from None
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError) as e:
        what = os.fspath(path) if isinstance(path, (str, os.PathLike)) else "the model"
        raise _fail(f"{what} is not a valid ONNX model: "
                    f"{str(e).strip().splitlines()[0]}") from None
    _check_text(model)
    return model


def _metadata(model):
    meta = {p.key: p.value for p in model.metadata_props}
    try:
        libraries = json.loads(meta.get("opforge.libraries", "{}"))
        variables = json.loads(meta.get("opforge.variables", "{}"))
        if not isinstance(libraries, dict) or not isinstance(variables, dict):
            raise ValueError("not an object")
    except ValueError as e:
        raise _fail(f"the model's opforge metadata is corrupt ({e})") from None
    return meta, libraries, variables


def _decode_attrs(decl, attrs, node):
    """ONNX attribute values -> opforge attr values, typed by the op's declaration."""
    from opforge import dtypes
    from opforge.onnx import _dtypes
    by_name = {a.name: a for a in decl.attrs if not a.inferred}
    out = {}
    for name, value in attrs.items():
        a = by_name.get(name)
        if a is None:
            raise _fail(f"op {decl.name} has no attr {name!r} (declared: {sorted(by_name)})", node)
        kind = a.type.value
        try:
            if kind == "type":
                value = dtypes.as_dtype(_dtypes.to_numpy(int(value), f"attr {name!r}"))
            elif kind == "list(type)":
                value = [dtypes.as_dtype(_dtypes.to_numpy(int(v), f"attr {name!r}")) for v in value]
            elif kind == "bool":
                value = bool(value)
            elif kind == "string":
                value = value.decode("utf-8") if isinstance(value, bytes) else str(value)
            elif kind in ("list(int)", "shape"):
                value = [int(v) for v in value]
            elif kind == "list(float)":
                value = [float(v) for v in value]
        except (TypeError, ValueError) as e:
            raise _fail(f"attr {name!r} is not a {kind}: {e}", node) from None
        out[name] = value
    return out


def _resolve(node, libraries):
    """The opforge op a node of the opforge or a plugin domain names."""
    from opforge import _op_library
    domain = node.domain
    if domain == _export.OPFORGE_DOMAIN:
        decl = _find(node.op_type)
        if decl is None or decl.name in _export.library_ops():
            raise _fail(f"opforge has no built-in op {node.op_type!r}", node)
        return decl
    if domain.startswith(_export.LIBRARY_PREFIX):
        decl = _find(node.op_type)
        lib = libraries.get(domain, "its op library")
        if decl is None or _export.LIBRARY_PREFIX + decl.group != domain:
            loaded = sorted(p.rsplit("/", 1)[-1] for p in _op_library.loaded_libraries())
            raise errors.NotFoundError(
                f"saved_graph.load: node {node.name!r} uses op {node.op_type} of domain {domain!r}, which no loaded "
                f"library provides: load it first with opforge.load_op_library (the graph was saved with {lib}; "
                f"loaded now: {loaded or 'none'})")
        return decl
    raise _fail(f"domain {domain!r} is not one opforge.saved_graph writes", node)


def _find(op_type):
    try:
        return _nodes.op_def(op_type)
    except errors.NotFoundError:
        return None


def build(model):
    """(graph, inputs {name: placeholder}, outputs {name: tensor}, variables {name: (node, value, trainable)})."""
    import onnx.helper
    import opforge as of
    from opforge import dtypes
    from opforge.onnx import _validate
    meta, libraries, var_meta = _metadata(model)
    versions = {o.domain: o.version for o in model.opset_import}
    if versions.get("", versions.get("ai.onnx")) != _onnx_ops.OPSET:
        raise _fail(f"the model uses ONNX opset {versions.get('', versions.get('ai.onnx'))}; saved_graph.load reads "
                    f"what saved_graph.save writes (opset {_onnx_ops.OPSET}). For other ONNX models use "
                    "opforge.onnx.import_model")
    g = model.graph
    try:
        init = {t.name: t for t in g.initializer}
        _validate.check_graph(g, [vi.name for vi in g.input] + list(init))  # names, cycles
        order = list(g.node)  # topological (onnx.checker checked): the order it was saved in
    except errors.OpError as e:
        raise type(e)(f"saved_graph.load: {str(e).removeprefix('onnx: ')}") from None
    graph = of.Graph()
    env, values, inputs, variables = {}, {}, {}, {}

    def initializer(name):
        if name not in values:
            try:
                values[name] = _validate.tensor_to_numpy(init[name], f"initializer {name!r}")
            except errors.OpError as e:
                raise type(e)(f"saved_graph.load: {str(e).removeprefix('onnx: ')}") from None
        return values[name]

    with graph.as_default():
        for vi in g.input:
            if vi.name in init:
                continue
            try:
                dtype, dims = _validate.value_info_type(vi, "graph input")
            except errors.OpError as e:
                raise type(e)(f"saved_graph.load: {str(e).removeprefix('onnx: ')}") from None
            shape = None if dims is None else list(dims)
            inputs[vi.name] = env[vi.name] = of.placeholder(dtypes.as_dtype(dtype), shape, name=vi.name)

        def value(name, node):
            if name in env:
                return env[name]
            if name in init:
                if name in var_meta:
                    env[name] = _make_variable(graph, name, initializer(name), var_meta[name], variables)
                else:
                    env[name] = of.constant(initializer(name), name=name)
                return env[name]
            raise _fail(f"reads {name!r}, which is not defined before it", node)

        for node in order:
            if any(not n for n in node.input):
                raise _fail("optional (empty) inputs are not written by opforge", node)
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            if node.domain in ("", "ai.onnx"):
                if not _onnx_ops.known(node.op_type):
                    raise _fail(f"operator {node.op_type} is not one opforge.saved_graph writes; for other ONNX "
                                "models use opforge.onnx.import_model", node)
                n_data = {"Reshape": 1, "ReduceSum": 1}.get(node.op_type, len(node.input))
                consts = [initializer(n) if n in init else None for n in node.input[n_data:]]
                op_type, op_attrs = _onnx_ops.from_onnx(node.op_type, attrs, consts, lambda m: _fail(m, node))
                decl = _nodes.op_def(op_type)
                op_attrs = _decode_attrs(decl, {k: v for k, v in op_attrs.items() if v is not None}, node)
                if op_type in ("Sum", "Mean", "Max", "Min", "Prod") and "axis" not in op_attrs:
                    op_attrs["axis"] = None
                data = list(node.input[:n_data])
            else:
                decl = _resolve(node, libraries)
                op_type, op_attrs, data = decl.name, _decode_attrs(decl, attrs, node), list(node.input)
            if len(node.output) != len(decl.outputs):
                raise _fail(f"has {len(node.output)} outputs but op {decl.name} has {len(decl.outputs)}", node)
            flat = [value(n, node) for n in data]
            try:
                outs = _nodes.add_node(graph, op_type, flat, op_attrs, name=node.name or None)
            except errors.OpError as e:
                raise type(e)(f"saved_graph.load: node {node.name!r}: {e}") from None
            for name, t in zip(node.output, outs):
                env[name] = t
        outputs = {}
        for vi in g.output:
            outputs[vi.name] = value(vi.name, None)
    return graph, inputs, outputs, variables


def _make_variable(graph, name, value, meta, variables):
    """A variable node holding `value` (needs opforge.Variable: the state branch)."""
    import opforge as of
    if not hasattr(of, "Variable"):
        raise errors.UnimplementedError(
            f"saved_graph.load: the graph has variable {name!r}, and this opforge has no opforge.Variable")
    if not isinstance(meta, dict):
        raise _fail(f"the metadata of variable {name!r} is corrupt")
    v = of.Variable(np.array(value), name=name, trainable=bool(meta.get("trainable", True)))
    variables[name] = v
    return v
