"""Function expansion: a node whose operator opforge does not map, but whose
ONNX schema defines it as a function of other operators (Attention,
RotaryEmbedding, SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss, ...),
is replaced by that function's body before mapping; so are calls of the
model's own local functions (onnx.inliner). Bodies may use operators that
are functions themselves, so expansion repeats a few rounds.

Context-dependent bodies (Attention's depends on its input types) get the
input types from onnx's shape inference. The renamed values take the
node's name as a prefix, so two expansions never collide.
"""

from opforge.onnx import _node

ROUNDS = 4


def _needs(node, opset):
    """True for a node the map cannot take: no converter, another version, or one its check refuses
    (Attention with a softcap: the converter fuses only what the fused op computes)."""
    if node.domain not in ("", "ai.onnx"):
        return False
    conv = _node.CONVERTERS.get(node.op_type)
    version = _node.schema_version(node.op_type, opset)
    if conv is None or version not in conv.versions:
        return True
    if conv.check is not None and getattr(conv.check, "expand_when_refused", False):
        try:
            conv.check(_node.NodeCtx(node, version, {}))
        except Exception:  # noqa: BLE001 -- refused: the function body computes it instead
            return True
    return False


def _schema(node, opset):
    import onnx.defs
    try:
        return onnx.defs.get_schema(node.op_type, opset, "")
    except (onnx.defs.SchemaError, TypeError):  # TypeError: a name that is not UTF-8 (protobuf gives bytes)
        return None


def _pick(versions, opset):
    fit = [v for v in versions if v <= opset]
    return max(fit) if fit else None


def _body(node, opset, types):
    """The FunctionProto of node's schema at this opset, or None."""
    import onnx
    schema = _schema(node, opset)
    if schema is None:
        return None, None
    v = _pick(list(schema.function_opset_versions), opset)
    if v is not None:
        data = schema.get_function_with_opset_version(v)
    else:
        v = _pick(list(schema.context_dependent_function_opset_versions), opset)
        if v is None:
            return None, None
        ins = [types.get(name) for name in node.input]
        if any(t is None for name, t in zip(node.input, ins) if name):
            return None, None
        data = schema.get_context_dependent_function_with_opset_version(
            v, node.SerializeToString(), [(t or onnx.TypeProto()).SerializeToString() for t in ins])
    fn = onnx.FunctionProto()
    fn.ParseFromString(data)
    return (fn, schema) if len(fn.node) else (None, None)


def _inline(node, fn, schema, prefix):
    import onnx
    attrs = {a.name: a for a in node.attribute}
    for name, spec in schema.attributes.items():  # defaults the body's references may need
        if name not in attrs and spec.default_value and spec.default_value.type:
            attrs[name] = spec.default_value
    names = {}
    for i, formal in enumerate(fn.input):
        names[formal] = node.input[i] if i < len(node.input) else ""
    for i, formal in enumerate(fn.output):
        if i < len(node.output) and node.output[i]:
            names[formal] = node.output[i]

    def rename(v):
        return "" if v == "" else names.get(v, prefix + v)

    out = []
    for inner in fn.node:
        n = onnx.NodeProto()
        n.CopyFrom(inner)
        del n.input[:], n.output[:], n.attribute[:]
        n.input.extend(rename(v) for v in inner.input)
        n.output.extend(rename(v) for v in inner.output)
        n.name = prefix + (inner.name or inner.op_type)
        for a in inner.attribute:
            if a.ref_attr_name:
                if a.ref_attr_name in attrs:
                    b = onnx.AttributeProto()
                    b.CopyFrom(attrs[a.ref_attr_name])
                    b.name = a.name
                    n.attribute.append(b)
            elif a.type in (5, 10):  # a body reads the function's values by their renamed names
                b = onnx.AttributeProto()
                b.CopyFrom(a)
                for g in [b.g] if a.type == 5 else b.graphs:
                    _rename_outer(g, rename, set())
                n.attribute.append(b)
            else:
                n.attribute.append(a)
        out.append(n)
    return out


