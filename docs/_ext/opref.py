"""The op reference (docs/_generated/ops.md), rendered at docs build time from
the installed registry: one entry per op with its signature, dtypes, attrs
(defaults, constraints), shape rule, gradient rule, the ONNX operators whose
converters call it, and its kernels by device and dtype.

Rendered from what the build's `opforge` reports, so it cannot go stale; not a
codegen target (the build already checks the registry against generated/).
`python docs/_ext/opref.py` prints the page.
"""
from __future__ import annotations

import json
import pathlib
import re
import types

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = pathlib.Path(__file__).resolve().parents[1] / "_generated" / "ops.md"

# The shared shape functions of cpp/include/opforge/shape_inference.h, in words.
SHARED_SHAPES = {
    "Unchanged": "the output has the first input's shape",
    "BroadcastInputs": "the inputs' shapes broadcast together (numpy's rules)",
}


def registry() -> dict:
    from opforge import _pywrap_internal
    return json.loads(_pywrap_internal.registry_json())


def onnx_operators() -> dict[str, list[str]]:
    """opforge op python name -> the ONNX operators whose converter may call it.

    Walks each converter's code: names it reads from ``opforge.ops``, generated
    wrappers in its closure, and module-level helpers it calls, recursively.
    An over-approximation (both branches of an if count); {} without onnx.
    """
    try:
        import opforge.onnx  # noqa: F401
        from opforge.onnx._node import CONVERTERS
    except ImportError:
        return {}
    import opforge.ops as P
    wrappers = {n for n in dir(P) if callable(getattr(P, n))} | set(P.raw_ops.__all__)

    def calls(fn, seen) -> set[str]:
        if not isinstance(fn, types.FunctionType) or fn in seen:
            return set()
        seen.add(fn)
        mod = getattr(fn, "__module__", "") or ""
        if mod.startswith("opforge.ops.gen_"):
            return {fn.__name__}
        found = set()
        codes = [fn.__code__]
        while codes:
            code = codes.pop()
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
            for name in code.co_names:
                g = fn.__globals__.get(name)
                if isinstance(g, types.FunctionType):
                    found |= calls(g, seen)
                elif name in wrappers and fn.__globals__.get("P") is P:
                    found.add(name)
        for cell in fn.__closure__ or ():
            try:
                found |= calls(cell.cell_contents, seen)
            except ValueError:  # an empty cell
                pass
        return found

    served: dict[str, list[str]] = {}
    for onnx_op, conv in sorted(CONVERTERS.items()):
        for name in calls(conv.fn, set()):
            served.setdefault(name, []).append(onnx_op)
    return served


def shape_rule(op: dict) -> str:
    """The shape function named in the op's declaration, from its source."""
    src = ROOT / op["source"]["file"]
    if not src.exists():
        return "not available (the declaration's source is not in this tree)"
    lines = src.read_text().splitlines()
    decl = "\n".join(lines[op["source"]["line"] - 1:op["source"]["line"] + 40])
    decl = decl.split("REGISTER_OP(", 2)[1] if decl.count("REGISTER_OP(") > 1 else decl
    m = re.search(r"\.SetShapeFn\(\s*(?:shape_fns::)?([A-Za-z_][A-Za-z0-9_]*)", decl)
    if not m:
        return "not declared"
    name = m.group(1)
    if name in SHARED_SHAPES:
        return f"`{name}`: {SHARED_SHAPES[name]}"
    # The comment just above the function's definition, if it has one.
    text = src.read_text().splitlines()
    for i, line in enumerate(text):
        if re.match(rf"\s*(static\s+)?Status\s+{name}\s*\(", line):
            comment = []
            j = i - 1
            while j >= 0 and text[j].strip().startswith("//"):
                comment.insert(0, text[j].strip().lstrip("/").strip())
                j -= 1
            where = f"`{name}` in `{op['source']['file']}`"
            return f"{where}: {' '.join(comment)}" if comment else where
    return f"`{name}` in `{op['source']['file']}`"


def signature(op: dict) -> str:
    attrs = {a["name"]: a for a in op["attrs"]}
    params = []
    for name in op["params"]:
        a = attrs.get(name)
        params.append(name if a is None or not a["has_default"] else f"{name}={a['default']!r}")
    return f"{op['name']}({', '.join(params)}) -> {', '.join(o['name'] for o in op['outputs'])}"


