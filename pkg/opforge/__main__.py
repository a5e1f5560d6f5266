"""`python -m opforge demo | ops | describe OP | check LIB | graph show PATH`: a tour, the op list,
one op in full, the CI check of a custom op library, a saved graph's nodes."""

import argparse
import sys


def _registry():
    from opforge import _opinfo  # the one reader of the registry (opforge._schema)
    return _opinfo.registry_dict()


def _signature(op):
    attrs = {a["name"]: a for a in op["attrs"]}
    params = []
    for name in op["params"]:
        attr = attrs.get(name)
        if attr is None:
            params.append(name)
        else:
            params.append(f"{name}={attr['default']!r}" if attr["has_default"] else name)
    outs = ", ".join(o["name"] for o in op["outputs"])
    return f"{op['name']}({', '.join(params)}) -> {outs}"


def cmd_ops(args):
    _load(args)
    for op in _registry()["ops"]:
        if args.group and op["group"] != args.group:
            continue
        kernels = "; ".join(f"{dev}: {', '.join(ts)}" for dev, ts in sorted(op["kernels"].items()))
        print(f"{_signature(op):60s} [{op['group']}]  {kernels}")
    return 0


def _load(args):
    """--load LIB: custom op libraries whose ops to include."""
    if args.load:
        import opforge
        for path in args.load:
            opforge.load_op_library(path)


def cmd_describe(args):
    _load(args)
    ops = {op["name"]: op for op in _registry()["ops"]}
    op = ops.get(args.op)
    if op is None:
        import difflib
        close = difflib.get_close_matches(args.op, ops, n=3, cutoff=0.6)
        close += [n for n in ops if n.lower() == args.op.lower().replace("_", "") and n not in close]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        print(f"no op named {args.op!r}{hint} (`python -m opforge ops` lists them)", file=sys.stderr)
        return 1
    print(_signature(op))
    print(f"  group: {op['group']}    declared at {op['source']['file']}:{op['source']['line']}")
    print(f"\n{op['summary']}")
    if op["description"]:
        print(f"\n{op['description']}")
    for title, args_ in (("inputs", op["inputs"]), ("outputs", op["outputs"])):
        print(f"\n{title}:")
        for a in args_:
            t = a["fixed_type"] or a["type_attr"]
            t = f"{a['number_attr']} * {t}" if a["number_attr"] else t
            print(f"  {a['name']}: {t}    {a['doc']}")
    if op["attrs"]:
        print("\nattrs:")
    for a in op["attrs"]:
        extra = []
        if a["allowed"]:
            extra.append("one of {" + ", ".join(a["allowed"]) + "}")
        if a["minimum"] is not None:
            extra.append(f">= {a['minimum']}")
        if a["has_default"]:
            extra.append(f"default {a['default']!r}" if a["default"] is not None else "default None")
        if a["inferred"]:
            extra.append("inferred from the inputs")
        print(f"  {a['name']}: {a['type']}  ({'; '.join(extra)})    {a['doc']}".rstrip())
    gradient = op["gradient"]
    print("\ngradient:")
    if gradient["none"]:
        print("  none (declared NoGradient: the outputs never require gradients)")
    elif not gradient["rules"]:
        print("  not declared (backpropagating through it raises NotFoundError)")
    for rule in gradient["rules"]:
        print(f"  {rule['spec']}")
    print(f"\ndask: {op['category']}" + ("  (opforge.dask raises UnimplementedError)"
                                         if op["category"] == "none" else ""))
    print("\nkernels:")
    for dev, types in sorted(op["kernels"].items()):
        print(f"  {dev}: {', '.join(types)}")
    return 0


