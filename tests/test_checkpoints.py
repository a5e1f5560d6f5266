"""of.train.Saver and of.train.Checkpoint (issue 26 item 5), and the
safetensors reader fed hostile files."""
import json
import subprocess
import sys

import numpy as np
import pytest

import opforge as of
from opforge.train import _safetensors


def _graph(seed):
    g = of.Graph()
    with g.as_default():
        w = of.Variable(np.full((2, 3), seed, np.float32), name="w")
        n = of.Variable(np.int64(seed), name="n", trainable=False)
        init = of.global_variables_initializer()
        saver = of.train.Saver()
    return g, w, n, init, saver


def test_saver_round_trip_into_another_session(tmp_path):
    g, w, n, init, saver = _graph(1)
    path = str(tmp_path / "model.safetensors")
    with of.Session(g) as sess:
        sess.run(init)
        sess.run(w.assign_add(np.ones((2, 3), np.float32)))
        assert saver.save(sess, path) == path
    with of.Session(g) as other:
        saver.restore(other, path)  # no initializer needed
        np.testing.assert_array_equal(other.run(w), np.full((2, 3), 2.0))
        assert other.run(n) == 1


def test_saver_restore_in_a_new_process(tmp_path):
    g, w, n, init, saver = _graph(4)
    path = str(tmp_path / "m.safetensors")
    with of.Session(g) as sess:
        sess.run(init)
        saver.save(sess, path)
    code = f"""
import numpy as np, opforge as of
g = of.Graph()
with g.as_default():
    w = of.Variable(np.zeros((2, 3), np.float32), name="w")
    n = of.Variable(np.int64(0), name="n", trainable=False)
    saver = of.train.Saver()
with of.Session(g) as s:
    saver.restore(s, {path!r})
    print(float(s.run(w).sum()), int(s.run(n)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["24.0", "4"]


def test_saver_restore_refuses_a_missing_or_mismatched_variable(tmp_path):
    path = str(tmp_path / "x.safetensors")
    _safetensors.save_file({"w": np.zeros((3, 2), np.float32), "n": np.int64(0)}, path)
    g, w, n, init, saver = _graph(0)
    with of.Session(g) as sess:
        with pytest.raises(of.errors.InvalidArgumentError, match=r"variable 'w' is float32 \[2, 3\]"):
            saver.restore(sess, path)
    _safetensors.save_file({"w": np.zeros((2, 3), np.float32)}, path)
    with of.Session(g) as sess:
        with pytest.raises(of.errors.NotFoundError, match="no variable 'n'"):
            saver.restore(sess, path)


def test_checkpoint_of_eager_variables_and_a_model(tmp_path):
    model = of.nn.Sequential(of.nn.Linear(3, 2, seed=0), of.nn.ReLU())
    step = of.Variable(np.int64(7), name="ckpt_step", trainable=False)
    ckpt = of.train.Checkpoint(model=model, step=step)
    path = str(tmp_path / "c.safetensors")
    x = np.ones((1, 3), np.float32)
    before = model(x).numpy()
    ckpt.save(path)
    for p in model.parameters():
        p.numpy()[...] = 0
    step.assign(np.int64(0))
    ckpt.restore(path)
    np.testing.assert_array_equal(model(x).numpy(), before)
    assert int(step.numpy()) == 7


def _write_raw(path, header_bytes, data=b""):
    with open(path, "wb") as f:
        f.write(len(header_bytes).to_bytes(8, "little") + header_bytes + data)


@pytest.mark.parametrize("header, data, needle", [
    (None, b"", "shorter than"),
    (b"{", b"", "not JSON"),
    (b"[]", b"", "not a JSON object"),
    (json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}).encode(), b"\0" * 4, "do not hold"),
    (json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 400]}}).encode(), b"\0" * 4, "do not hold"),
    (json.dumps({"w": {"dtype": "X9", "shape": [1], "data_offsets": [0, 4]}}).encode(), b"\0" * 4, "dtype"),
    (json.dumps({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}).encode(), b"\0" * 4, "bad shape"),
    (json.dumps({"w": {"dtype": "F32", "shape": [1]}}).encode(), b"\0" * 4, "exactly"),
    (b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
     b'"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', b"\0" * 4, "twice"),
    (json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                 "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}).encode(), b"\0" * 8, "overlap"),
    (json.dumps({"__metadata__": {"k": 1}}).encode(), b"", "metadata"),
])
def test_hostile_checkpoint_files_are_refused_by_name(tmp_path, header, data, needle):
    path = str(tmp_path / "bad.safetensors")
    if header is None:
        with open(path, "wb") as f:
            f.write(b"\1\2")
    else:
        _write_raw(path, header, data)
    with pytest.raises(of.errors.InvalidArgumentError, match=needle) as info:
        _safetensors.load_file(path)
    assert "bad.safetensors" in str(info.value)


def test_a_header_length_beyond_the_file_is_refused(tmp_path):
    path = str(tmp_path / "huge.safetensors")
    with open(path, "wb") as f:
        f.write((1 << 60).to_bytes(8, "little") + b"{}")
    with pytest.raises(of.errors.InvalidArgumentError, match="exceeds the file"):
        _safetensors.load_file(path)
