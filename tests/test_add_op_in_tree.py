"""The README's add-an-op walkthrough, for real: in a copy of the source tree,
build, add an op in a new group, regenerate, rebuild incrementally, import.
One full build of the copy (at -O0: about a minute on 2 cores), then incremental."""
from __future__ import annotations

import sys
import pathlib

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from tree_copy import TreeCopy  # noqa: E402

pytestmark = pytest.mark.slow

DECL = r'''#include "opforge/opforge.h"

namespace opforge {
REGISTER_OP("Hypot")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Gradient("x = Div(Mul(dz, x), z)")
    .Gradient("y = Div(Mul(dz, y), z)")
    .Doc(R"doc(
Returns sqrt(x**2 + y**2) element-wise, with numpy broadcasting.

x: One leg.
y: The other leg.
z: The hypotenuse.
)doc");
}  // namespace opforge
'''

KERNEL = r'''#include <cmath>
#include "elementwise.h"

namespace opforge {
template <typename T>
Status HypotKernel(OpKernelContext* ctx) {
  return elementwise::BinaryOp<T>(ctx, [](T x, T y) { return std::hypot(x, y); });
}
REGISTER_KERNEL("Hypot", kCPU, DType::kFloat32, HypotKernel<float>);
REGISTER_KERNEL("Hypot", kCPU, DType::kFloat64, HypotKernel<double>);
}  // namespace opforge
'''

CHECK = r'''
import numpy as np, opforge as of
from opforge.ops import gen_geometry_ops
x, y = np.array([3.0, 5.0, 8.0]), np.array([[4.0], [12.0]])
np.testing.assert_allclose(of.hypot(x, y).numpy(), np.hypot(x, y))
np.testing.assert_allclose(gen_geometry_ops.hypot(np.float32(3), np.float32(4)).numpy(), 5.0)
assert gen_geometry_ops.hypot.__doc__.startswith("Returns sqrt(x**2 + y**2)")
assert "Declared at cpp/ops/geometry_ops.cc:4 (op Hypot)" in gen_geometry_ops.hypot.__doc__
assert "STALE-CHECK" in of.neg.__doc__
of.testing.check_gradients(of.hypot, [x, y])
print("ok")
'''

# A deliberately wrong gradient (d/dy uses x) must be caught by the checker.
WRONG_GRADIENT_CHECK = r'''
import numpy as np, opforge as of
try:
    of.testing.check_gradients(of.hypot, [np.array([3.0, 5.0]), np.array([4.0, 12.0])])
except AssertionError as e:
    assert "w.r.t. input 1" in str(e), e
    print("caught")
'''


def test_add_an_op_in_a_new_group(tmp_path):
    tree = TreeCopy(tmp_path, optimize=False)
    tree.create()
    tree.configure()
    tree.rebuild()  # the one full build
    assert tree.python("import opforge as of; print(of.neg([1.0]).numpy())").stdout.strip() == "[-1.]"
    committed = {p.name for p in (tree.src / "generated" / "python").iterdir()}

    # 1-2. Declare the op in a new group and write its kernel; also change an
    # existing declaration (Neg's doc), so the old wrappers become stale.
    (tree.src / "cpp" / "ops" / "geometry_ops.cc").write_text(DECL)
    (tree.src / "cpp" / "kernels" / "geometry_kernels.cc").write_text(KERNEL)
    math_ops = tree.src / "cpp" / "ops" / "math_ops.cc"
    text = math_ops.read_text()
    i = text.index('REGISTER_OP("Neg")')
    j = text.index("Doc(R\"doc(\n", i) + len("Doc(R\"doc(\n")
    math_ops.write_text(text[:j] + "STALE-CHECK " + text[j:])

    # 4 before 3: the build regenerates into its own tree, so it never compiles
    # stale wrappers, and says that generated/ lags.
    out = tree.rebuild()
    assert "generated/ does not match the op declarations" in out
    r = tree.python(CHECK)
    assert r.stdout.strip() == "ok", r.stderr

    # The committed wrappers are stale, and importing them says how to fix it.
    stale = tree.codegen("--check")
    assert stale.returncode == 1 and "gen_geometry_ops.py" in stale.stdout
    old_ops = tree.prefix / "opforge" / "ops"
    for f in (tree.src / "generated" / "python").glob("*.py"):
        (old_ops / f.name).write_text(f.read_text())
    r = tree.python("import opforge")
    assert r.returncode != 0 and "ImportError" in r.stderr and "python -m codegen" in r.stderr

    # 3. Regenerate: a new gen_geometry_ops module, no other file edited by hand.
    r = tree.codegen()
    assert r.returncode == 0, r.stderr
    new = {p.name for p in (tree.src / "generated" / "python").iterdir()}
    assert new - committed == {"gen_geometry_ops.py", "gen_geometry_ops.pyi", "gen_geometry_grads.py"}
    assert (tree.src / "generated" / "swig" / "gen_geometry_ops.i").is_file()
    assert tree.codegen("--check").returncode == 0
    out = tree.rebuild()
    assert "does not match" not in out
    r = tree.python(CHECK)
    assert r.stdout.strip() == "ok", r.stderr

    # A wrong gradient declaration builds (it is well-formed) but fails the check.
    decl = tree.src / "cpp" / "ops" / "geometry_ops.cc"
    decl.write_text(DECL.replace('"y = Div(Mul(dz, y), z)"', '"y = Div(Mul(dz, x), z)"'))
    tree.rebuild()
    r = tree.python(WRONG_GRADIENT_CHECK)
    assert r.stdout.strip() == "caught", r.stderr
