"""Stateless layer functions and losses, each a composition of registered ops."""

from opforge import errors as _errors
from opforge import ops as _ops


# The activations FusedMatMul applies in its epilogue, and how to apply each unfused.
_ACTIVATIONS = {"relu": _ops.relu, "gelu": _ops.gelu, "sigmoid": _ops.sigmoid,
                "silu": lambda z: _ops.mul(z, _ops.sigmoid(z))}
# Those whose second derivative through the fused op is exact (act'' = 0
# almost everywhere); the others' raises, so the tape keeps their unfused ops.
_TAPE_SAFE = ("none", "relu")


_CONCRETE = None  # ((ndarray, Tensor), float32, grad_enabled), imported on first use (opforge imports this module)


def _fusable(activation, *xs):
    """Concrete float32 tensors: FusedMatMul's case (under the gradient tape too,
    for the activations whose every derivative the fused op has)."""
    global _CONCRETE
    if _CONCRETE is None:
        import numpy as np

        from opforge import Tensor
        from opforge.autodiff import state
        _CONCRETE = ((np.ndarray, Tensor), np.float32, state.grad_enabled)
    kinds, f32, grad_enabled = _CONCRETE
    if activation not in _TAPE_SAFE and grad_enabled() and any(getattr(v, "requires_grad", False) for v in xs):
        return False
    return all(isinstance(v, kinds) and v.dtype == f32 for v in xs)


def linear(x, weight, bias=None, activation=None):
    """activation(x @ weight.T (+ bias)); weight is [out_features, in_features].

    float32 with a bias runs as one FusedMatMul: the bias (and the activation:
    'relu', 'gelu', 'sigmoid' or 'silu') is applied in the GEMM's epilogue,
    also under the gradient tape (for 'gelu', 'sigmoid' and 'silu' only
    without one: their second derivatives need the unfused ops)."""
    act = activation or "none"
    if act != "none" and act not in _ACTIVATIONS:
        raise _errors.InvalidArgumentError(
            f"linear: argument 'activation' is {activation!r}; expected None, 'relu', 'gelu', 'sigmoid' or 'silu'")
    if bias is not None and _fusable(act, x, weight, bias) and np_ndim(x) >= 1 and np_ndim(bias) == 1:
        return _ops.fused_mat_mul(x, weight, bias, transpose_b=True, activation=act)
    y = _ops.mat_mul(x, weight, transpose_b=True)
    y = y if bias is None else _ops.add(y, bias)
    return y if act == "none" else _ACTIVATIONS[act](y)


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
