"""Training on sklearn's digits: with the backward ops called by hand (no tape), and the example itself."""

import os
import subprocess
import sys

import numpy as np
import pytest

import opforge as of

pytest.importorskip("sklearn")
from test_train_ops import NEEDS_MODEL_GRADS  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "train_digits.py")


def manual_step(model, opt, x, y):
    """One Adam step of Linear-ReLU-Linear, its gradients from the backward ops directly."""
    l1, l2 = model[0], model[-1]
    w1, b1, w2, b2 = model.parameters()
    h = l1(x)
    a = of.relu(h)
    logits = l2(a)
    loss, back = of.sparse_softmax_cross_entropy_with_logits(logits, y)
    dlogits = of.div(back, float(len(y)))
    da = of.mat_mul(dlogits, w2)
    dh = of.where(of.greater(h, 0.0), da, 0.0)
    grads = [of.mat_mul(dh, x, transpose_a=True), of.sum(dh, axis=0),
             of.mat_mul(dlogits, a, transpose_a=True), of.sum(dlogits, axis=0)]
    opt.step(grads=grads)
    return float(of.mean(loss))


@pytest.mark.slow  # ~10 s; kept out of the sanitizer pass (ApplyAdam etc. are covered by test_train_ops.py)
def test_mlp_trains_to_high_accuracy_with_backward_ops():
    sys.path.insert(0, os.path.dirname(EXAMPLE))
    try:
        import train_digits
    finally:
        sys.path.pop(0)
    x_tr, y_tr, x_te, y_te = train_digits.load_data(0)
    model = train_digits.build_model(0, hidden=128, dropout=0.0)
    opt = of.optim.Adam(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    first = None
    for _ in range(8):
        order = rng.permutation(len(x_tr))
        for i in range(0, len(x_tr), 64):
            idx = order[i:i + 64]
            with of.no_grad():  # the backward ops by hand: nothing to record
                loss = manual_step(model, opt, x_tr[idx], y_tr[idx])
            first = loss if first is None else first
    pred = of.argmax(model(x_te), axis=1).numpy()
    assert loss < first / 10
    assert (pred == y_te).mean() >= 0.95


@pytest.mark.slow
@NEEDS_MODEL_GRADS
def test_example_short_run(tmp_path):
    """CI's quick version of examples/train_digits.py (the full run is 30 epochs, >= 97%)."""
    pytest.importorskip("tqdm")
    pytest.importorskip("matplotlib")
    png = tmp_path / "loss.png"
    r = subprocess.run([sys.executable, EXAMPLE, "--epochs", "4", "--min-accuracy", "0.9", "--plot", str(png),
                        "--save", str(tmp_path / "m.safetensors")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "weights identical: True" in r.stdout and png.stat().st_size > 1000
    # The path it prints is the one it wrote.
    assert f"saved to {tmp_path / 'm.safetensors'} (" in r.stdout