def _python_name(op: dict) -> str:
    import opforge.ops as P
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z])(?=[a-z])", r"_\1\2", op["name"]).lower()
    if snake in P.raw_ops.__all__:
        return f"opforge.raw_ops.{snake}"
    return f"opforge.{snake}" if snake in P.__all__ else f"opforge.ops.gen_{op['group']}_ops.{snake}"


def _type_of(arg: dict, type_attrs: dict) -> str:
    t = arg["fixed_type"] or arg["type_attr"]
    allowed = type_attrs.get(arg["type_attr"])
    if allowed:
        t += " in {" + ", ".join(allowed) + "}"
    return f"list of {arg['number_attr']} x {t}" if arg["number_attr"] else t


def _attr_line(a: dict) -> str:
    extra = []
    if a["allowed"]:
        extra.append("one of {" + ", ".join(map(str, a["allowed"])) + "}")
    if a["minimum"] is not None:
        extra.append(f">= {a['minimum']}")
    if a["has_default"]:
        extra.append(f"default `{a['default']!r}`")
    if a["inferred"]:
        extra.append("inferred from the inputs")
    doc = f": {a['doc']}" if a["doc"] else ""
    return f"- `{a['name']}`: {a['type']} ({'; '.join(extra) or 'required'}){doc}"


def render_op(op: dict, served: dict[str, list[str]]) -> list[str]:
    type_attrs = {a["name"]: a["allowed"] for a in op["attrs"] if a["type"] == "type"}
    py = _python_name(op)
    out = [f"### {op['name']}", "", f"`{py}`: {op['summary']}", "", "```text", signature(op), "```", ""]
    if op["description"]:
        out += [op["description"], ""]
    for title, args in (("Inputs", op["inputs"]), ("Outputs", op["outputs"])):
        if args:
            out.append(f"{title}:")
            out += [f"- `{a['name']}`: {_type_of(a, type_attrs)}" + (f": {a['doc']}" if a["doc"] else "")
                    for a in args]
            out.append("")
    attrs = [a for a in op["attrs"] if not (a["type"] == "type" and a["inferred"])]
    if attrs:
        out += ["Attrs:"] + [_attr_line(a) for a in attrs] + [""]
    out += [f"Shape: {shape_rule(op)}", ""]
    grad = op["gradient"]
    if grad["none"]:
        out += ["Gradient: none (`NoGradient`)", ""]
    elif not grad["rules"]:
        out += ["Gradient: not declared", ""]
    else:
        out += ["Gradient:", "", "```text"] + [r["spec"] for r in grad["rules"]] + ["```", ""]
    onnx_ops = served.get(py.rsplit(".", 1)[1], [])
    out += ["ONNX: " + (", ".join(onnx_ops) if onnx_ops else "no importer converter calls it"), ""]
    kernels = "; ".join(f"{dev}: {', '.join(ts)}" for dev, ts in sorted(op["kernels"].items()))
    out += [f"Kernels: {kernels or 'none'}", "",
            f"Declared at `{op['source']['file']}:{op['source']['line']}`.", ""]
    return out


def render() -> str:
    reg = registry()
    served = onnx_operators()
    ops = sorted(reg["ops"], key=lambda o: (o["group"], o["name"]))
    out = ["# Op reference", "",
           "Rendered when these docs were built, from the registry of the installed opforge "
           f"({len(ops)} ops; `python -m opforge describe OP` prints the same for one op, custom "
           "libraries included with `--load LIB`). Ops users call are in `opforge.*`; backward ops "
           "and optimizer kernels in `opforge.raw_ops`; every op is also in its "
           "`opforge.ops.gen_<group>_ops` module.", ""]
    for group in sorted({o["group"] for o in ops}):
        out += [f"## Group `{group}`", ""]
        for op in (o for o in ops if o["group"] == group):
            out += render_op(op, served)
    return "\n".join(out).rstrip() + "\n"


def write(_app=None) -> None:
    OUT.parent.mkdir(exist_ok=True)
    text = render()
    if not OUT.exists() or OUT.read_text() != text:
        OUT.write_text(text)


def setup(app):
    app.connect("builder-inited", write)
    return {"parallel_read_safe": True, "version": "1"}


if __name__ == "__main__":
    print(render(), end="")
