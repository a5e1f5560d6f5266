"""Custom op libraries: examples/custom_op built against the installed
package, load_op_library, and every refusal leaving the registry unchanged."""
from __future__ import annotations

import inspect
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import opforge as of
from opforge import _opinfo  # the registry, through its one reader
from opforge import _pywrap_internal as pw

import op_library_build

# Loaded libraries stay registered: conftest.py runs these tests last.
pytestmark = pytest.mark.loads_op_libraries

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "op_library_fixtures"


_cxx, _run = op_library_build.cxx, op_library_build.run


def _state() -> tuple[str, list[str]]:
    return pw.registry_json(), pw.registration_errors()


def _mapped(path) -> bool:
    return str(path) in pathlib.Path("/proc/self/maps").read_text()


def test_example_ops_match_numpy(example_lib):
    m = of.load_op_library(example_lib)
    assert m.OP_NAMES == ("SoftShrink", "ZeroOut")
    rng = np.random.default_rng(0)
    a = rng.integers(-100, 100, size=(3, 4)).astype(np.int32)
    expected = np.zeros_like(a)
    expected.flat[0] = a.flat[0]
    np.testing.assert_array_equal(m.zero_out(a).numpy(), expected)
    np.testing.assert_array_equal(m.zero_out(np.array([], np.int32)).numpy(), np.array([], np.int32))
    np.testing.assert_array_equal(m.zero_out([7, 8, 9]).numpy(), [7, 0, 0])  # a list takes int32
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal((5, 1000)).astype(dtype)
        for t in (0.0, 0.5, 1.25):
            want = np.where(x > t, x - t, np.where(x < -t, x + t, 0)).astype(dtype)
            got = m.soft_shrink(x, threshold=t).numpy()
            assert got.dtype == dtype
            np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(m.soft_shrink(np.array([-1.0, 0.2, 2.0])).numpy(), [-0.5, 0.0, 1.5])


def test_example_gradient_is_declared_and_checked(example_lib):
    m = of.load_op_library(example_lib)
    x = np.array([-1.3, -0.2, 0.1, 0.7, 2.0])
    of.testing.check_gradients(lambda t: m.soft_shrink(t, threshold=0.5), [x])
    g = of.grad(lambda t: of.sum(m.soft_shrink(t, threshold=0.5)))(x)
    np.testing.assert_array_equal(g.numpy(), (np.abs(x) > 0.5).astype(float))
    # ZeroOut declares no gradient: int32 only, so nothing can require one.
    with pytest.raises(of.errors.NotFoundError, match=r"ZeroOut.*RegisterGradient"):
        from opforge.autodiff import registry
        registry.lookup("ZeroOut")


def test_example_wrappers_come_from_the_templates(example_lib):
    m = of.load_op_library(example_lib)
    assert str(inspect.signature(m.soft_shrink)) == "(x, threshold=0.5)"
    assert str(inspect.signature(m.zero_out)) == "(to_zero)"
    doc = inspect.getdoc(m.zero_out)
    assert doc.startswith("Keeps the first element of a tensor and zeroes the rest")
    assert "to_zero: A tensor-like of dtype int32. The tensor to zero out." in doc
    assert "Declared at custom_ops.cc:" in doc and "Kernels: cpu (int32)." in doc
    assert "threshold: A float, default 0.5. How far to shrink" in inspect.getdoc(m.soft_shrink)
    assert inspect.getsource(m.soft_shrink).startswith("def soft_shrink(x, threshold=0.5):")
    assert m.__all__ == ["soft_shrink", "zero_out"]
    # The loaded ops are in the registry like built-in ones.
    ops = {op["name"]: op for op in _opinfo.registry_dict()["ops"]}
    assert ops["ZeroOut"]["group"] == "custom" and ops["ZeroOut"]["kernels"] == {"cpu": ["int32"]}


