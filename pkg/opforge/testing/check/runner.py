"""The checker's child process: loads one op library and runs its ops' cases.

``python -m opforge.testing.check.runner LIB FD [--allow-nan A,B] OP...``
writes one JSON event per line to file descriptor FD: ``loaded`` (the ops'
registry entries) or ``load_error``; ``begin`` before every case that runs
library code, so that when a case crashes the process the parent knows which
op and case it was; ``result`` after each check of an op. The parent
(checker.py) restarts it past an op that crashed.
"""
from __future__ import annotations

import json
import os
import sys
import traceback

import numpy as np

import opforge as of
from opforge import _pywrap_internal as pw
from opforge.testing.check import plan as P

MAX_FINDINGS = 5  # per op and check: the first few say enough


class Events:
    def __init__(self, fd: int):
        self.out = os.fdopen(fd, "w", buffering=1)

    def send(self, **event):
        self.out.write(json.dumps(event) + "\n")
        self.out.flush()


class OpRun:
    """Runs the checks of one op, sending a result per check."""

    def __init__(self, events: Events, module, op: dict, allow_nan: bool):
        self.events = events
        self.plan = P.OpPlan(op)
        self.allow_nan = allow_nan
        self.wrapper = getattr(module, _python_name(op["name"]))

    # --- plumbing

    def begin(self, check: str, case: str):
        self.events.send(ev="begin", op=self.plan.name, check=check, case=case)

    def result(self, check: str, cases: int, findings: list[str], note: str = ""):
        status = "fail" if findings else ("ok" if cases else "skip")
        self.events.send(ev="result", op=self.plan.name, check=check, status=status, cases=cases,
                         findings=findings[:MAX_FINDINGS], more=max(0, len(findings) - MAX_FINDINGS), note=note)

    def call(self, inputs: list, attrs: dict):
        names = [a["name"] for a in self.plan.inputs]
        return self.wrapper(**dict(zip(names, inputs)), **attrs)

    def infer(self, dtypes: list[str], shape, attrs: dict, strict: bool = False):
        """(output dtypes, output shapes), or None if the shape function rejects the inputs.
        ``shape``: every input's, or a list with one per input."""
        shapes = shape if isinstance(shape, list) else [shape] * len(dtypes)
        spec = []
        for arg, t, s in zip(self.plan.inputs, dtypes, shapes):
            one = (of.as_dtype(t), s)
            spec.append([one] * P.LIST_LEN if arg["number_attr"] else one)
        try:
            types, shapes, _ = pw.infer(self.plan.name, tuple(spec), attrs)
        except of.errors.InternalError:
            if strict:
                raise  # a bug in the shape function, not a refusal: run_valid reports it
            return None
        except of.errors.OpError:
            return None
        return [str(t.name) for t in types], [tuple(s) for s in shapes]

    def arrays(self, dtypes: list[str], shape: tuple, n: int) -> list[list]:
        """n sets of finite input values, one array (or list) per input."""
        return [sets[0] for sets in self.arrays_per_shape(dtypes, [shape], n)]

    def arrays_per_shape(self, dtypes: list[str], shapes: list[tuple], n: int) -> list[list[list]]:
        """n draws of [one input set per shape]: one hypothesis run for all shapes."""
        from hypothesis import strategies as st
        from hypothesis.extra import numpy as hnp

        from opforge.testing.check import inputs as I

        def one(t, shape):
            return hnp.arrays(np.dtype(t), shape, elements=I.elements(t, small=True, finite=True))

        def input_set(shape):
            return st.tuples(*[st.lists(one(t, shape), min_size=P.LIST_LEN, max_size=P.LIST_LEN)
                               if arg["number_attr"] else one(t, shape)
                               for arg, t in zip(self.plan.inputs, dtypes)]).map(list)
        return [list(v) for v in I.examples(st.tuples(*[input_set(s) for s in shapes]), n)]

    # --- the checks

    def run_valid(self):
        findings, cases, accepted = [], 0, set()
        for types in self.plan.dtype_choices():
            if self.plan.kernel_attr() and types[self.plan.kernel_attr()] in self.plan.kernel_gap():
                continue  # listed by the declaration check
            dtypes = [self.plan.input_dtype(a, types) for a in self.plan.inputs]
            attrs = self.plan.attr_values(types)
            wants = {}
            for shape in P.SHAPES:
                try:
                    want = self.infer(dtypes, shape, attrs, strict=True)
                except of.errors.InternalError as e:
                    findings.append(f"{self._case(dtypes, shape, attrs)}: the shape function raised "
                                    f"InternalError ({e})")
                    continue
                if want is not None:
                    wants[shape] = want
            accepted.update(wants)
            if not wants:
                continue
            for draw in self.arrays_per_shape(dtypes, list(wants), 2):
                for (shape, want), values in zip(wants.items(), draw):
                    case = self._case(dtypes, shape, attrs)
                    cases += 1
                    self.begin("run", case)
                    findings += self.check_outputs(case, values, attrs, want)
        note = "shapes accepted: " + ", ".join(str(s) for s in P.SHAPES if s in accepted) if accepted else \
            "the shape function accepted none of the generated shapes"
        self.result("run", cases, findings, note)

    def _show(self, values) -> str:
        """The inputs, short: x=[-1.5, 0.25], ..."""
        def one(v):
            text = np.array2string(np.asarray(v), threshold=6, edgeitems=2, separator=", ") \
                if not isinstance(v, list) else "[" + ", ".join(one(x) for x in v) + "]"
            return " ".join(text.split())
        return ", ".join(f"{a['name']}={one(v)}" for a, v in zip(self.plan.inputs, values))

    @staticmethod
    def _case(dtypes, shape, attrs) -> str:
        return f"{'/'.join(dtypes) or 'no inputs'} shape {shape} attrs {attrs}"

    def check_outputs(self, case, values, attrs, want) -> list[str]:
        try:
            with np.errstate(all="ignore"):
                out = self.call(values, attrs)
        except of.errors.InternalError as e:
            return [f"{case}: raised InternalError ({e})"]
        except of.errors.OpError:
            return []  # a clear error for a data-dependent condition is fine
        except Exception as e:  # noqa: BLE001: anything else is the finding
            return [f"{case}: raised {type(e).__name__} ({e}), not an opforge.errors class"]
        outs = out if isinstance(out, (tuple, list)) else (out,)
        found = []
        for k, (o, t, s) in enumerate(zip(outs, *want)):
            arr = o.numpy()
            if str(o.dtype.name) != t or tuple(arr.shape) != s:
                found.append(f"{case}: output {k} is {o.dtype.name}{list(arr.shape)} but the shape function "
                             f"said {t}{list(s)}")
            elif arr.dtype.kind == "f" and not self.allow_nan and np.isnan(arr).any():
                found.append(f"{case}: output {k} has NaN from finite inputs {self._show(values)} "
                             f"(pass --allow-nan {self.plan.name} if that is by design)")
        return found

    def run_bad_inputs(self):
        findings, cases = [], 0
        types = next((t for t in self.plan.dtype_choices()
                      if not self.plan.kernel_attr() or t[self.plan.kernel_attr()] not in self.plan.kernel_gap()),
                     None)
        if types is None:
            return self.result("bad-input", 0, [], "no dtype with a kernel")
        dtypes = [self.plan.input_dtype(a, types) for a in self.plan.inputs]
        attrs = self.plan.attr_values(types)
        shape = next((s for s in P.SHAPES[2:] + P.SHAPES[:2] if self.infer(dtypes, s, attrs)), (3,))
        base = self.arrays(dtypes, shape, 1)[0] if self.plan.inputs else []

        def expect_error(what, values, call_attrs):
            nonlocal cases
            cases += 1
            self.begin("bad-input", what)
            try:
                with np.errstate(all="ignore"):
                    self.call(values, call_attrs)
            except of.errors.OpError:
                return
            except Exception as e:  # noqa: BLE001
                findings.append(f"{what}: raised {type(e).__name__} ({e}), not an opforge.errors class")
                return
            findings.append(f"{what}: accepted, expected an opforge.errors exception")

        for i, arg in enumerate(self.plan.inputs):
            if arg["number_attr"]:
                continue
            attr = self.plan.attrs.get(arg["type_attr"])
            good = P.allowed(attr) if attr else (arg["fixed_type"],)
            for t in [t for t in P.DTYPES if t not in good][:2]:
                values = list(base)
                values[i] = np.zeros(shape, P_NP[t])
                expect_error(f"input '{arg['name']}' of dtype {t}", values, attrs)
            values = list(base)
            values[i] = "not a tensor"
            expect_error(f"input '{arg['name']}' given a str", values, attrs)
            for rank in range(5):
                bad_shape = (2,) * rank
                if self.infer(dtypes, [bad_shape if j == i else shape for j in range(len(dtypes))],
                              attrs) is not None:
                    continue
                values = [np.resize(v, bad_shape) if j == i else v for j, v in enumerate(base)]
                expect_error(f"input '{arg['name']}' of rank {rank} (its shape function rejects it)", values,
                             attrs)
                break
        for a in self.plan.op["attrs"]:
            if a["inferred"]:
                continue
            for what, value in P.bad_attr_values(a):
                expect_error(f"attr '{a['name']}' = {value!r} ({what})", base, {**attrs, a["name"]: value})
        self.result("bad-input", cases, findings)

    def run_gradient(self):
        if not self.plan.has_gradient():
            return self.result("gradient", 0, [], "no gradient declared")
        def float64_only(types):  # float inputs all float64 (the checker's precision), and some
            dts = [self.plan.input_dtype(a, types) for a in self.plan.inputs]
            return "float64" in dts and "float32" not in dts
        types = next((t for t in self.plan.dtype_choices() if float64_only(t)), None)
        if types is None:
            return self.result("gradient", 0, [], "no float64 signature to check")
        dtypes = [self.plan.input_dtype(a, types) for a in self.plan.inputs]
        attrs = self.plan.attr_values(types)
        shape = next((s for s in ((3,), (2, 3), ()) if self.infer(dtypes, s, attrs)), None)
        if shape is None:
            return self.result("gradient", 0, [], "the shape function accepted no small shape")
        rng = np.random.default_rng(0)
        base = self.arrays(dtypes, shape, 1)[0]  # non-float inputs keep these values
        # One leaf per float tensor: (input index, list element or None).
        slots = [(i, j) for i in self.plan.float_inputs(types)
                 for j in (range(P.LIST_LEN) if self.plan.inputs[i]["number_attr"] else (None,))]
        for i in self.plan.float_inputs(types):  # smooth values, away from float32 rounding
            many = self.plan.inputs[i]["number_attr"]
            base[i] = [rng.uniform(-2, 2, shape) for _ in range(P.LIST_LEN)] if many else rng.uniform(-2, 2, shape)
        try:
            self.call(base, attrs)
        except of.errors.OpError as e:
            return self.result("gradient", 0, [], f"the op refused the drawn inputs ({type(e).__name__})")
        findings = []
        n_out = len(self.plan.op["outputs"])
        for k in range(n_out):
            def fn(*ts, k=k):
                values = [list(v) if isinstance(v, list) else v for v in base]
                for (i, j), t in zip(slots, ts):
                    if j is None:
                        values[i] = t
                    else:
                        values[i][j] = t
                out = self.call(values, attrs)
                return out[k] if n_out > 1 else out
            fn.__name__ = self.plan.name + (f" output {k}" if n_out > 1 else "")
            self.begin("gradient", f"float64 shape {shape} output {k}")
            try:
                of.testing.check_gradients(fn, [base[i] if j is None else base[i][j] for i, j in slots])
            except AssertionError as e:
                findings.append(str(e))
            except Exception as e:  # noqa: BLE001
                findings.append(f"output {k}: the gradient raised {type(e).__name__}: {e}")
        self.result("gradient", n_out, findings)

    def run_all(self):
        for check in (self.run_valid, self.run_bad_inputs, self.run_gradient):
            try:
                check()
            except Exception:  # noqa: BLE001: a checker bug must not hide the other checks
                self.events.send(ev="result", op=self.plan.name, check=check.__name__[4:].replace("_", "-"),
                                 status="fail", cases=0, findings=["checker error:\n" + traceback.format_exc()],
                                 more=0, note="")


P_NP = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64, "bool": np.bool_}


def _python_name(op_name: str) -> str:
    from opforge._schema.naming import op_python_name
    return op_python_name(op_name)


def main(argv: list[str]) -> int:
    lib, fd, rest = argv[0], int(argv[1]), argv[2:]
    allow_nan = set()
    if rest[:1] == ["--allow-nan"]:
        allow_nan, rest = set(rest[1].split(",")), rest[2:]
    events = Events(fd)
    import opforge as of
    try:
        module = of.load_op_library(lib)
    except of.errors.OpError as e:
        events.send(ev="load_error", error=type(e).__name__, message=str(e))
        return 0
    from opforge import _opinfo
    registry = {op["name"]: op for op in _opinfo.registry_dict()["ops"]}
    ops = [registry[n] for n in module.OP_NAMES]
    events.send(ev="loaded", ops=ops)
    for op in ops:
        if rest and op["name"] not in rest:
            continue
        OpRun(events, module, op, op["name"] in allow_nan).run_all()
        events.send(ev="done", op=op["name"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
