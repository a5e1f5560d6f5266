"""The benchmark harness (bench/) runs end to end in quick mode and catches wrong answers.

No timing is asserted: quick mode only proves that every case runs, checks its
result against numpy and lands in the JSON.
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

# Under the sanitizer build (.ci/sanitize) the benches' timings mean nothing and
# their ops are covered by the op tests; the quick bench run alone took a minute.
if os.environ.get("OPFORGE_SANITIZED"):
    pytest.skip("benchmarks run in the plain build only", allow_module_level=True)

ROOT = pathlib.Path(__file__).resolve().parents[1]
CASES = ["dispatch.add_1", "dispatch.add_1000", "dispatch.sum_1000", "dispatch.matmul_16",
         "dispatch.sum_axis1_keepdims", "elementwise.add", "elementwise.exp",
         "elementwise.sigmoid", "reduction.sum_all", "reduction.sum_last_axis",
         "matmul.32", "matmul.64", "matmul.linear_view", "protocol.add_1000", "protocol.sum_1000",
         "backward.softmax_grad",
         "backward.rms_norm_grad", "backward.matmul_grad_mlp", "backward.matmul_grad_tall",
         "backward.matmul_grad_batched", "train.digits_mlp_step", "train.adam_10M",
         "train.copy_10M", "dispatch.tensor_add_1", "dispatch.tensor_add_1000", "grad.add_1_recorded", "grad.add_1_beside_tape",
         "grad.mlp_step", "grad.hvp_mlp"]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "out.json"
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "--json", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    return proc, path


def test_quick_mode_exits_zero_and_prints_targets(quick_run):
    proc, _ = quick_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Targets (issues 4 and 15)" in proc.stdout
    assert "Matmul alone and alternating with numpy" in proc.stdout
    assert "WRONG" not in proc.stdout


def test_quick_mode_json_has_every_figure(quick_run):
    proc, path = quick_run
    data = json.loads(path.read_text())
    assert data["ok"] is True and data["problems"] == []
    assert data["meta"]["mode"] == "quick"
    assert data["meta"]["versions"]["numpy"] == np.__version__
    assert sorted(data["cases"]) == sorted(CASES)
    libs = {"numpy", "opforge"} | ({"torch"} if data["meta"]["versions"]["torch"] else set())
    for case_id, case in data["cases"].items():
        assert set(case["results"]) == libs, case_id
        for lib, r in case["results"].items():
            assert r["ok"] is True and r["error"] is None, (case_id, lib, r)
            assert len(r["samples_s"]) == data["meta"]["repeats"]
            assert r["median_s"] > 0
            if case["unit"] != "time":
                assert r["rate"] > 0
        assert "speedup_vs_numpy" in case["results"]["opforge"]
        if case["group"] == "matmul":  # issue 15's four modes, each with a positive ratio
            assert set(case["mode_speedups"]) == {
                "alone_warm", "alone_cold", "interleaved_warm", "interleaved_cold"}
            assert all(s["opforge"] > 0 for s in case["mode_speedups"].values())
    assert set(data["import"]) == {"runs"} | libs
    assert set(data["memory"]["results"]) == libs
    for r in data["memory"]["results"].values():
        assert r["ok"] is True
        # The output array alone is bytes_per_input: the peak must have grown by about that
        # much unless imports had already peaked higher, so only the order is checked.
        assert r["after_add"] >= r["inputs"] >= r["base"] > 0
    statuses = {t["target"]: t["status"] for t in data["targets"]}
    assert len(statuses) == 23  # issues 4 and 15: 15; issue 9: 3; issue 12: 2; issue 21: 2; issue 22: 1
    assert set(statuses.values()) <= {"PASS", "FAIL", "SKIP"}
    # Quick mode measures no 1024/2048 matmul and no 1 GB add.
    assert statuses["matmul 2048 float32: >= 0.95x numpy"] == "SKIP"
    assert statuses["matmul 256 float32, alone/interleaved x warm/cold: each >= 0.95x numpy"] == "SKIP"
    # The Dask pipeline (bench/dask_pipeline.py, a subprocess): judged at 4 GB only.
    dask = data["dask"]
    assert dask["ok"] is True and dask["speedup"] > 0 and dask["numpy_s"] > 0, dask
    assert statuses["Dask pipeline, 4 GB float32, threaded: >= 1.5x numpy's ops"] == "SKIP"
    # Graph and async mode against eager opforge (bench/engine.py, a subprocess).
    assert sorted(data["engine"]) == ["engine.async_overlap", "engine.async_submit", "engine.control_threads",
                                      "engine.graph_1000_tiny", "engine.graph_build", "engine.interop_chains"]
    assert data["engine"]["engine.graph_build"]["nodes_per_s"] > 0
    for case in data["engine"].values():
        assert case["baseline_s"] > 0 and case["new_s"] > 0 and case["ratio"] > 0


def test_a_wrong_answer_is_flagged():
    code = (
        "import numpy as np\n"
        "from bench import cases, run\n"
        "c = cases.Case('x.add', 'elementwise', 'add', (8,), 'GB/s', 96,\n"
        "    {'numpy': 'np.add(x, y)', 'opforge': 'of.add(x, y) + 1e-3'},\n"
        "    cases._namespace(None, __import__('opforge'), x=np.ones(8, np.float32),\n"
        "                     y=np.ones(8, np.float32)))\n"
        "r = run.measure(c, repeats=1, min_batch_s=0)['results']\n"
        "assert r['numpy']['ok'] and not r['opforge']['ok'], r\n"
        "assert 'differs from numpy' in r['opforge']['error'], r\n"
        "assert 'median_s' in r['opforge']  # still timed, and flagged\n"
        "print('flagged')\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "flagged" in proc.stdout, proc.stderr[-3000:]