def test_example_errors_name_the_op_and_argument(example_lib):
    m = of.load_op_library(example_lib)
    with pytest.raises(of.errors.InvalidArgumentError, match=r"ZeroOut: argument 'to_zero' must have dtype int32"):
        m.zero_out(np.ones(3, np.float32))
    with pytest.raises(of.errors.InvalidArgumentError, match=r"SoftShrink.*'threshold' must be a float"):
        m.soft_shrink(np.ones(3), threshold="big")
    with pytest.raises(of.errors.InvalidArgumentError, match=r"SoftShrink.*threshold.*>= 0"):
        m.soft_shrink(np.ones(3), threshold=-1.0)
    with pytest.raises(of.errors.InvalidArgumentError, match=r"SoftShrink: argument 'x' has dtype int32"):
        m.soft_shrink(np.ones(3, np.int32))


def test_same_library_twice_is_the_same_module(example_lib, tmp_path):
    m = of.load_op_library(example_lib)
    assert of.load_op_library(str(example_lib)) is m
    link = tmp_path / "link.so"
    link.symlink_to(example_lib)
    assert of.load_op_library(link) is m
    # A copy is another library that declares the same ops: refused.
    copy = tmp_path / "libcustom_copy.so"
    shutil.copy(example_lib, copy)
    before = _state()
    with pytest.raises(of.errors.AlreadyExistsError, match=r"op 'SoftShrink'.*already registered"):
        of.load_op_library(copy)
    assert _state() == before


def test_wrappers_go_through_the_hook_point(example_lib):
    from opforge import _hooks
    m = of.load_op_library(example_lib)
    seen = []

    def hook(call):
        seen.append((call.op_type, call.inputs))
        call.record = True
        out = call.run()
        seen.append(tuple(call.completed_attrs))
        return out

    with _hooks.installed(hook):
        np.testing.assert_array_equal(m.zero_out([3, 4]).numpy(), [3, 0])
    assert seen == [("ZeroOut", {"to_zero": [3, 4]}), ()]


def test_concurrent_calls_while_a_library_loads(example_lib, fixture_libs):
    m = of.load_op_library(example_lib)
    x = np.linspace(-3, 3, 1 << 18)
    want = np.where(x > 1, x - 1, np.where(x < -1, x + 1, 0))
    failures = []
    stop = threading.Event()

    def work():
        while not stop.is_set():
            if not np.array_equal(m.soft_shrink(x, threshold=1.0).numpy(), want):
                failures.append("soft_shrink")
            if not np.array_equal(of.add(x, 1.0).numpy(), x + 1.0):
                failures.append("add")

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for name in ("dup_ops", "invalid_ops", "no_kernel_ops"):
            with pytest.raises(of.errors.OpError):
                of.load_op_library(fixture_libs[name])
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert failures == []


REFUSALS = [
    # (fixture, error class, message pattern)
    ("dup_ops", of.errors.AlreadyExistsError,
     r"refused op library .*op 'Add' \(declared at .*dup_ops.cc:\d+\) is already registered "
     r"\(declared at cpp/ops/math_ops.cc:\d+\)"),
    ("missing_symbol_ops", of.errors.NotFoundError,
     r"uses the symbol `opforge::MissingKernel\(opforge::OpKernelContext\*\)`"),
    ("no_kernel_ops", of.errors.NotFoundError, r"op 'KernelLess' .* has no kernel"),
    ("kernel_only_ops", of.errors.NotFoundError, r"kernel .* for op 'NobodyDeclaredMe', which is not registered"),
    ("invalid_ops", of.errors.InvalidArgumentError, r"invalid registrations: .*BadAttr"),
    ("math_ops", of.errors.AlreadyExistsError, r"in group 'math', which is already registered"),
    ("undocumented_ops", of.errors.InvalidArgumentError, r"op Undocumented: no summary"),
    ("gradient_let_ops", of.errors.InvalidArgumentError,
     r"op 'LetAfterUse' \(declared at .*gradient_let_ops.cc:\d+\): gradient 'x = Mul\(dy, s\)': 's' is neither"
     r".*nor a local defined before \('let s = \.\.\.'\)"),
    ("gradient_list_ops", of.errors.InvalidArgumentError,
     r"op 'ListToTensor' .*passes a list as input 'x' of Identity, which takes one tensor"),
    ("plain", of.errors.InvalidArgumentError, r"has no opforge stamp"),
]


