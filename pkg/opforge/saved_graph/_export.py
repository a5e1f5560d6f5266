"""An opforge graph, pruned to a signature, as an ONNX ModelProto.

Nodes with an ONNX equivalent (_onnx_ops) are written in the default
domain, so a graph made only of those runs in onnxruntime unchanged; the
other built-in ops in the ``opforge`` domain, and ops of a library loaded
with load_op_library in that library's domain, ``opforge.lib.<group>``.
Their attrs are ONNX attributes, typed by the op's declaration (bool and
type attrs are ints, as ONNX's own ``Cast.to`` is). Constants are
initializers; variables too, listed in the model's metadata so that load
makes them variables again.
"""

import json

import numpy as np

from opforge import _op_library
from opforge import _pywrap_internal as _pw
from opforge import errors
from opforge.graph import _nodes
from opforge.saved_graph import _onnx_ops

OPFORGE_DOMAIN = "opforge"
LIBRARY_PREFIX = "opforge.lib."
FORMAT = "1"


def elem_type(dtype):
    """ONNX element type of an opforge dtype."""
    import onnx.helper
    return onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype.as_numpy_dtype))


def library_ops():
    """op name -> (domain, library file name) for the ops of loaded libraries."""
    out = {}
    for path, module in _op_library.loaded_libraries().items():
        for name in module.OP_NAMES:
            out[name] = (LIBRARY_PREFIX + _nodes.op_def(name).group, path.rsplit("/", 1)[-1])
    return out


def _attribute(name, value, attr_type):
    """An ONNX AttributeProto for an opforge attr value (None: left out)."""
    import onnx.helper
    if value is None:
        return None
    kind = attr_type.value
    if kind == "type":
        value = elem_type(value)
    elif kind == "list(type)":
        value = [elem_type(v) for v in value]
    elif kind == "bool":
        value = int(bool(value))
    elif kind in ("list(int)", "shape"):
        value = [int(v) for v in value]
    elif kind == "list(float)":
        value = [float(v) for v in value]
    return onnx.helper.make_attribute(name, value, attr_type=_ONNX_KIND[kind])


_ONNX_KIND = {"int": 2, "float": 1, "bool": 2, "string": 3, "type": 2, "shape": 7, "list(int)": 7,
              "list(float)": 6, "list(type)": 7}


def _value_info(name, dtype, shape):
    import onnx.helper
    # Unknown rank: inputs are refused (to_model); an output of unknown rank
    # has none to write, so its dims are left unnamed but its rank is not (onnx.checker wants a shape).
    shape = shape if shape is not None else []
    return onnx.helper.make_tensor_value_info(name, elem_type(dtype), list(shape))  # None: an unknown dim


def _signature(what, given, kind):
    """{name: SymbolicTensor} from a dict, a list or one tensor."""
    from opforge.graph import SymbolicTensor
    if isinstance(given, SymbolicTensor):
        given = [given]
    if isinstance(given, dict):
        items = list(given.items())
    elif isinstance(given, (list, tuple)):
        items = [((t.op.name if kind == "inputs" else t.name.replace(":0", "")) if isinstance(t, SymbolicTensor)
                  else None, t) for t in given]
    else:
        raise errors.InvalidArgumentError(f"saved_graph.save: {kind} must be a dict name -> tensor, a list of "
                                          f"tensors or one tensor, not {type(given).__name__}")
    out = {}
    for name, t in items:
        if not isinstance(t, SymbolicTensor) or t.graph is not what:
            raise errors.InvalidArgumentError(f"saved_graph.save: {kind} entry {name!r} is not a tensor of the graph")
        if not isinstance(name, str) or not name:
            raise errors.InvalidArgumentError(f"saved_graph.save: {kind} names must be non-empty strings, got {name!r}")
        if name in out:
            raise errors.InvalidArgumentError(f"saved_graph.save: {kind} name {name!r} is used twice")
        out[name] = t
    return out


