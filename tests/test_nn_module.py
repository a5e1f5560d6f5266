"""nn.Module registration by assignment, state_dict with PyTorch's keys, losses (numpy / PyTorch oracles)."""

import numpy as np
import pytest

import opforge as of
from opforge import errors


class Net(of.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = of.nn.Linear(4, 8, seed=1)
        self.act = of.nn.ReLU()
        self.fc2 = of.nn.Linear(8, 3, seed=2)
        self.scale = of.nn.Parameter(np.ones(3, np.float32))
        self.head = of.nn.Sequential(of.nn.Linear(3, 3, seed=3), of.nn.LayerNorm(3))
        self.note = "not a parameter"

    def forward(self, x):
        return self.head(self.fc2(self.act(self.fc1(x))) * self.scale)


KEYS = ["scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "head.0.weight", "head.0.bias",
        "head.1.weight", "head.1.bias"]


def test_assigned_layers_and_parameters_are_registered():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == KEYS
    assert len(net.parameters()) == 9 and net.fc1 is net._layers["fc1"] and net.note == "not a parameter"
    assert [n for n, _ in net.named_modules()][:3] == ["", "fc1", "act"]
    assert [n for n, _ in net.named_children()] == ["fc1", "act", "fc2", "head"]
    net.fc2 = of.nn.Linear(8, 3)  # reassigning replaces
    assert len(net.parameters()) == 9
    net.fc2 = None  # a plain value unregisters
    assert "fc2.weight" not in dict(net.named_parameters()) and net.fc2 is None
    y = Net()(of.tensor(np.ones((2, 4), np.float32)))
    assert y.shape == (2, 3)


def test_manual_seed_makes_initialization_repeatable():
    of.manual_seed(5)
    a = [p.numpy().copy() for p in Net().parameters()]
    b = [p.numpy().copy() for p in of.nn.Linear(4, 3).parameters()]
    of.manual_seed(5)
    assert all(np.array_equal(x, y) for x, y in zip(a, [p.numpy() for p in Net().parameters()]))
    c = [p.numpy() for p in of.nn.Linear(4, 3).parameters()]
    assert all(np.array_equal(x, y) for x, y in zip(b, c))
    assert not np.array_equal(of.nn.Linear(4, 3).weight.numpy(), c[0])  # the next layer draws new numbers


def test_forgetting_super_init_is_a_clear_error():
    class Bad(of.nn.Module):
        def __init__(self):
            self.fc = of.nn.Linear(2, 2)

    with pytest.raises(AttributeError, match="super"):
        Bad()


def test_train_eval_and_gradients_through_a_module():
    net = Net()
    net.eval()
    assert not net.training and not net.fc1.training and not net.head[1].training
    net.train()
    assert net.head[0].training
    x = of.tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    loss = of.nn.MSELoss()(net(x), np.zeros((5, 3), np.float32))
    loss.backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_state_dict_round_trip_in_place():
    a, b = Net(), Net()
    with of.no_grad():
        for p in b.parameters():
            p.add_(1.0)
    before = [id(p) for p in a.parameters()]
    result = a.load_state_dict(b.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert [id(p) for p in a.parameters()] == before  # same objects: optimizers keep them
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and np.array_equal(va.numpy(), vb.numpy())
    sd = {k: v.numpy() for k, v in b.state_dict().items()}
    del sd["scale"]
    with pytest.raises(errors.InvalidArgumentError, match="missing keys \\['scale'\\]"):
        a.load_state_dict(sd)
    assert a.load_state_dict(sd, strict=False).missing_keys == ["scale"]
    sd["scale"] = np.ones(4, np.float32)
    with pytest.raises(errors.InvalidArgumentError, match="'scale' has shape"):
        a.load_state_dict(sd)


def test_loads_a_pytorch_state_dict():
    torch = pytest.importorskip("torch")
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3), torch.nn.LayerNorm(3))
    onet = of.nn.Sequential(of.nn.Linear(4, 8), of.nn.ReLU(), of.nn.Linear(8, 3), of.nn.LayerNorm(3))
    tsd = tnet.state_dict()
    assert list(tsd) == list(onet.state_dict())
    onet.load_state_dict({k: v.numpy() for k, v in tsd.items()})  # numpy arrays...
    x = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
    np.testing.assert_allclose(onet(x).numpy(), tnet(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    onet.load_state_dict(tsd)  # ...or torch tensors
    back = tnet.load_state_dict({k: torch.tensor(v.numpy()) for k, v in onet.state_dict().items()})
    assert not back.missing_keys


def _bce(x, y):
    return np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))


def test_losses_against_numpy():
    rng = np.random.default_rng(2)
    p, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    np.testing.assert_allclose(float(of.nn.MSELoss()(p, t)), np.mean((p - t) ** 2), rtol=1e-12)
    np.testing.assert_allclose(float(of.nn.MSELoss("sum")(p, t)), np.sum((p - t) ** 2), rtol=1e-12)
    np.testing.assert_allclose(of.nn.L1Loss("none")(p, t).numpy(), np.abs(p - t), rtol=1e-12)
    labels = np.array([0, 2, 1, 2])
    logp = p - np.log(np.exp(p).sum(1, keepdims=True))
    np.testing.assert_allclose(float(of.nn.CrossEntropyLoss()(p, labels)), -logp[np.arange(4), labels].mean(),
                               rtol=1e-10)
    probs = np.exp(t) / np.exp(t).sum(1, keepdims=True)
    np.testing.assert_allclose(float(of.nn.CrossEntropyLoss()(p, probs)), -(probs * logp).sum(1).mean(), rtol=1e-10)
    y = (rng.random((4, 3)) > 0.5).astype(np.float64)
    big = p * 50  # stable for large logits
    np.testing.assert_allclose(float(of.nn.BCEWithLogitsLoss()(big, y)), _bce(big, y).mean(), rtol=1e-10)
    pw = np.array([1.0, 2.0, 0.5])
    ref = -(pw * y * np.log(1 / (1 + np.exp(-p))) + (1 - y) * np.log(1 - 1 / (1 + np.exp(-p))))
    np.testing.assert_allclose(of.nn.BCEWithLogitsLoss("none", pos_weight=pw)(p, y).numpy(), ref, rtol=1e-8)
    with pytest.raises(errors.InvalidArgumentError, match="reduction"):
        of.nn.MSELoss("avg")


def test_loss_gradients_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    p = rng.standard_normal((5, 4))
    y = (rng.random((5, 4)) > 0.5).astype(np.float64)
    labels = np.array([0, 3, 1, 2, 3])
    for ours, theirs, target in ((of.nn.MSELoss(), torch.nn.MSELoss(), y), (of.nn.L1Loss(), torch.nn.L1Loss(), y),
                                 (of.nn.BCEWithLogitsLoss(), torch.nn.BCEWithLogitsLoss(), y),
                                 (of.nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), labels)):
        x = of.tensor(p, requires_grad=True)
        loss = ours(x, target)
        loss.backward()
        tx = torch.tensor(p, requires_grad=True)
        tloss = theirs(tx, torch.tensor(target))
        tloss.backward()
        np.testing.assert_allclose(float(loss), float(tloss), rtol=1e-10)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-12)
