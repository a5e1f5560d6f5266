"""The CNN example (examples/train_cnn_digits.py): a short run in CI, the full >= 98% run marked slow."""
import os
import sys

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("safetensors")
pytest.importorskip("tqdm")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
try:
    import train_cnn_digits
finally:
    sys.path.pop(0)


def test_cnn_learns_digits_in_a_few_epochs(capsys):
    # 3 epochs (a few seconds): already far above chance; the model file round-trips exactly.
    assert train_cnn_digits.main(["--epochs", "3", "--no-progress", "--min-accuracy", "0.9"]) == 0
    assert "running statistics identical: True" in capsys.readouterr().out


@pytest.mark.slow
def test_cnn_reaches_98_percent():
    assert train_cnn_digits.main(["--no-progress"]) == 0