@pytest.mark.parametrize("name,error,pattern", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusal_leaves_the_registry_unchanged(fixture_libs, name, error, pattern):
    before = _state()
    with pytest.raises(error, match=pattern):
        of.load_op_library(fixture_libs[name])
    assert _state() == before
    assert not _mapped(fixture_libs[name])  # closed again (or never opened)
    with pytest.raises(error):  # refused again, not cached
        of.load_op_library(fixture_libs[name])
    assert _state() == before
    np.testing.assert_array_equal(of.add([1.0], [2.0]).numpy(), [3.0])  # the process lives


def test_not_a_shared_library(tmp_path, fixture_libs):
    before = _state()
    text = tmp_path / "libtext.so"
    text.write_text("not a library\n")
    with pytest.raises(of.errors.InvalidArgumentError, match=r"is not a shared library \(no ELF header\)"):
        of.load_op_library(text)
    obj = tmp_path / "object.o"
    _run([_cxx(), "-c", *of.sysconfig.get_compile_flags(), str(FIXTURES / "no_kernel_ops.cc"), "-o", str(obj)])
    with pytest.raises(of.errors.InvalidArgumentError, match=r"ELF file but not a shared library"):
        of.load_op_library(obj)
    with pytest.raises(of.errors.NotFoundError, match=r"cannot open"):
        of.load_op_library(tmp_path / "missing.so")
    assert _state() == before


def test_mismatched_stamp_is_refused_before_loading(example_lib, tmp_path):
    ours = of.sysconfig.get_stamp()
    version = ours.split("version=")[1].split()[0]
    other = re.sub(r"\d", "9" if "0" in version else "0", version)  # same length: 9.9.9
    data = example_lib.read_bytes()
    assert data.count(f"version={version} ".encode()) >= 2  # one stamp per object file
    patched = tmp_path / "libcustom_old.so"
    patched.write_bytes(data.replace(f"version={version} ".encode(), f"version={other} ".encode()))
    before = _state()
    with pytest.raises(of.errors.InvalidArgumentError) as info:
        of.load_op_library(patched)
    msg = str(info.value)
    assert f"built against opforge {other}" in msg and f"this is opforge {version}" in msg
    assert "Nothing was loaded" in msg
    assert not _mapped(patched)  # never dlopened: none of its code ran
    assert _state() == before
    # Another ABI (e.g. another std::string ABI) is named as well.
    abi = ours.split("abi=")[1]
    flipped = abi.replace("cxx11abi1", "cxx11abi0") if "cxx11abi1" in abi else abi.replace("cxx11abi0", "cxx11abi1")
    patched2 = tmp_path / "libcustom_abi.so"
    patched2.write_bytes(data.replace(abi.encode(), flipped.encode()))
    with pytest.raises(of.errors.InvalidArgumentError, match=re.escape(f"ABI {flipped})") + ".*" + re.escape(f"ABI {abi})")):
        of.load_op_library(patched2)
    assert _state() == before


def test_sysconfig_flags_and_files():
    inc = pathlib.Path(of.sysconfig.get_include())
    assert (inc / "opforge" / "opforge.h").is_file() and (inc / "opforge" / "version.h").is_file()
    flags = of.sysconfig.get_compile_flags()
    assert f"-I{inc}" in flags and "-std=c++17" in flags
    assert any(f.startswith("-D_GLIBCXX_USE_CXX11_ABI=") for f in flags)
    lib_dir = of.sysconfig.get_lib()
    assert of.sysconfig.get_link_flags() == [f"-L{lib_dir}", f"-l:{of.sysconfig.get_library_file()}",
                                             f"-Wl,-rpath,{lib_dir}"]
    assert (pathlib.Path(lib_dir) / of.sysconfig.get_library_file()).samefile(pw.__file__)
    cmake_dir = pathlib.Path(of.sysconfig.get_cmake_dir())
    assert (cmake_dir / "opforgeConfig.cmake").is_file() and (cmake_dir / "opforgeConfigVersion.cmake").is_file()
    assert of.sysconfig.get_stamp() == f"opforge-stamp version={of.__version__} abi={of.sysconfig.get_abi_tag()}"


def test_cli_lists_and_describes_library_ops(example_lib):
    env = dict(os.environ)
    out = _run([sys.executable, "-m", "opforge", "ops", "--load", str(example_lib)], env=env, cwd="/").stdout
    line = next(l for l in out.splitlines() if l.startswith("ZeroOut("))
    assert "[custom]" in line and "cpu: int32" in line
    out = _run([sys.executable, "-m", "opforge", "describe", "SoftShrink", "--load", str(example_lib)],
               env=env, cwd="/").stdout
    assert "threshold: float" in out and "default 0.5" in out and "custom_ops.cc:" in out


def test_unknown_attr_lookup_is_an_internal_error(fixture_libs):
    """OpContext::attr("typo") fails the call at once, naming the op and the name."""
    m = of.load_op_library(fixture_libs["typo_attr_ops"])
    x = np.ones(3, np.float32)
    with pytest.raises(of.errors.InternalError,
                       match=r"TypoInShapeFn: .*looked up attr 'axes', which the op does not declare "
                             r"\(its attrs: axis\)"):
        m.typo_in_shape_fn(x)
    with pytest.raises(of.errors.InternalError, match=r"TypoInShapeFn: .*attr 'axes'"):
        pw.infer("TypoInShapeFn", ((of.float32, (3,)),), {})
    with pytest.raises(of.errors.InternalError,
                       match=r"TypoInKernel: .*looked up attr 'scale', which the op does not declare "
                             r"\(its attrs: scaled\)"):
        m.typo_in_kernel(x)
    # Shape-only inference works for library ops too; the kernel's typo needs a kernel run.
    assert pw.infer("TypoInKernel", ((of.float32, (2, 5)),), {"scaled": True}) == (
        (of.float32,), ((2, 5),), {"scaled": True})


def test_library_ops_work_in_graphs_and_async_mode(example_lib):
    # No per-op code: the loaded wrappers go through the same hook.
    m = of.load_op_library(example_lib)
    x = np.array([-1.0, 0.2, 2.0])
    g = of.Graph()
    with g.as_default():
        p = of.placeholder(of.float64, [3])
        y = m.soft_shrink(p * 2.0, threshold=1.0)
        assert y.op.type == "SoftShrink" and y.shape == (3,) and y.op.get_attr("threshold") == 1.0
    with of.Session(g) as sess:
        np.testing.assert_allclose(sess.run(y, {p: x}), [-1.0, 0.0, 3.0])
    with of.execution_mode("async"):
        z = m.zero_out(m.zero_out(np.array([5, 6, 7], np.int32)))
        np.testing.assert_array_equal(z.numpy(), [5, 0, 0])


def test_library_ops_on_dask_arrays(example_lib):
    # m.dask is rendered like opforge.dask, from the library's declared categories.
    da = pytest.importorskip("dask.array")
    from dask.array.utils import assert_eq
    m = of.load_op_library(example_lib)
    x = np.random.default_rng(3).standard_normal((6, 10))
    got = m.dask.soft_shrink(da.from_array(x, chunks=(4, 3)), threshold=0.5)
    assert isinstance(got, da.Array)
    assert_eq(got, np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0)), scheduler="synchronous")
    assert m.dask is m.dask and m.dask.__all__ == ["soft_shrink", "zero_out"]
    with pytest.raises(of.errors.UnimplementedError, match="ZeroOut"):  # no Category(): "none"
        m.dask.zero_out(da.ones(3, dtype=np.int32))
    with pytest.raises(AttributeError):
        m.no_such_thing
