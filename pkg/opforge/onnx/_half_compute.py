"""float16 convolutional models computed in float32 between the graph's edges.

A float16 Conv runs as widen, float32 kernel, round (half precision has no
faster CPU convolution here), and so does every elementwise op, pool and
norm between two convolutions: each op widens its inputs and rounds its
output again. For a model with float16 Convs this pass rewrites the ONNX
graph once, at import, to compute in float32: float16 initializers and
constants become float32, Cast/dtype attributes that say float16 say
float32, and the float16 graph inputs and outputs get one Cast each. The
caller still feeds and gets float16; in between nothing is rounded to
float16 (results are as accurate as float32 math, within float16's 1e-3 of
the per-op rounding). onnxruntime's CPU provider does the same with its
inserted Casts around float16 nodes that have no float16 kernel.

Graphs with subgraphs (If, Loop, Scan) are left as they are.

The float16 initializers stay float16 in the rewritten proto (marked by a
metadata entry) and are widened one by one as the importer turns them into
arrays (widen_initializers): widening them in the proto first held the
float16 copy, the float32 proto and the float32 arrays at once (ResNet-18:
190 MB over the process at import against 141 MB for the float32 model).
"""
import numpy as np

# TensorProto.FLOAT16 and FLOAT (onnx is imported only when a model is: `import opforge.onnx` stays lean)
_F16, _F32 = 10, 1
_DTYPE_ATTRS = {"to", "dtype"}  # Cast's and the dtype attrs of RandomNormal, EyeLike, ...
_MARK = "opforge.half_compute"  # metadata key of a rewritten model: its float16 initializers are widened on import


def _has_half_conv(graph, half_names):
    """A Conv whose input or weight is declared float16."""
    return any(n.op_type in ("Conv", "ConvTranspose") and any(i in half_names for i in n.input[:2])
               for n in graph.node)


def _half_values(graph):
    """Names of the float16 values the graph declares (inputs, initializers, value_info, outputs)."""
    names = {t.name for t in graph.initializer if t.data_type == _F16}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        if vi.type.tensor_type.elem_type == _F16:
            names.add(vi.name)
    return names


def _widen_tensor(t):
    from onnx import numpy_helper
    if t.data_type == _F16:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))


def compute_in_float32(model):
    """The model rewritten to compute in float32 where it has float16 Convs; else the model unchanged."""
    import onnx
    graph = model.graph
    for node in graph.node:
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            return model
    half = _half_values(graph)
    if not _has_half_conv(graph, half):
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    m.metadata_props.add(key=_MARK, value="float32")
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                _widen_tensor(a.t)
            elif a.type == onnx.AttributeProto.INT and a.name in _DTYPE_ATTRS and a.i == _F16:
                a.i = _F32
    for vi in g.value_info:
        if vi.type.tensor_type.elem_type == _F16:
            vi.type.tensor_type.elem_type = _F32
    inits = {t.name for t in g.initializer}
    head, renames = [], {}
    for vi in g.input:
        if vi.type.tensor_type.elem_type == _F16 and vi.name not in inits:
            wide = vi.name + "__f32"
            renames[vi.name] = wide
            head.append(onnx.helper.make_node("Cast", [vi.name], [wide], to=_F32, name=wide + "_cast"))
    for node in g.node:
        for k, name in enumerate(node.input):
            if name in renames:
                node.input[k] = renames[name]
    tail = []
    for vi in g.output:
        if vi.type.tensor_type.elem_type != _F16:
            continue
        wide = vi.name + "__f32"
        for node in g.node:
            for k, name in enumerate(node.output):
                if name == vi.name:
                    node.output[k] = wide
            for k, name in enumerate(node.input):
                if name == vi.name:
                    node.input[k] = wide
        if vi.name in renames:  # a graph input that is also an output: its Cast's result
            continue
        tail.append(onnx.helper.make_node("Cast", [wide], [vi.name], to=_F16, name=vi.name + "_cast"))
    nodes = head + list(g.node) + tail
    del g.node[:]
    g.node.extend(nodes)
    return m


def widen_initializers(model, arrays):
    """The float16 arrays of `arrays` (name -> ndarray, the initializers of `model`) widened to float32, in
    place, when compute_in_float32 rewrote `model`."""
    if not any(p.key == _MARK for p in model.metadata_props):
        return
    for name, v in arrays.items():
        if v.dtype == np.float16:
            arrays[name] = v.astype(np.float32)
