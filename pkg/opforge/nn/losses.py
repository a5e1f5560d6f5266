"""Loss modules with PyTorch's names, arguments and reductions, each a composition of registered ops.

    loss_fn = of.nn.CrossEntropyLoss()
    loss = loss_fn(logits, labels)      # module(input, target)
"""

from opforge import errors as _errors
from opforge import ops as _ops
from opforge.nn.functional import _reduce, cross_entropy as _sparse_ce
from opforge.nn.layer import Layer, register_layer


def mse_loss(input, target, reduction="mean"):
    return _reduce(_ops.square(_ops.sub(input, target)), reduction, "mse_loss")


def l1_loss(input, target, reduction="mean"):
    return _reduce(_ops.abs(_ops.sub(input, target)), reduction, "l1_loss")


def cross_entropy(input, target, reduction="mean"):
    """Integer class targets [batch] (one fused op) or class probabilities [batch, classes]."""
    tdtype = getattr(target, "dtype", None)
    tname = getattr(tdtype, "name", str(tdtype))
    if tname.startswith("float") or (hasattr(target, "ndim") and target.ndim == 2):
        loss = _ops.neg(_ops.sum(_ops.mul(target, _ops.log_softmax(input, -1)), -1))
        return _reduce(loss, reduction, "cross_entropy")
    return _sparse_ce(input, target, reduction)


def binary_cross_entropy_with_logits(input, target, reduction="mean", pos_weight=None):
    """max(x, 0) - x*y + log(1 + exp(-|x|)): stable for logits of any size (PyTorch's formula)."""
    x, y = input, target
    softplus_neg_abs = _ops.log(_ops.add(_ops.exp(_ops.neg(_ops.abs(x))), 1.0))
    if pos_weight is None:
        loss = _ops.add(_ops.sub(_ops.relu(x), _ops.mul(x, y)), softplus_neg_abs)
    else:  # (1 - y) x + (1 + (pw - 1) y) (log(1 + exp(-|x|)) + max(-x, 0))
        w = _ops.add(_ops.mul(_ops.sub(pos_weight, 1.0), y), 1.0)
        loss = _ops.add(_ops.mul(_ops.sub(1.0, y), x),
                        _ops.mul(w, _ops.add(softplus_neg_abs, _ops.relu(_ops.neg(x)))))
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


class _Loss(Layer):
    def __init__(self, reduction="mean", name=None, dtype="float32"):
        super().__init__(name, dtype)
        if reduction not in ("mean", "sum", "none"):
            raise _errors.InvalidArgumentError(
                f"{type(self).__name__}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.config = {"reduction": reduction}

    @property
    def reduction(self):
        return self.config["reduction"]



@register_layer
class MSELoss(_Loss):
    def forward(self, input, target):
        return mse_loss(input, target, self.reduction)


@register_layer
class L1Loss(_Loss):
    def forward(self, input, target):
        return l1_loss(input, target, self.reduction)


@register_layer
class CrossEntropyLoss(_Loss):
    def forward(self, input, target):
        return cross_entropy(input, target, self.reduction)


@register_layer
class BCEWithLogitsLoss(_Loss):
    def __init__(self, reduction="mean", pos_weight=None, name=None, dtype="float32"):
        super().__init__(reduction, name, dtype)
        self.pos_weight = pos_weight

    def forward(self, input, target):
        return binary_cross_entropy_with_logits(input, target, self.reduction, self.pos_weight)


__all__ = ["MSELoss", "L1Loss", "CrossEntropyLoss", "BCEWithLogitsLoss", "mse_loss", "l1_loss", "cross_entropy",
           "binary_cross_entropy_with_logits"]
