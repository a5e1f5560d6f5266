"""examples/sparse_table: a stateful op library built out of tree with the
SDK (CMake), loaded with load_op_library, training a click-through model in
graph mode (issue 26 item 8)."""

import importlib.util
import pathlib

import numpy as np
import pytest

import opforge as of
from opforge import errors

import op_library_build

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "sparse_table"
# Loads the library into this process: its ops join the registry for good.
pytestmark = pytest.mark.loads_op_libraries


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    build = tmp_path_factory.mktemp("sparse_table_build")
    op_library_build.run(["cmake", "-S", str(EXAMPLE), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                          f"-DCMAKE_PREFIX_PATH={of.sysconfig.get_cmake_dir()}"])
    op_library_build.run(["cmake", "--build", str(build)])
    return build / "libsparse_table_ops.so"


@pytest.fixture(scope="module")
def lib(library):
    return of.load_op_library(library)


def _example():
    spec = importlib.util.spec_from_file_location("train_ctr", EXAMPLE / "train_ctr.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pull_makes_rows_on_first_sight_and_push_is_adagrad(lib):
    g = of.Graph()
    with g.as_default():
        ids = of.placeholder(of.int64, [None], name="ids")
        grads = of.placeholder(of.float32, [None, 3], name="grads")
        rows = lib.sparse_table_pull(ids, table="t", dim=3, seed=5)
        push = lib.sparse_table_push(ids, grads, table="t", dim=3, learning_rate=0.5, initial_accumulator=0.1)
        size = lib.sparse_table_size(table="t")
    with of.Session(g) as sess:
        assert sess.run(size) == 0
        first = sess.run(rows, {ids: np.array([7, 3, 7], np.int64)})
        assert first.shape == (3, 3) and np.all(np.abs(first) <= 0.05) and np.ptp(first) > 0
        np.testing.assert_array_equal(first[0], first[2])  # one id, one row
        assert sess.run(size) == 2
        g1 = np.array([[1, 2, 3], [0.5, 0, -1], [1, 0, 1]], np.float32)
        assert sess.run(push, {ids: np.array([7, 3, 7], np.int64), grads: g1}) == 2
        after = sess.run(rows, {ids: np.array([7, 3], np.int64)})
        # Adagrad, repeated ids summed first: acc = 0.1 + g^2, row -= lr * g / sqrt(acc).
        g7, g3 = g1[0] + g1[2], g1[1]
        for got, before, g_ in ((after[0], first[0], g7), (after[1], first[1], g3)):
            np.testing.assert_allclose(got, before - 0.5 * g_ / np.sqrt(0.1 + g_ * g_), rtol=1e-6, atol=1e-7)
        with pytest.raises(errors.OpError, match="no row for id 99"):
            sess.run(push, {ids: np.array([3, 99], np.int64), grads: np.ones((2, 3), np.float32)})
        np.testing.assert_array_equal(sess.run(rows, {ids: np.array([3], np.int64)})[0], after[1])  # all or nothing
    with of.Session(g) as other:  # state belongs to a Session: a new one starts empty
        assert other.run(size) == 0
        np.testing.assert_array_equal(other.run(rows, {ids: np.array([7, 3, 7], np.int64)}), first)  # (seed, id) only


def test_bad_arguments_are_refused_naming_the_op(lib):
    g = of.Graph()
    with g.as_default():
        ids = of.placeholder(of.int64, [4], name="ids")
        with pytest.raises(errors.InvalidArgumentError, match="SparseTablePush.*grads"):
            lib.sparse_table_push(ids, of.placeholder(of.float32, [4, 2]), table="t", dim=3)
        with pytest.raises(errors.InvalidArgumentError, match="dim"):
            lib.sparse_table_pull(ids, table="t", dim=0)
        pull2 = lib.sparse_table_pull(ids, table="t", dim=2)
        pull3 = lib.sparse_table_pull(ids, table="t", dim=3)
    with of.Session(g) as sess:
        sess.run(pull2, {ids: np.arange(4)})
        with pytest.raises(errors.InvalidArgumentError, match="table 't' has rows of 2 but attr 'dim' is 3"):
            sess.run(pull3, {ids: np.arange(4)})


def test_training_the_click_through_model_beats_the_click_rate(library):
    result = _example().train(str(library), epochs=4, n_train=4000, n_test=1500, verbose=False)
    train_losses = [h[0] for h in result["history"]]
    held_out = [h[1] for h in result["history"]]
    assert train_losses[-1] < train_losses[0] - 0.02
    assert held_out[-1] < result["baseline"] - 0.02, (held_out, result["baseline"])
    assert held_out[-1] > result["hidden_model"] - 0.01  # no better than the truth (a sanity check)
    ids, _, _ = _example().make_data(4000, seed=0)
    test_ids, _, _ = _example().make_data(1500, seed=1)
    assert result["rows"] == len(np.unique(np.concatenate([ids.ravel(), test_ids.ravel()])))
