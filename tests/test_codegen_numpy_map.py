"""codegen's numpy map: which ops declare that they compute a numpy function."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from codegen import emit  # noqa: E402
from codegen.model import Registry  # noqa: E402
from codegen.numpy_map import numpy_equivalents  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "registry_sample.json"


def _with_description(op_name: str, description: str) -> Registry:
    data = json.loads(FIXTURE.read_text())
    data = copy.deepcopy(data)
    for op in data["ops"]:
        op["description"] = ""
        if op["name"] == op_name:
            op["description"] = description
    return Registry.parse(data)


def test_declared_equivalence_is_mapped():
    reg = _with_description("Add", "Equivalent to `np.add(x, y)` for operands of one dtype.")
    assert numpy_equivalents(reg) == [("add", "add")]
    text = emit.render(reg).files["python/numpy_map.py"]
    ns: dict = {}
    exec(compile(text, "numpy_map.py", "exec"), ns)
    assert ns["NUMPY_EQUIVALENTS"] == {"add": "add"}


def test_other_arguments_or_prose_are_not_mapped():
    for description in ("Equivalent to `np.add(y, x)`.",      # not the inputs in order
                        "Equivalent to `np.maximum(x, 0)`.",
                        "Like numpy.add(x, y).",               # "Like" promises less
                        "Equivalent to np.add(x, y)."):        # not a code span
        assert numpy_equivalents(_with_description("Add", description)) == [], description
