"""nn.Conv2d in eval mode runs Conv2DPacked over its filter packed once (pkg/opforge/nn/conv.py): the same
answer as the unpacked layer (numpy reference), one pack across calls, and a new pack whenever the weight
changes: an optimizer step, load_state_dict, the Tensor in-place methods, a replaced parameter, to(). With a
gradient to record it never packs."""
import numpy as np
import pytest

import opforge as of
import vision_reference as ref


def _want(m, x):
    c = m.config
    w = m.weight.numpy().astype(np.float64)
    pads = c["padding"] * 2 if isinstance(c["padding"], list) and len(c["padding"]) == 2 else c["padding"]
    y = ref.conv2d(x.astype(np.float64), w, strides=c["stride"], pads=pads, dilations=c["dilation"],
                   groups=c["groups"])
    return y + m.bias.numpy().reshape(1, -1, 1, 1) if c["bias"] else y


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("args,packs", [
    (dict(in_channels=16, out_channels=24, kernel_size=3, padding=1), True),                # Winograd
    (dict(in_channels=5, out_channels=80, kernel_size=3, stride=2, padding=[1, 2]), True),  # GEMM panels
    (dict(in_channels=8, out_channels=72, kernel_size=[1, 3], dilation=2, bias=False), True),
    (dict(in_channels=5, out_channels=7, kernel_size=3, stride=2, padding=[1, 2]), False),  # FusedConv2D
    (dict(in_channels=4, out_channels=6, kernel_size=1, bias=False), False),                # Conv2D
])
def test_eval_packs_once_where_it_pays_and_matches(args, packs):
    rng = np.random.default_rng(0)
    m = of.nn.Conv2d(**args, seed=1).eval()
    x = rng.standard_normal((2, args["in_channels"], 19, 17)).astype(np.float32)
    with of.no_grad():
        y = m(x).numpy()
        assert ("_pack" in m.__dict__) == packs
        if packs:
            blob = m._pack[3]
            m(x)
            assert m._pack[3] is blob  # packed once
    _close(y, _want(m, x))


def test_repacked_whenever_the_weight_changes():
    rng = np.random.default_rng(2)
    m = of.nn.Conv2d(16, 16, 3, padding=1, seed=3)
    x = rng.standard_normal((1, 16, 16, 16)).astype(np.float32)
    opt = of.optim.SGD(m.parameters(), lr=0.5)

    def ev():
        m.eval()
        with of.no_grad():
            y = m(x).numpy()
        _close(y, _want(m, x))
        m.train()
        return y

    y0 = ev()
    loss = (m(x) * of.tensor(rng.standard_normal((1, 16, 16, 16)).astype(np.float32))).sum()
    loss.backward()
    opt.step()  # in place
    y1 = ev()
    assert np.abs(y1 - y0).max() > 1e-3
    m.load_state_dict({"weight": np.ones((16, 16, 3, 3), np.float32), "bias": np.zeros(16, np.float32)})
    ev()
    with of.no_grad():
        m.weight.mul_(0.5)
        m.bias.add_(1.0)
    ev()
    m.set_weight("weight", rng.standard_normal((16, 16, 3, 3)).astype(np.float32))
    ev()
    m.bias = of.nn.Parameter(rng.standard_normal(16).astype(np.float32))
    ev()


def test_no_pack_with_a_gradient_to_record_or_in_train_mode():
    x = of.tensor(np.ones((1, 3, 8, 8), np.float32))
    m = of.nn.Conv2d(3, 4, 3).eval()
    m(x).sum().backward()  # eval alone still records: the filter gets its gradient
    assert m.weight.grad is not None and "_pack" not in m.__dict__
    with of.no_grad():
        m.train()(x)
    assert "_pack" not in m.__dict__