def _rename_outer(graph, rename, local):
    """Renames, in place, the names graph (a body) reads from outside itself and `local`."""
    local = local | {v.name for v in graph.input} | {t.name for t in graph.initializer}
    local |= {o for node in graph.node for o in node.output if o}
    for node in graph.node:
        for i, v in enumerate(node.input):
            if v and v not in local:
                node.input[i] = rename(v)
        for a in node.attribute:
            for g in [a.g] if a.type == 5 else a.graphs if a.type == 10 else []:
                _rename_outer(g, rename, local)
    for vi in graph.output:
        if vi.name not in local:
            vi.name = rename(vi.name)


def _value_types(model):
    import onnx
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 -- no types: context-dependent bodies are then not expanded
        return {}
    g = inferred.graph
    types = {vi.name: vi.type for vi in list(g.input) + list(g.value_info) + list(g.output)}
    for t in g.initializer:
        tp = onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims))
        types.setdefault(t.name, tp)
    return types


def expand(model, opset):
    """The model with local functions inlined and unmapped schema functions expanded (a copy if changed)."""
    import onnx
    if len(model.functions):
        from onnx import inliner
        model = inliner.inline_local_functions(model)
    for r in range(ROUNDS):
        if not any(_needs(n, opset) for n in model.graph.node):
            break
        types = None
        nodes, changed = [], False
        for i, node in enumerate(model.graph.node):
            if not _needs(node, opset):
                nodes.append(node)
                continue
            if types is None:
                types = _value_types(model)
            fn, schema = _body(node, opset, types)
            if fn is None:
                nodes.append(node)
                continue
            nodes.extend(_inline(node, fn, schema, f"{node.name or node.op_type}__f{r}_{i}__"))
            changed = True
        if not changed:
            break
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        del copy.graph.node[:]
        copy.graph.node.extend(nodes)
        model = copy
    _check_bodies_mapped(model.graph)
    return _mark_opset(model, opset)


def _unmapped(graph, where_in=""):
    """(operator key, node description) of every unmapped node of graph and of its bodies."""
    from opforge.onnx import _validate
    for i, node in enumerate(graph.node):
        where = _validate.describe(node, i) + where_in
        default = node.domain in ("", "ai.onnx")
        if not default or node.op_type not in _node.CONVERTERS:
            yield (node.op_type if default else f"{node.op_type} (domain {node.domain!r})"), where
        for a in node.attribute:
            for g in [a.g] if a.type == 5 else a.graphs if a.type == 10 else []:
                yield from _unmapped(g, f" in {a.name} of {_validate.describe(node, i)}{where_in}")


def _check_bodies_mapped(graph):
    """Where bodies (If/Loop/Scan) hold unmapped operators, one UnimplementedError names every
    unmapped operator of the model, nested or not, with counts and a node each (as the
    importer's check of the main graph does)."""
    from opforge import errors
    found = list(_unmapped(graph))
    if not any(" in " in where for _, where in found):
        return  # the importer's own check reports the main graph's
    missing = {}
    for key, where in found:
        entry = missing.setdefault(key, [0, where])
        entry[0] += 1
    listed = "; ".join(f"{key} x{count} (e.g. node {where})" for key, (count, where) in missing.items())
    err = errors.UnimplementedError(
        f"onnx: {len(missing)} operators used by {len(found)} nodes are not supported by opforge: {listed}")
    err.unsupported_operators = {key: (count, where) for key, (count, where) in missing.items()}
    raise err


OPSET_ATTR = "_opforge_opset"  # on If/Loop/Scan: the opset their bodies' nodes are read at


def _mark_opset(model, opset):
    """A copy whose control-flow nodes (at any depth) carry the model's opset, which their
    converters need to map the nodes of their bodies; the model itself if it has none."""
    import onnx

    def has_bodies(graph):
        return any(a.type in (5, 10) for node in graph.node for a in node.attribute)

    def mark(graph):
        for node in graph.node:
            bodies = [a for a in node.attribute if a.type in (5, 10)]
            if bodies and not any(a.name == OPSET_ATTR for a in node.attribute):
                node.attribute.append(onnx.helper.make_attribute(OPSET_ATTR, opset))
            for a in bodies:
                for g in [a.g] if a.type == 5 else a.graphs:
                    mark(g)

    if not has_bodies(model.graph):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    mark(copy.graph)
    return copy
