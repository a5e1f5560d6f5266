"""The ONNX backend suite's node cases, counted for opforge and onnxruntime in one run.

    python -m bench.onnx_suite            # counts, and the gap by operator
    python -m bench.onnx_suite --json out.json

Every node case onnx ships for the default domain runs through
opforge.onnx.backend and through onnxruntime's CPU provider, each compared
with the case's expected outputs by onnx's own Runner.assert_similar_outputs
(the case's tolerances). A case passes for an engine when it loads, runs and
matches. Printed: both counts, the ratio, and the operators of the cases
onnxruntime passes and opforge does not (with counts and first reason).
"""

import argparse
import collections
import json
import sys
import warnings


def _cases():
    from onnx.backend.test.loader import load_model_tests
    for case in load_model_tests(kind="node"):
        model = case.model
        if model is None:
            import os
            import onnx
            model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
        if all(n.domain in ("", "ai.onnx") for n in model.graph.node):
            yield case, model


def _data_sets(case):
    sys.path.insert(0, "tests")
    from test_onnx_backend import _data_sets as data_sets  # the suite's own reader of .pb data sets
    return data_sets(case)


def _run_opforge(model, inputs):
    from opforge.onnx import backend
    return list(backend.prepare(model).run(inputs))


def _run_ort(model, inputs):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, dict(zip(names, inputs)))


def _passes(fn, case, model):
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.runner import Runner
    try:
        for inputs, expected in _data_sets(case):
            expected = [numpy_helper.to_array(e) if isinstance(e, onnx.TensorProto) else e for e in expected]
            Runner.assert_similar_outputs(expected, fn(model, inputs), rtol=case.rtol, atol=case.atol)
    except Exception as e:  # noqa: BLE001 -- any failure is a failed case, its reason kept
        return False, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    return True, ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the counts and per-case results here")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    results = {}
    for case, model in _cases():
        op = model.graph.node[0].op_type if len(model.graph.node) == 1 else "+".join(
            sorted({n.op_type for n in model.graph.node}))[:60]
        ours, why = _passes(_run_opforge, case, model)
        ort_ok, ort_why = _passes(_run_ort, case, model)
        results[case.name] = {"op": op, "opforge": ours, "onnxruntime": ort_ok, "why": why, "ort_why": ort_why}
    total = len(results)
    n_ours = sum(r["opforge"] for r in results.values())
    n_ort = sum(r["onnxruntime"] for r in results.values())
    both = sum(r["opforge"] and r["onnxruntime"] for r in results.values())
    print(f"node cases (default domain): {total}")
    print(f"  opforge passes     {n_ours}")
    print(f"  onnxruntime passes {n_ort}")
    print(f"  both               {both}  (opforge passes {both / max(n_ort, 1):.1%} of onnxruntime's)")
    gap = collections.defaultdict(list)
    for name, r in results.items():
        if r["onnxruntime"] and not r["opforge"]:
            gap[r["op"]].append((name, r["why"]))
    print("cases onnxruntime passes and opforge does not, by operator:")
    for op, items in sorted(gap.items(), key=lambda kv: -len(kv[1])):
        print(f"  {op:<28} {len(items):>3}  e.g. {items[0][0]}: {items[0][1][:110]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"total": total, "opforge": n_ours, "onnxruntime": n_ort, "both": both,
                       "cases": results}, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
