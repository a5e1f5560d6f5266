"""The vision benches run (--quick) where their peers are installed; no timing is asserted."""
import pytest


def test_conv_bench_runs_and_matches_torch(capsys):
    pytest.importorskip("torch")
    from bench import conv
    assert conv.main(["--quick", "--batches", "1"]) == 0
    assert "backward filter b1" in capsys.readouterr().out


@pytest.mark.slow
def test_vision_models_bench_matches_onnxruntime(capsys):
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    from bench import vision_models
    try:  # through the bench's import, which copes with a torchvision whose C++ ops cannot load
        vision_models._import_torchvision()
    except ImportError:
        pytest.skip("torchvision is not installed")
    assert vision_models.main(["--quick", "--models", "squeezenet1_0", "--batches", "1"]) == 0
    assert "squeezenet1_0" in capsys.readouterr().out


def test_cnn_training_step_bench_runs_and_losses_agree(capsys):
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    from bench import vision_train
    assert vision_train.main(["--quick"]) == 0
    assert "torch/opforge" in capsys.readouterr().out
