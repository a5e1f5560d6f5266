"""`python -m opforge graph show PATH [--dot OUT]`: a saved graph, read by a person.

Works from the checked ONNX file alone (no op library needs loading to
look at a graph that uses one).
"""

import os
import shutil
import subprocess

import numpy as np


def _type(vi):
    tt = vi.type.tensor_type
    from opforge.onnx import _dtypes
    name = _dtypes.onnx_type_name(tt.elem_type).lower()
    if not tt.HasField("shape"):
        return f"{name}[?]"
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
    return f"{name}[{', '.join(dims)}]"


def _attr_text(a):
    import onnx.helper
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return f"{a.name}={v!r}" if isinstance(v, str) else f"{a.name}={v}"


def lines(model):
    """The text `graph show` prints."""
    g = model.graph
    init = {t.name: t for t in g.initializer}
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    out = [f"saved graph: {len(g.node)} nodes, {len(init)} initializers "
           f"({sum(int(np.prod(t.dims)) for t in init.values())} values); opsets: {opsets}"]
    out.append("inputs:")
    out += [f"  {vi.name}: {_type(vi)}" for vi in g.input if vi.name not in init]
    out.append("nodes:")
    for n in g.node:
        op = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
        args = ", ".join(f"{i}{' (init ' + 'x'.join(map(str, init[i].dims)) + ')' if i in init else ''}"
                         for i in n.input)
        attrs = f"  [{', '.join(_attr_text(a) for a in n.attribute)}]" if len(n.attribute) else ""
        out.append(f"  {n.name or '<unnamed>'}: {op}({args}) -> {', '.join(n.output)}{attrs}")
    out.append("outputs:")
    out += [f"  {vi.name}: {_type(vi)}" for vi in g.output]
    return out


def _q(s):
    text = str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def dot(model):
    """Graphviz DOT text: inputs and outputs as ovals, ops as boxes (other domains shaded)."""
    g = model.graph
    init = {t.name for t in g.initializer}
    producer = {}
    text = ["digraph saved_graph {", "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];']
    for vi in g.input:
        if vi.name not in init:
            text.append(f"  {_q('in:' + vi.name)} [shape=oval, label={_q(vi.name + chr(10) + _type(vi))}];")
            producer[vi.name] = "in:" + vi.name
    for i, n in enumerate(g.node):
        nid = f"node{i}"
        custom = n.domain not in ("", "ai.onnx")
        label = (n.name or n.op_type) + "\n" + (f"{n.domain}.{n.op_type}" if custom else n.op_type)
        style = ', style=filled, fillcolor="#ffe6b3"' if custom else ""
        text.append(f"  {nid} [shape=box, label={_q(label)}{style}];")
        for o in n.output:
            producer[o] = nid
    for i, n in enumerate(g.node):
        for name in n.input:
            if name in producer:
                text.append(f"  {_q(producer[name])} -> node{i} [label={_q(name)}, fontsize=8];")
            elif name in init:
                cid = "init:" + name
                text.append(f"  {_q(cid)} [shape=note, fontsize=8, label={_q(name)}];")
                text.append(f"  {_q(cid)} -> node{i};")
    for vi in g.output:
        text.append(f"  {_q('out:' + vi.name)} [shape=oval, label={_q(vi.name + chr(10) + _type(vi))}];")
        if vi.name in producer:
            text.append(f"  {_q(producer[vi.name])} -> {_q('out:' + vi.name)};")
    text.append("}")
    return "\n".join(text) + "\n"


def cmd_show(args):
    from opforge import errors
    from opforge.saved_graph import _load, _need_onnx
    try:
        _need_onnx()
        model = _load.read_model(args.path)
    except errors.OpError as e:
        print(f"graph show: {e}", file=__import__("sys").stderr)
        return 1
    if args.dot:
        with open(args.dot, "w") as f:
            f.write(dot(model))
        print(f"wrote {args.dot}")
        if shutil.which("dot"):
            svg = os.path.splitext(args.dot)[0] + ".svg"
            subprocess.run(["dot", "-Tsvg", args.dot, "-o", svg], check=True)
            print(f"wrote {svg}")
        else:
            print("(Graphviz `dot` is not installed: no SVG; `dot -Tsvg FILE.dot -o FILE.svg` makes one)")
        return 0
    for line in lines(model):
        print(line)
    return 0
