"""ONNX RNN, GRU and LSTM (pkg/opforge/onnx/_ops_rnn.py) against onnxruntime,
over the attributes the backend cases leave out: bidirectional with
sequence_lens, clip, named activations, linear_before_reset, peepholes,
input_forget, layout 1; and a gradient through the unrolled LSTM."""

import os

import numpy as np
import pytest

# Under the sanitizer build (.ci/sanitize) these would test onnx's and onnxruntime's
# C++ under an ASan preload, not opforge's (the op tests cover the kernels there).
if os.environ.get("OPFORGE_SANITIZED"):
    pytest.skip("ONNX suites run in the plain build only", allow_module_level=True)

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge as of  # noqa: E402
import opforge.onnx  # noqa: E402

F = TensorProto.FLOAT
SEQ, BATCH, IN, HID = 5, 3, 4, 6


def _model(op, gates, dirs, attrs, with_lens, with_peep=False, layout=0):
    rng = np.random.default_rng(sum(map(ord, op)) + dirs + len(attrs))
    inits = [numpy_helper.from_array(rng.uniform(-0.6, 0.6, (dirs, gates * HID, IN)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-0.6, 0.6, (dirs, gates * HID, HID)).astype(np.float32), "R"),
             numpy_helper.from_array(rng.uniform(-0.3, 0.3, (dirs, 2 * gates * HID)).astype(np.float32), "B")]
    names = ["X", "W", "R", "B", "lens" if with_lens else "", "h0"]
    if op == "LSTM":
        names += ["c0"]
        if with_peep:
            names += ["P"]
            inits.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, (dirs, 3 * HID)).astype(np.float32), "P"))
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, hidden_size=HID, layout=layout, **attrs)
    xshape = [BATCH, SEQ, IN] if layout else [SEQ, BATCH, IN]
    sshape = [BATCH, dirs, HID] if layout else [dirs, BATCH, HID]
    inputs = [helper.make_tensor_value_info("X", F, xshape), helper.make_tensor_value_info("h0", F, sshape)]
    if op == "LSTM":
        inputs.append(helper.make_tensor_value_info("c0", F, sshape))
    if with_lens:
        inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [BATCH]))
    outputs = [helper.make_tensor_value_info(o, F, None) for o in outs]
    g = helper.make_graph([node], "rnn", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), xshape, sshape


CASES = [
    ("RNN", 1, {"direction": "bidirectional", "activations": ["Relu", "Tanh"], "clip": 2.0}, True, False, 0),
    ("RNN", 1, {"direction": "reverse", "activations": ["LeakyRelu"], "activation_alpha": [0.2]}, True, False, 1),
    ("GRU", 3, {"direction": "bidirectional", "linear_before_reset": 1}, True, False, 0),
    ("GRU", 3, {"direction": "reverse", "activations": ["HardSigmoid", "Softsign"], "activation_alpha": [0.3],
                "activation_beta": [0.4]}, False, False, 1),
    ("LSTM", 4, {"direction": "bidirectional", "clip": 1.5}, True, True, 0),
    ("LSTM", 4, {"input_forget": 1, "activations": ["Sigmoid", "Elu", "ScaledTanh"], "activation_alpha": [1.1, 0.9],
                 "activation_beta": [0.8]}, False, True, 1),
]


@pytest.mark.parametrize("op, gates, attrs, with_lens, with_peep, layout", CASES)
def test_recurrent_matches_onnxruntime(op, gates, attrs, with_lens, with_peep, layout):
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    model, xshape, sshape = _model(op, gates, dirs, attrs, with_lens, with_peep, layout)
    rng = np.random.default_rng(3)
    feeds = {"X": rng.standard_normal(xshape).astype(np.float32),
             "h0": rng.standard_normal(sshape).astype(np.float32) * 0.5}
    if op == "LSTM":
        feeds["c0"] = rng.standard_normal(sshape).astype(np.float32) * 0.5
    if with_lens:
        feeds["lens"] = np.array([SEQ, 2, 4], np.int32)
    # onnxruntime runs layout 0 only: layout 1 is checked against it on transposed values.
    ref, _, _ = _model(op, gates, dirs, attrs, with_lens, with_peep, 0)
    sess = ort.InferenceSession(ref.SerializeToString(), providers=["CPUExecutionProvider"])
    ref_feeds = {k: (np.swapaxes(v, 0, 1).copy() if layout and k != "lens" else v) for k, v in feeds.items()}
    want = sess.run(None, ref_feeds)
    if layout:
        want = [np.transpose(want[0], (2, 0, 1, 3))] + [np.swapaxes(w, 0, 1) for w in want[1:]]
    got = opforge.onnx.run(model, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_gradient_flows_through_the_unrolled_lstm():
    model, xshape, sshape = _model("LSTM", 4, 1, {}, False)
    prog = opforge.onnx.load(model)
    rng = np.random.default_rng(4)
    x = rng.standard_normal(xshape)

    def loss(xv):
        feeds = {"X": xv.astype(np.float32), "h0": np.zeros(sshape, np.float32), "c0": np.zeros(sshape, np.float32)}
        return float(np.sum(prog.run(feeds)[1]))

    tx = of.tensor(x.astype(np.float32), requires_grad=True)
    env = dict(prog.initializers)
    env.update({"X": tx, "h0": np.zeros(sshape, np.float32), "c0": np.zeros(sshape, np.float32)})
    prog.evaluate(env)
    env["Y_h"].sum().backward()
    g = tx.grad.numpy()
    eps, (i, j, k) = 1e-2, (2, 1, 3)
    xp, xm = x.copy(), x.copy()
    xp[i, j, k] += eps
    xm[i, j, k] -= eps
    np.testing.assert_allclose(g[i, j, k], (loss(xp) - loss(xm)) / (2 * eps), rtol=2e-2, atol=1e-3)
