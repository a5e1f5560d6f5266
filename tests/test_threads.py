"""Thread citizenship (issue 15): the intra-op pool's size comes from what the
process may use, and opforge's matmul shares numpy's BLAS without reconfiguring it.

The pool is sized once per process, so every case runs a fresh interpreter
with its own environment, affinity or fake cgroup tree, and reads the size
back through ``opforge.config``.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import opforge as of

HAS_AFFINITY = hasattr(os, "sched_getaffinity")
CPUS = len(os.sched_getaffinity(0)) if HAS_AFFINITY else os.cpu_count()

PROBE = """
import json, os, sys
cpus = json.loads(sys.argv[1])
if cpus is not None:
    os.sched_setaffinity(0, cpus)
import numpy as np, opforge as of
x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096
assert np.allclose(of.matmul(x, x).numpy(), x @ x, rtol=1e-5, atol=1e-5)
big = np.linspace(0, 1, 1 << 20, dtype=np.float32)  # large enough for the pool
assert np.allclose(of.exp(big).numpy(), np.exp(big), rtol=1e-6)
print(json.dumps({"threads": of.config.num_threads(), "usable": of.config.usable_cpus(),
                  "blas": of.config.blas()}))
"""

POOL_ENV = ("OPFORGE_NUM_THREADS", "OMP_NUM_THREADS", "OPFORGE_SYSROOT", "OPFORGE_BLAS")


def probe(env=None, cpus=None):
    full = {k: v for k, v in os.environ.items() if k not in POOL_ENV}
    full.update(env or {})
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(cpus)], env=full,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_default_is_the_usable_cpus():
    r = probe()
    assert r["threads"] == r["usable"] <= CPUS


@pytest.mark.parametrize("env, want", [
    ({"OPFORGE_NUM_THREADS": "3"}, 3),
    ({"OMP_NUM_THREADS": "1"}, 1),                               # what Dask's nanny sets
    ({"OMP_NUM_THREADS": "3,2"}, 3),                             # nested OpenMP levels: the outer
    ({"OPFORGE_NUM_THREADS": "2", "OMP_NUM_THREADS": "1"}, 2),   # opforge's own wins
    ({"OPFORGE_NUM_THREADS": "0", "OMP_NUM_THREADS": "1"}, 1),   # invalid values are ignored
    ({"OPFORGE_NUM_THREADS": "two", "OMP_NUM_THREADS": "1"}, 1),
    ({"OPFORGE_NUM_THREADS": "4x", "OMP_NUM_THREADS": "1"}, 1),
    pytest.param({"OPFORGE_NUM_THREADS": "5000"}, 1024,          # capped, not a fork bomb
                 marks=pytest.mark.skipif(bool(os.environ.get("OPFORGE_SANITIZED")),
                                          reason="1023 threads under ASan: slow")),
    ({"OPFORGE_NUM_THREADS": "99999999999999999999", "OMP_NUM_THREADS": "1"}, 1),  # overflow
])
def test_environment_variables(env, want):
    assert probe(env)["threads"] == want


@pytest.mark.skipif(not HAS_AFFINITY, reason="no sched_setaffinity")
def test_affinity_mask_limits_the_pool():
    first = min(os.sched_getaffinity(0))
    r = probe(cpus=[first])
    assert r["threads"] == r["usable"] == 1
    # OMP_NUM_THREADS is an explicit request: honoured even above the mask.
    assert probe({"OMP_NUM_THREADS": "2"}, cpus=[first])["threads"] == 2


def _fake_root(tmp_path, cgroup, mountinfo, files):
    for rel, text in {"proc/self/cgroup": cgroup, "proc/self/mountinfo": mountinfo,
                      **files}.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return {"OPFORGE_SYSROOT": str(tmp_path)}


V2_MOUNT = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
V1_MOUNT = ("31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
            "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
            "33 31 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")


def test_cgroup_v2_quota_of_a_parent_binds(tmp_path):
    env = _fake_root(tmp_path, "0::/job/step\n", V2_MOUNT, {
        "sys/fs/cgroup/job/cpu.max": "50000 100000\n",       # half a CPU: rounds up to 1
        "sys/fs/cgroup/job/step/cpu.max": "max 100000\n"})
    assert probe(env)["usable"] == 1
    assert probe(env)["threads"] == 1


def test_cgroup_v2_without_limit_is_the_affinity(tmp_path):
    env = _fake_root(tmp_path, "0::/job\n", V2_MOUNT, {"sys/fs/cgroup/job/cpu.max": "max 100000\n"})
    assert probe(env)["usable"] == CPUS


def test_cgroup_v1_cfs_quota(tmp_path):
    env = _fake_root(tmp_path, "5:memory:/x\n4:cpu,cpuacct:/docker/abc\n", V1_MOUNT, {
        "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "100000\n",
        "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
        "sys/fs/cgroup/memory/x/cpu.cfs_quota_us": "1\n"})  # not the cpu hierarchy: ignored
    assert probe(env)["usable"] == 1
    env = _fake_root(tmp_path, "4:cpu,cpuacct:/docker/abc\n", V1_MOUNT, {
        "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "-1\n"})  # unlimited
    assert probe(env)["usable"] == CPUS


@pytest.mark.parametrize("cgroup, mountinfo, files", [
    ("0::/j\n", V2_MOUNT, {"sys/fs/cgroup/j/cpu.max": "garbage\n"}),
    ("0::/j\n", V2_MOUNT, {"sys/fs/cgroup/j/cpu.max": "0 100000\n"}),
    ("0::/j\n", V2_MOUNT, {"sys/fs/cgroup/j/cpu.max": "-5 -1\n"}),
    ("0::/j\n", V2_MOUNT, {"sys/fs/cgroup/j/cpu.max": "99999999999999999999999 1\n"}),
    ("0::/j\n", V2_MOUNT, {"sys/fs/cgroup/j/cpu.max": b"\x00\xff 1\n"}),
    ("0::/../../etc\n", V2_MOUNT, {}),
    ("garbage without colons\n", "also garbage\n", {}),
    ("", "", {}),
    ("0::/j\n", "1 2 3\n - cgroup2\n" * 1000, {}),
])
def test_hostile_or_missing_cgroup_files_fall_back_to_the_affinity(tmp_path, cgroup, mountinfo,
                                                                   files):
    r = probe(_fake_root(tmp_path, cgroup, mountinfo, files))
    assert r["usable"] == CPUS, r


# ---- matmul's BLAS -------------------------------------------------------------------

def _numpy_uses_openblas():
    try:
        return "openblas" in np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    except Exception:
        return False


@pytest.mark.skipif(not _numpy_uses_openblas(), reason="numpy is not built with OpenBLAS")
def test_matmul_runs_on_numpys_openblas_and_leaves_its_threads_alone():
    info = of.config.blas()
    assert info["shared"] is not None and "openblas" in os.path.basename(info["shared"])
    before = info["shared_threads"]
    assert before >= 1
    x = np.random.default_rng(0).standard_normal((300, 200), dtype=np.float32)
    np.testing.assert_allclose(of.matmul(x, x.T).numpy(), x @ x.T, rtol=1e-4, atol=1e-4)
    assert of.config.blas()["shared_threads"] == before


@pytest.mark.parametrize("env", [{}, {"OPFORGE_BLAS": "numpy"}, {"OPFORGE_BLAS": "bundled"},
                                 {"OPFORGE_BLAS": "none"}, {"OPFORGE_NUM_THREADS": "1"},
                                 {"OPFORGE_BLAS": "/nonexistent/libopenblas.so"}])
def test_matmul_matches_numpy_whatever_blas_is_chosen(env):
    code = textwrap.dedent("""
        import json, numpy as np, opforge as of
        rng = np.random.default_rng(1)
        for dt in (np.float32, np.float64):
            tol = 1e-4 if dt == np.float32 else 1e-10
            for m, k, n in [(300, 200, 100), (1, 500, 3), (64, 64, 64)]:
                a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
                np.testing.assert_allclose(of.matmul(a, b).numpy(), a @ b, rtol=tol, atol=tol)
                np.testing.assert_allclose(of.matmul(b, a, transpose_a=True, transpose_b=True).numpy(),
                                           b.T @ a.T, rtol=tol, atol=tol)
            s = rng.standard_normal((6, 80, 70)).astype(dt)  # batched: the pool over the batch
            np.testing.assert_allclose(of.matmul(s, s, transpose_b=True).numpy(),
                                       s @ s.transpose(0, 2, 1), rtol=tol, atol=tol)
        print(json.dumps(of.config.blas()))
    """)
    full = {k: v for k, v in os.environ.items() if k not in POOL_ENV}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    mode = env.get("OPFORGE_BLAS")
    if mode == "none" or mode == "/nonexistent/libopenblas.so":
        assert info["matmul"] == "built-in" and info["bundled"] is None
    elif mode == "bundled":
        assert info["shared"] is None and info["matmul"] in ("bundled", "built-in")
    elif mode == "numpy":
        assert info["bundled"] is None
    if env.get("OPFORGE_NUM_THREADS") == "1" and info["shared_threads"] > 1:
        assert info["matmul"] != "numpy"  # numpy's BLAS would use more threads than allowed


def test_a_bundled_blas_someone_else_loaded_is_not_set_to_one_thread():
    # scipy loads the same scipy-openblas32 file opforge bundles; opforge must not
    # make it single-threaded under scipy's feet (it falls back to its own GEMM).
    code = textwrap.dedent("""
        import ctypes, numpy as np
        try:
            import scipy_openblas32
        except ImportError:
            print("SKIP"); raise SystemExit
        import os
        lib = ctypes.CDLL(os.path.join(scipy_openblas32.get_lib_dir(), "libscipy_openblas.so"))
        lib.scipy_openblas_set_num_threads(2)
        before = lib.scipy_openblas_get_num_threads()
        import opforge as of
        a = np.random.default_rng(0).standard_normal((200, 300)).astype(np.float32)
        np.testing.assert_allclose(of.matmul(a, a.T).numpy(), a @ a.T, rtol=1e-4, atol=1e-4)
        s = np.random.default_rng(0).standard_normal((6, 80, 70)).astype(np.float32)
        np.testing.assert_allclose(of.matmul(s, s, transpose_b=True).numpy(),
                                   s @ s.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)
        assert lib.scipy_openblas_get_num_threads() == before, lib.scipy_openblas_get_num_threads()
        print("OK", of.config.blas()["bundled"])
    """)
    full = {k: v for k, v in os.environ.items() if k not in POOL_ENV}
    full["OPFORGE_BLAS"] = "bundled"
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    if out.stdout.startswith("SKIP"):
        pytest.skip("scipy-openblas32 is not importable")
    assert out.stdout.split() == ["OK", "None"]
