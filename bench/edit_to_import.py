"""Edit an op declaration -> a successful `import` of its new wrapper, incremental.

    python bench/edit_to_import.py [--repeat 5] [--work DIR]
    python bench/edit_to_import.py --editable PYTHON [--repeat 5]

--editable: PYTHON's opforge is `pip install -e . --no-build-isolation` of
this tree (rebuild on import). Times a kernel edit (a token in
cpp/kernels/array_kernels.cc, then found in the re-linked extension) and a
declaration edit (Identity's doc, then found in of.identity.__doc__), each
from saving the file to a finished `python -c "import opforge ..."`; the
files are restored afterwards. Otherwise: in a private copy of the source tree (tests/tree_copy.py): one untimed full
build with an extra op (BenchEdit, group "bench"); then, --repeat times,
change its declaration (a new attr default and doc token), run the README's
incremental rebuild (`cmake --build build/dev`, which regenerates the
wrappers into the build tree, + `cmake --install`) and import the new
wrapper in a fresh interpreter, checking that the edit is visible. Reports
medians (and min/max) of each step and the total. Also times
`python -m codegen --build-dir build/dev` (updating the committed
generated/, needed to commit but not to import).
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from tree_copy import TreeCopy, run  # noqa: E402

DECL = r'''#include "opforge/opforge.h"

namespace opforge {
REGISTER_OP("BenchEdit")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float32, float64}")
    .Attr("scale: float = %(scale)s")
    .SetShapeFn(shape_fns::Unchanged)
    .Doc(R"doc(
Returns x * scale (edit %(token)s).

x: The input.
y: The scaled input.
scale: The factor.
)doc");
}  // namespace opforge
'''

KERNEL = r'''#include "opforge/opforge.h"

namespace opforge {
template <typename T>
Status BenchEditKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const T s = static_cast<T>(ctx->attr_float("scale"));
  for (int64_t i = 0; i < x.NumElements(); ++i) y->data<T>()[i] = x.data<T>()[i] * s;
  return Status::OK();
}
REGISTER_KERNEL("BenchEdit", kCPU, DType::kFloat32, BenchEditKernel<float>);
REGISTER_KERNEL("BenchEdit", kCPU, DType::kFloat64, BenchEditKernel<double>);
}  // namespace opforge
'''

CHECK = '''
import opforge.ops.gen_bench_ops as g
assert "edit {token}" in g.bench_edit.__doc__, g.bench_edit.__doc__
assert g.bench_edit([1.0, 2.0]).numpy().tolist() == [{scale}, {scale2}]
'''


ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNEL_EDIT = '\nnamespace opforge {{ extern const char kEditToken[]; const char kEditToken[] = "edit-{token}"; }}\n'
KERNEL_CHECK = '''
import opforge, opforge._pywrap_internal as pw
assert b"edit-{token}" in open(pw.__file__, "rb").read()
'''
DECL_OLD = "Like numpy.asarray(x): no data is copied."
DECL_CHECK = '''
import opforge as of
assert "edit-{token}" in of.identity.__doc__, of.identity.__doc__
'''


def _children_cpu() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def editable(python: str, repeat: int) -> int:
    python = str(pathlib.Path(python).absolute())  # runs with cwd=/
    import subprocess

    def py(code, **kw):
        return subprocess.run([python, "-c", code], cwd="/", capture_output=True, text=True, **kw)

    kernel = ROOT / "cpp" / "kernels" / "array_kernels.cc"
    decl = ROOT / "cpp" / "ops" / "array_ops.cc"
    originals = {kernel: kernel.read_text(), decl: decl.read_text()}
    assert DECL_OLD in originals[decl]
    edits = {
        "kernel": (kernel, lambda t: originals[kernel] + KERNEL_EDIT.format(token=t), KERNEL_CHECK),
        "declaration": (decl, lambda t: originals[decl].replace(DECL_OLD, f"{DECL_OLD} (edit-{t})"), DECL_CHECK),
    }
    times: dict[str, list[float]] = {k: [] for k in edits}
    cpu: dict[str, list[float]] = {k: [] for k in edits}  # the build's CPU time: what load cannot inflate
    try:
        py("import opforge", check=True)  # start from a built tree
        for i in range(repeat):
            for kind, (path, edit, check) in edits.items():
                token = f"{kind}-{i}-{time.time_ns()}"
                t0, c0 = time.perf_counter(), _children_cpu()
                path.write_text(edit(token))
                r = py(check.format(token=token))
                dt, dc = time.perf_counter() - t0, _children_cpu() - c0
                path.write_text(originals[path])
                py("import opforge")  # untimed: rebuild the restored file, so the next edit times only itself
                if r.returncode != 0:
                    print(r.stdout[-3000:], r.stderr[-3000:], file=sys.stderr)
                    return 1
                times[kind].append(dt)
                cpu[kind].append(dc)
                print(f"  run {i}: {kind} edit -> import {dt:.2f} s (CPU {dc:.2f} s)", flush=True)
    finally:
        for path, text in originals.items():
            path.write_text(text)
        py("import opforge")  # leave the build matching the sources
    t0 = time.perf_counter()
    py("import opforge", check=True)
    noop = time.perf_counter() - t0
    print(f"edit_to_import --editable (seconds, median [min, max] of {repeat}):")
    for k, v in times.items():
        print(f"  {k:12s} {statistics.median(v):6.2f}  [{min(v):.2f}, {max(v):.2f}]  "
              f"CPU (user+sys) {statistics.median(cpu[k]):.2f}")
    print(f"  {'no edit':12s} {noop:6.2f}  (an import whose rebuild check finds nothing to do)")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--work", type=pathlib.Path, help="work folder (default: a temporary one)")
    p.add_argument("--editable", metavar="PYTHON", help="time the editable install's rebuild on import instead")
    args = p.parse_args(argv)
    if args.editable:
        return editable(args.editable, args.repeat)
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="opforge-edit-to-import-"))
    tree = TreeCopy(work)
    decl = tree.src / "cpp" / "ops" / "bench_ops.cc"
    print(f"edit_to_import: copy and full build in {work} (untimed)", flush=True)
    t0 = time.perf_counter()
    tree.create()
    decl.write_text(DECL % {"scale": "1.0", "token": "initial"})
    (tree.src / "cpp" / "kernels" / "bench_kernels.cc").write_text(KERNEL)
    tree.configure()
    tree.rebuild()
    print(f"edit_to_import: full build {time.perf_counter() - t0:.1f} s", flush=True)

    steps: dict[str, list[float]] = {"build": [], "install": [], "import": [], "total": [], "codegen": []}
    for i in range(args.repeat):
        scale = 2.0 + i
        decl.write_text(DECL % {"scale": f"{scale}", "token": f"r{i}"})
        t0 = time.perf_counter()
        run(["cmake", "--build", tree.build])
        t1 = time.perf_counter()
        tree.rebuild()  # only the install (and a no-op build check) is left
        t2 = time.perf_counter()
        r = tree.python(CHECK.format(token=f"r{i}", scale=scale, scale2=2 * scale))
        t3 = time.perf_counter()
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return 1
        c = tree.codegen()
        t4 = time.perf_counter()
        assert c.returncode == 0, c.stderr
        for k, v in (("build", t1 - t0), ("install", t2 - t1), ("import", t3 - t2), ("total", t3 - t0),
                     ("codegen", t4 - t3)):
            steps[k].append(v)
        print(f"  run {i}: edit -> import {t3 - t0:.2f} s (build {t1 - t0:.2f}, install {t2 - t1:.2f}, "
              f"import {t3 - t2:.2f}); python -m codegen {t4 - t3:.2f} s", flush=True)
    print("edit_to_import (seconds, median [min, max] of "
          f"{args.repeat}):")
    for k, v in steps.items():
        print(f"  {k:8s} {statistics.median(v):6.2f}  [{min(v):.2f}, {max(v):.2f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