def to_model(graph, inputs, outputs, variables=None, producer_note=""):
    """The ModelProto of `graph` pruned to what `outputs` need from `inputs`.

    variables: a function node id -> (name, value ndarray, trainable) for
    the variable reads (ReadVariable nodes), written as initializers."""
    import onnx
    import onnx.helper
    import onnx.numpy_helper
    inputs = _signature(graph, inputs, "inputs")
    outputs = _signature(graph, outputs, "outputs")
    for name, t in inputs.items():
        if t.op.type != "Placeholder":
            raise errors.InvalidArgumentError(
                f"saved_graph.save: input {name!r} is '{t.name}', a {t.op.type} node; inputs must be placeholders")
        if t.shape is None:
            raise errors.InvalidArgumentError(
                f"saved_graph.save: input {name!r} has unknown rank, and an ONNX graph input needs one: give its "
                "placeholder a shape (None for each unknown dim, e.g. [None, 784])")
    if not outputs:
        raise errors.InvalidArgumentError("saved_graph.save: no outputs given")
    for name, t in outputs.items():
        if name in inputs and inputs[name] is not t:
            raise errors.InvalidArgumentError(f"saved_graph.save: {name!r} names both an input and an output")
    h = graph._handle
    input_of = {t.op._id: name for name, t in inputs.items()}

    # Prune: the nodes the outputs need, in id order (ids are topological).
    needed, stack = set(), [t.op._id for t in outputs.values()]
    while stack:
        n = stack.pop()
        if n in needed:
            continue
        needed.add(n)
        stack.extend(src for src, _ in _pw.graph_node_inputs(h, n))
    libs = library_ops()
    value_name, nodes, initializers, graph_inputs, domains = {}, [], [], [], {}
    for name, t in inputs.items():
        value_name[(t.op._id, 0)] = name
        graph_inputs.append(_value_info(name, t.dtype, t.shape))
    # Outputs name their producer's value directly when they can (one name per value).
    renamed = {}
    for name, t in outputs.items():
        if t._ref() not in renamed and t.op._id not in input_of and t.op.type not in ("Const", "ReadVariable"):
            renamed[t._ref()] = name
    var_meta = {}
    for n in sorted(needed):
        op_type, node_name, where, n_out = _pw.graph_node(h, n)
        if op_type == "ReadVariable":  # a variable: its value now, as an initializer named after it
            if variables is None:
                raise errors.InvalidArgumentError(f"saved_graph.save: node '{node_name}' reads a variable")
            vname, value, trainable = variables(n)
            value_name[(n, 0)] = vname
            if vname not in var_meta:
                initializers.append(onnx.numpy_helper.from_array(np.ascontiguousarray(value), vname))
                var_meta[vname] = {"trainable": bool(trainable)}
            continue
        if op_type == "Placeholder":
            if n not in input_of:
                raise errors.InvalidArgumentError(
                    f"saved_graph.save: the outputs need placeholder '{node_name}' (built at {where}), which is "
                    "not among the inputs")
            continue
        if op_type == "Const":
            value = _pw.graph_node_attrs(h, n)["value"].numpy()
            value_name[(n, 0)] = node_name
            initializers.append(onnx.numpy_helper.from_array(np.ascontiguousarray(value), node_name))
            continue
        op = graph._op(n)
        if op_type == "PythonFunction":
            raise errors.UnimplementedError(
                f"saved_graph.save: node '{node_name}' (built at {where}) calls a Python function "
                "(opforge.autograd.Function), which a saved graph cannot hold")
        attrs = _nodes.all_attrs(op)
        in_names = [value_name[ref] for ref in _pw.graph_node_inputs(h, n)]
        out_names = [renamed.get((n, i), f"{node_name}:{i}") for i in range(n_out)]
        for i, o in enumerate(out_names):
            value_name[(n, i)] = o
        mapped = None if op_type in libs else _onnx_ops.to_onnx(op_type, attrs)
        if mapped is not None:
            for j, c in enumerate(mapped.const_inputs):
                cname = f"{node_name}/{mapped.op_type}_const{j}"
                initializers.append(onnx.numpy_helper.from_array(c, cname))
                in_names.append(cname)
            onnx_attrs = {k: (elem_type(v) if k == "to" else v) for k, v in mapped.attrs.items()}
            nodes.append(onnx.helper.make_node(mapped.op_type, in_names, out_names, name=node_name,
                                               doc_string=where, **onnx_attrs))
            continue
        domain = libs[op_type][0] if op_type in libs else OPFORGE_DOMAIN
        domains[domain] = libs[op_type][1] if op_type in libs else None
        decl = _nodes.op_def(op_type)
        node = onnx.helper.make_node(op_type, in_names, out_names, name=node_name, domain=domain,
                                     doc_string=where)
        for a in decl.attrs:
            if a.inferred:
                continue
            proto = _attribute(a.name, attrs[a.name], a.type)
            if proto is not None:
                node.attribute.append(proto)
        nodes.append(node)
    graph_outputs = []
    for name, t in outputs.items():
        src = value_name[t._ref()]
        if src != name:
            nodes.append(onnx.helper.make_node("Identity", [src], [name], name=f"{name}/signature"))
        graph_outputs.append(_value_info(name, t.dtype, t.shape))
    g = onnx.helper.make_graph(nodes, "opforge_saved_graph", graph_inputs, graph_outputs, initializers)
    opsets = [onnx.helper.make_opsetid("", _onnx_ops.OPSET)]
    opsets += [onnx.helper.make_opsetid(d, 1) for d in sorted(domains)]
    model = onnx.helper.make_model(g, opset_imports=opsets, producer_name="opforge",
                                   producer_version=_version())
    model.ir_version = min(model.ir_version, 8)  # onnxruntime releases of the last years read 8
    meta = {"opforge.format": FORMAT,
            "opforge.libraries": json.dumps({d: f for d, f in sorted(domains.items()) if f}),
            "opforge.variables": json.dumps(var_meta)}
    if producer_note:
        meta["opforge.note"] = producer_note
    onnx.helper.set_model_props(model, meta)
    onnx.checker.check_model(model)
    return model


def _version():
    import opforge
    return opforge.__version__