def cmd_demo(_args):
    import numpy as np

    import opforge as of

    print(f"opforge {of.__version__}: {len(_registry()['ops'])} ops from C++, called on numpy data\n")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = of.add(x, 1.5)
    print("x =\n", x)
    print("of.add(x, 1.5) ->", repr(y))
    print("of.matmul(y, y, transpose_b=True) ->\n", of.matmul(y, y, transpose_b=True).numpy())
    print("of.softmax(x) ->\n", of.softmax(x).numpy().round(4))
    print("of.sum(x, axis=1) ->", of.sum(x, axis=1).numpy())

    ident = of.identity(x)
    print("\nzero copy: np.shares_memory(of.identity(x).numpy(), x) ->",
          np.shares_memory(ident.numpy(), x))

    print("\ndocstring generated from the C++ declaration (of.ops.gen_math_ops.add):")
    print("   ", of.ops.gen_math_ops.add.__doc__.strip().splitlines()[0])

    try:
        of.add(x, np.arange(3, dtype=np.int32))
    except of.errors.InvalidArgumentError as e:
        print(f"\nbad input raises {type(e).__name__}:\n    {e}")

    a, b, c = (of.tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
    (a * b * c).backward()
    print(f"\ngradients (declared beside each op in C++): d(a*b*c) at 2, 3, 4 -> "
          f"{a.grad.item()}, {b.grad.item()}, {c.grad.item()}")

    g = of.Graph()
    with g.as_default():
        p = of.placeholder(of.float32, shape=[2, 3], name="x")
        y = of.softmax(p * 2.0)
    with of.Session(g) as sess:
        out = sess.run(y, {p: x})
    print(f"graph mode: {y.name} has static shape {y.shape}; Session.run -> row sums {np.round(out.sum(axis=1), 4)}")

    print("\nmore: `python -m opforge ops`, `python -m opforge describe MatMul`")
    print("train a model: `python examples/train_digits.py` (opforge.nn + opforge.optim, pip install '.[train]' in the checkout)")
    return 0


def cmd_check(args):
    from opforge.testing.check.checker import main
    return main(args)


def cmd_graph_show(args):
    from opforge.saved_graph._show import cmd_show
    return cmd_show(args)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m opforge", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="a short tour of opforge at work").set_defaults(fn=cmd_demo)
    ops = sub.add_parser("ops", help="list every registered op: signature, group, kernels")
    ops.add_argument("--group", help="only the ops of this group, e.g. math")
    ops.set_defaults(fn=cmd_ops)
    describe = sub.add_parser("describe", help="print one op in full")
    describe.add_argument("op", help="the op's registered name, e.g. MatMul")
    describe.set_defaults(fn=cmd_describe)
    check = sub.add_parser("check", help="check a custom op library: loads, declarations, runs on generated "
                           "inputs, bad inputs, gradients (exit 1 on any failure)")
    check.add_argument("library", help="the op library (.so) to check")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--sanitize", action="store_true",
                       help="run the ops under opforge's ASan+UBSan build (.venv-asan, made by .ci/sanitize)")
    check.add_argument("--ops", metavar="A,B", help="check only these ops")
    check.add_argument("--allow-nan", metavar="A,B",
                       help="ops that may return NaN from finite inputs by design (e.g. a log)")
    check.add_argument("--timeout", type=float, default=60.0, metavar="S",
                       help="a case that runs longer is a hang: killed and reported (default 60)")
    check.set_defaults(fn=cmd_check)
    graph = sub.add_parser("graph", help="look at a saved graph (opforge.saved_graph, an ONNX file)")
    graph_sub = graph.add_subparsers(dest="graph_command", required=True)
    show = graph_sub.add_parser("show", help="print the nodes of a saved graph")
    show.add_argument("path", help="the saved graph (.onnx)")
    show.add_argument("--dot", metavar="OUT.dot",
                      help="write Graphviz DOT instead (and OUT.svg when Graphviz's `dot` is installed)")
    show.set_defaults(fn=cmd_graph_show)
    for p in (ops, describe):
        p.add_argument("--load", action="append", metavar="LIB",
                       help="load this custom op library first (opforge.load_op_library); repeatable")
    args = parser.parse_args(argv)
    return quiet_on_closed_pipe(args.fn, args)


def quiet_on_closed_pipe(fn, *args):
    """Run a CLI command; a reader that closed the pipe early (``| head``) ends
    it quietly, exit 141 (128 + SIGPIPE) as C tools do, not with a traceback."""
    import os
    try:
        code = fn(*args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # Python would flush stdout again at exit and print the error: point it at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
