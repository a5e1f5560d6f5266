"""Stateless layer functions and losses, each a composition of registered ops."""

from opforge import errors as _errors
from opforge import ops as _ops


def _fusable(*xs):
    """Concrete float32 tensors no gradient is recorded for: FusedMatMul's case."""
    import numpy as np

    from opforge import Tensor
    from opforge.autodiff import state
    if state.grad_enabled() and any(getattr(v, "requires_grad", False) for v in xs):
        return False
    return all(isinstance(v, (np.ndarray, Tensor)) and v.dtype == np.float32 for v in xs)


def linear(x, weight, bias=None):
    """x @ weight.T (+ bias); weight is [out_features, in_features].

    Without a gradient to record (inference, `no_grad`), float32 runs as one
    FusedMatMul: the bias is added in the GEMM's epilogue."""
    if bias is not None and _fusable(x, weight, bias) and np_ndim(x) >= 1 and np_ndim(bias) == 1:
        return _ops.fused_mat_mul(x, weight, bias, transpose_b=True)
    y = _ops.mat_mul(x, weight, transpose_b=True)
    return y if bias is None else _ops.add(y, bias)


def np_ndim(v):
    return len(v.shape)


def dropout(x, p, seed, training=True):
    """x * mask, the mask from the DropoutMask op (0 with probability p, else 1/(1-p))."""
    if not training or p == 0:
        return x
    return _ops.mul(x, _ops.dropout_mask(x, rate=p, seed=seed))


def _reduce(loss, reduction, fn):
    if reduction == "mean":
        return _ops.mean(loss)
    if reduction == "sum":
        return _ops.sum(loss)
    if reduction == "none":
        return loss
    raise _errors.InvalidArgumentError(f"{fn}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def cross_entropy(logits, labels, reduction="mean"):
    """Softmax cross-entropy of [batch, classes] logits against integer labels [batch].

    One fused, numerically stable op (SparseSoftmaxCrossEntropyWithLogits);
    an out-of-range label raises InvalidArgumentError naming it.
    """
    loss, _ = _ops.sparse_softmax_cross_entropy_with_logits(logits, labels)
    return _reduce(loss, reduction, "cross_entropy")


def mse_loss(pred, target, reduction="mean"):
    """Mean (or sum) of (pred - target)**2."""
    return _reduce(_ops.square(_ops.sub(pred, target)), reduction, "mse_loss")


# Convolution, pooling, normalization and activations (NCHW).
from opforge.nn.functional_vision import *  # noqa: E402,F401,F403
from opforge.nn.attention import scaled_dot_product_attention  # noqa: E402,F401
