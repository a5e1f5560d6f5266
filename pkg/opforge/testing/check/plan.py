"""What to call an op with, read from its registry entry alone.

An op's entry (``registry_json()``) names its inputs (fixed dtype, type
attr or ``N * T`` list), its attrs (type, allowed values, minimum, default)
and its gradient rules; from these come the dtypes to try, the attr values
of a valid call, and the ways to make a call invalid.
"""
from __future__ import annotations

DTYPES = ("float32", "float64", "int32", "int64", "bool")
FLOATS = ("float32", "float64")
# Every valid-input run tries these shapes (all tensor inputs alike); the
# shape function decides which ones the op accepts.
SHAPES = ((), (0,), (3,), (2, 3), (2, 0), (1, 3, 2))
LIST_LEN = 2  # tensors per N * T list input


def allowed(attr: dict | None) -> tuple[str, ...]:
    return tuple(attr["allowed"]) if attr and attr["allowed"] else DTYPES


class OpPlan:
    def __init__(self, op: dict):
        self.op = op
        self.name = op["name"]
        self.attrs = {a["name"]: a for a in op["attrs"]}
        self.inputs = op["inputs"]

    def kernel_attr(self) -> str | None:
        """The type attr that picks the kernel (as op_def_builder.cc decides it)."""
        for arg in self.inputs:
            if arg["type_attr"]:
                return arg["type_attr"]
        for attr in self.op["attrs"]:
            if attr["type"] == "type":
                return attr["name"]
        return None

    def kernel_gap(self) -> tuple[str, ...]:
        """Dtypes the kernel-deciding type attr allows but no kernel serves."""
        attr = self.kernel_attr()
        if attr is None:
            return ()
        have = set(self.op["kernels"].get("cpu", ()))
        return tuple(t for t in allowed(self.attrs[attr]) if t not in have)

    def undocumented(self) -> list[str]:
        missing = [f"{kind} '{a['name']}'" for kind, args in (("input", self.inputs), ("output", self.op["outputs"]))
                   for a in args if not a["doc"].strip()]
        missing += [f"attr '{a['name']}'" for a in self.op["attrs"] if not a["inferred"] and not a["doc"].strip()]
        return missing

    def dtype_choices(self) -> list[dict[str, str]]:
        """One {type attr: dtype} per dtype the op's kernel-deciding attr allows."""
        main = self.kernel_attr()
        others = {a["name"]: allowed(a)[0] for a in self.op["attrs"] if a["type"] == "type" and a["name"] != main}
        if main is None:
            return [others]
        return [{**others, main: t} for t in allowed(self.attrs[main])]

    def input_dtype(self, arg: dict, types: dict[str, str]) -> str:
        return arg["fixed_type"] or types[arg["type_attr"]]

    def attr_values(self, types: dict[str, str]) -> dict:
        """Values for the attrs a valid call passes: those without a default,
        plus type attrs that are not inferred from the inputs."""
        values = {}
        for a in self.op["attrs"]:
            if a["inferred"]:
                continue
            if a["type"] == "type" and a["name"] in types:
                values[a["name"]] = types[a["name"]]
            elif not a["has_default"]:
                values[a["name"]] = plain_value(a)
        return values

    def float_inputs(self, types: dict[str, str]) -> list[int]:
        return [i for i, arg in enumerate(self.inputs) if self.input_dtype(arg, types) in FLOATS]

    def has_gradient(self) -> bool:
        return bool(self.op["gradient"]["rules"])


def plain_value(attr: dict):
    """A value for an attr without a default that its declaration accepts."""
    kind, lo = attr["type"], attr["minimum"]
    if attr["allowed"]:
        return attr["allowed"][0]
    return {
        "int": max(lo, 0) if lo is not None else 0,
        "float": 0.5, "bool": False, "string": "", "type": "float32", "shape": [2],
        "list(int)": [], "list(float)": [], "list(type)": [],
    }.get(kind, None)


def bad_attr_values(attr: dict) -> list[tuple[str, object]]:
    """(what, value) pairs the declaration of ``attr`` rules out."""
    kind, out = attr["type"], []
    if kind in ("int", "float") and attr["minimum"] is not None:
        low = attr["minimum"] - 1
        out.append((f"below its minimum {attr['minimum']}", float(low) if kind == "float" else low))
    if kind in ("type", "string") and attr["allowed"]:
        choices = [t for t in DTYPES if t not in attr["allowed"]] if kind == "type" else ["not-an-allowed-value"]
        out += [(f"{c!r}, not one of its allowed values", c) for c in choices[:1]]
    if kind in ("int", "float", "bool", "shape", "list(int)", "list(float)"):
        out.append(("a str where it takes " + kind, "not-a-number"))
    return out
